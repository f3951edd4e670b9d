//===- device_cpu.cc - the CPU as a Device over backends/cpu ---------------===//
//
// Host memory, so the executor uses inputs, weights and outputs in place.
// Kernels run synchronously (tfc::cpu::runKernel) on the session's OpenMP
// threads, so sync() has nothing to wait for.
//
// The CPU's only weight preparation is oneDNN's packed layout for linear
// weights. The packs live in the CPU device's pack cache, not in the immutable
// Model: a CPU session holds the packs of its model, and every CPU session on
// the same weight bytes shares them (the cache holds weak references, so the
// packs go when the last such session does). Packing happens when a session is
// created, so a run never pays for it and a CPU oneDNN cannot serve fails there.
//
//===----------------------------------------------------------------------===//
#include "runtime/device.h"

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/kernels_cpu.h"
#include "backends/cpu/linear_dnnl.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <omp.h>
#include <sys/mman.h>
#include <unistd.h>
#include <tuple>
#include <unordered_map>

namespace tfrun::rt {
namespace {

/// Packed linear weights by what they were packed from. Thread-safe.
class PackCache {
public:
  using Key = std::tuple<const void *, int64_t, int64_t, uint32_t, const float *, int64_t>;
  static PackCache &get() {
    static PackCache *cache = new PackCache; // never destroyed: sessions may outlive statics
    return *cache;
  }
  Status pack(const Key &key, std::shared_ptr<tfc::cpu::PackedLinear> &out,
              const std::function<void(uint64_t, uint64_t)> &done) {
    std::lock_guard<std::mutex> lock(mu);
    std::weak_ptr<tfc::cpu::PackedLinear> &slot = packs[key];
    out = slot.lock();
    if (out)
      return Status::ok();
    std::string err;
    out = tfc::cpu::packLinear(std::get<0>(key), std::get<3>(key), std::get<1>(key),
                               std::get<2>(key), std::get<4>(key), std::get<5>(key), err, done);
    if (!out)
      return tfc::cpu::cpuPaths().supported ? Status::internal(err) : Status::unsupported(err);
    slot = out;
    // Forget packs no session holds any more, so the map stays small.
    for (auto it = packs.begin(); it != packs.end();)
      it = it->second.expired() ? packs.erase(it) : std::next(it);
    return Status::ok();
  }

private:
  std::mutex mu;
  std::map<Key, std::weak_ptr<tfc::cpu::PackedLinear>> packs;
};

/// Allocations from this size on are anonymous mappings (page-aligned, lazy).
constexpr size_t kMapFrom = size_t(1) << 20;

class CpuDevice : public Device {
public:
  explicit CpuDevice(int threads) : threads(threads) {}
  ~CpuDevice() override {
    for (auto &[p, bytes] : mapped)
      munmap(p, bytes);
  }
  std::string describe() const override { return tfc::cpu::describeCpuPaths(); }
  bool hostMemory() const override { return true; }

  Status bindModel(const Model &m) override {
    model = &m;
    packed.assign(m.functions.size(), {});
    // The linear weights to pack, largest first: packing reads a weight's
    // pages while its packed copy grows, and drops them after (below), so the
    // peak memory is the packed total plus the largest weight's pages only
    // while that weight is the first one packed.
    struct Job {
      size_t fn;
      uint32_t value;
      uint64_t bytes;
    };
    std::vector<Job> jobs;
    for (size_t fi = 0; fi < m.functions.size(); ++fi) {
      const Function &f = m.functions[fi];
      packed[fi].resize(f.values.size());
      std::vector<char> queued(f.values.size(), 0);
      for (const Instr &in : f.plan) {
        if (in.kernel != TFC_KERNEL_LINEAR && in.kernel != TFC_KERNEL_FUSED_LINEAR)
          continue;
        uint32_t wv = in.inputs[1]; // the loader checked the arity
        const ValueDesc &w = f.values[wv];
        // A weight the linear kernel's rules reject (backends/kernel_rules.h)
        // is not packed: the call fails with that rule's message at run time.
        // Nor are float weights that claim groups.
        if (w.storage != Storage::Weight || w.dims.size() != 2 || w.dims[0] < 1 ||
            w.dims[1] < 1 ||
            (w.quant.group != 0 && w.dtype != TFC_DTYPE_I4 && w.dtype != TFC_DTYPE_I8) ||
            queued[wv])
          continue;
        queued[wv] = 1;
        jobs.push_back(
            {fi, wv, tfc_dtype_bytes(w.dtype, (uint64_t)w.dims[0] * (uint64_t)w.dims[1])});
      }
    }
    std::stable_sort(jobs.begin(), jobs.end(),
                     [](const Job &a, const Job &b) { return a.bytes > b.bytes; });
    for (const Job &j : jobs) {
      const ValueDesc &w = m.functions[j.fn].values[j.value];
      // A quantized weight's descriptor names its scales (checked by the loader).
      const float *scales =
          w.quant.quantized()
              ? reinterpret_cast<const float *>(m.weights +
                                                m.functions[j.fn].values[w.quant.scales].offset)
              : nullptr;
      // The int8 packers report rows they are done with as they go, so a
      // large weight (a 136 MB tied vocabulary table) is not resident twice.
      TFC_RETURN_IF_ERROR(PackCache::get().pack(
          {m.weights + w.offset, w.dims[0], w.dims[1], w.dtype, scales, (int64_t)w.quant.group},
          packed[j.fn][j.value],
          [&](uint64_t off, uint64_t bytes) { m.dropWeightPages(w.offset + off, bytes); }));
      // The kernels read the packed copy only: the file's pages of this
      // weight leave the process (model.h), so the weights are resident
      // once. A weight that is also read unpacked (a tied embedding table)
      // faults back in only the pages read.
      m.dropWeightPages(w.offset, j.bytes);
    }
    // A weight that one function packs and another reads unpacked (a token
    // table tied to the lm_head of decode_step, read by encode's embedding)
    // gets the packed copy there too, so that the embedding reads its rows
    // from it (packedRowTimes) rather than fault the dropped file pages back
    // in: a Marian batch of 1,280 random source ids had 95 MB of the 119 MB
    // table resident again, beside its packed copy.
    // The same bytes: offset, shape, dtype, and a quantized weight's group
    // and scales' offset. Not a weight with zero points (the packs have none).
    auto shareable = [&](size_t fn, const ValueDesc &v) {
      return v.storage == Storage::Weight && v.dims.size() == 2 &&
             v.quant.zeros == tfc::format::kNoValue &&
             (!v.quant.quantized() || v.quant.scales < m.functions[fn].values.size());
    };
    auto bytesOf = [&](size_t fn, const ValueDesc &v) {
      const bool q = v.quant.quantized();
      return std::make_tuple(v.offset, v.dims[0], v.dims[1], v.dtype,
                             q ? (int64_t)v.quant.group : -1,
                             q ? m.functions[fn].values[v.quant.scales].offset : 0);
    };
    std::map<decltype(bytesOf(0, ValueDesc())), std::shared_ptr<tfc::cpu::PackedLinear>> byBytes;
    for (const Job &j : jobs)
      if (shareable(j.fn, m.functions[j.fn].values[j.value]))
        byBytes.emplace(bytesOf(j.fn, m.functions[j.fn].values[j.value]), packed[j.fn][j.value]);
    for (size_t fi = 0; fi < m.functions.size() && !byBytes.empty(); ++fi)
      for (size_t vi = 0; vi < m.functions[fi].values.size(); ++vi) {
        const ValueDesc &v = m.functions[fi].values[vi];
        if (packed[fi][vi] || !shareable(fi, v))
          continue;
        auto it = byBytes.find(bytesOf(fi, v));
        if (it != byBytes.end())
          packed[fi][vi] = it->second;
      }
    return Status::ok();
  }
  Status weight(size_t fn, uint32_t value, uint32_t dtype, void **data,
                const void **pack) override {
    const ValueDesc &v = model->functions[fn].values[value];
    if (dtype != v.dtype)
      return Status::internal("the CPU computes in model.bin's dtypes");
    *data = const_cast<uint8_t *>(model->weights + v.offset);
    *pack = packed[fn][value].get();
    return Status::ok();
  }

  Status alloc(size_t bytes, void **out, bool zeroed) override {
    // More than the machine's memory can never be backed: the mapping might
    // succeed (overcommit) and the run die when it touches the pages.
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0 && bytes / (uint64_t)page > (uint64_t)pages)
      return Status::outOfMemory("cannot allocate " + std::to_string(bytes) +
                                 " bytes: more than this machine's " +
                                 std::to_string((uint64_t)pages * (uint64_t)page) +
                                 " bytes of memory");
    if (zeroed || bytes >= kMapFrom) {
      // Anonymous pages read as zeros and cost nothing until touched: an arena
      // or a KV cache sized for the declared maxima stays cheap for short runs.
      void *p = mmap(nullptr, bytes ? bytes : 64, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED)
        return Status::outOfMemory("cannot map " + std::to_string(bytes) + " bytes");
      mapped[p] = bytes ? bytes : 64;
      *out = p;
      return Status::ok();
    }
    // 64-byte aligned, as the planner's offsets and the kernels' vector loads assume.
    *out = std::aligned_alloc(64, (std::max<size_t>(bytes, 64) + 63) / 64 * 64);
    return *out ? Status::ok()
                : Status::outOfMemory("cannot allocate " + std::to_string(bytes) + " bytes");
  }
  void release(void *p) override {
    auto it = mapped.find(p);
    if (it == mapped.end()) {
      std::free(p);
      return;
    }
    munmap(p, it->second);
    mapped.erase(it);
  }
  Status upload(void *dst, const void *src, size_t n) override {
    std::memcpy(dst, src, n);
    return Status::ok();
  }
  Status download(void *dst, const void *src, size_t n) override { return upload(dst, src, n); }
  Status copy(void *dst, const void *src, size_t n) override { return upload(dst, src, n); }

  void beginRun() override {
    // The thread count is per OpenMP thread: set it on the thread that runs.
    if (threads > 0)
      omp_set_num_threads(threads);
  }
  Status run(const Instr &in, const std::vector<const tfc::Tensor *> &args,
             tfc::Tensor &out) override {
    return tfc::cpu::runKernel(in.kernel, args, out, in.ints, in.floats);
  }
  Status sync() override { return Status::ok(); }

private:
  int threads;
  const Model *model = nullptr;
  /// Per function and value: the packed copy of a linear weight, or null.
  std::vector<std::vector<std::shared_ptr<tfc::cpu::PackedLinear>>> packed;
  /// The zeroed allocations, which are mappings.
  std::unordered_map<void *, size_t> mapped;
};

} // namespace

Status createCpuDevice(int threads, uint32_t computeDtype, std::unique_ptr<Device> &out) {
  if (const tfc::cpu::CpuPaths &cpu = tfc::cpu::cpuPaths(); !cpu.supported)
    return Status::unsupported(cpu.error);
  if (computeDtype != TFC_DTYPE_F32)
    return Status::unsupported("on the CPU the precision is chosen at compile time "
                               "(tfc compile --precision bf16 | int8); compute_dtype must be f32");
  out = std::make_unique<CpuDevice>(threads);
  return Status::ok();
}

} // namespace tfrun::rt
