//===- tfrun.cc - sessions, the executor and the C API --------------------===//
//
// A session owns one arena sized for the declared maximum dims (from the plan)
// and the bound inputs. A run binds the symbolic dims from the inputs' shapes,
// gives every value its actual shape and address (inputs, weights in the loaded
// model, arena slots, views), and calls the backend kernel of each instruction.
// Nothing here throws across the C API: every entry point catches and converts.
//
//===----------------------------------------------------------------------===//
#include "tfrun/tfrun.h"

#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/kernels_cpu.h"
#include "runtime/device.h"
#include "runtime/generate.h"
#include "runtime/model.h"
#include "tfc/bf16.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <map>
#include <new>
#include <omp.h>

struct tfrun_status {
  tfrun_code_t code;
  std::string message;
};

struct tfrun_model {
  std::unique_ptr<tfrun::Model> m;
};

struct tfrun_session {
  const tfrun::Model *m = nullptr;
  int threads = 0;
  /// The inputs the user bound (by @forward's input names), token ids widened to i64.
  struct Input {
    bool bound = false;
    std::vector<int64_t> shape;
    std::vector<int64_t> ids;
  };
  std::vector<Input> inputs;
  /// Per function: its arena (allocated on the function's first run) and the
  /// tensors of its last run.
  struct FnState {
    void *arena = nullptr;
    std::vector<tfc::cpu::Tensor> tensors;
    // A device session only (dev != null): each value's dtype on the device
    // (the compute dtype may differ from model.bin's), its weight pointer,
    // the device copies of the inputs, and the outputs of the last run,
    // downloaded and widened to f32.
    std::vector<uint32_t> dtypes;
    std::vector<void *> weightPtrs;
    std::vector<std::pair<void *, size_t>> devInputs;
    std::map<uint32_t, std::vector<float>> hostOutputs;
    ~FnState() { std::free(arena); }
  };
  std::vector<FnState> fns;
  void *state = nullptr; ///< KV caches, allocated on the first decode step
  int lastRun = -1;      ///< the function whose outputs get_output reads
  bool profiling = false;
  /// Per (kernel, precision label): total milliseconds and calls.
  struct KernelTime {
    double ms = 0;
    uint64_t calls = 0;
  };
  std::map<std::pair<uint32_t, std::string>, KernelTime> kernelTimes;
  std::string profileText;
  /// The last generate's results.
  std::vector<std::vector<int64_t>> generated;
  std::vector<float> scores;
  /// Where the plan runs: null for the CPU; otherwise a device (CUDA) that
  /// owns the arenas, the state, the inputs' copies and the weights.
  std::unique_ptr<tfrun::Device> dev;
  std::string deviceText = "cpu";
  uint32_t computeDtype = TFC_DTYPE_F32;
  void *devWeights = nullptr;           ///< the weights section, as stored
  std::vector<void *> convertedWeights; ///< weights converted to computeDtype
  ~tfrun_session() {
    if (dev) {
      for (FnState &fs : fns) {
        dev->release(fs.arena);
        fs.arena = nullptr;
        for (auto &in : fs.devInputs)
          dev->release(in.first);
      }
      dev->release(state);
      state = nullptr;
      dev->release(devWeights);
      for (void *p : convertedWeights)
        dev->release(p);
    }
    std::free(state);
  }
};

namespace {

tfrun_status_t *makeStatus(tfrun_code_t code, std::string msg) {
  auto *s = new (std::nothrow) tfrun_status;
  if (!s)
    return nullptr; // cannot report; callers treat a null status as success only
                    // when they created none, so OOM here is the one lossy case
  s->code = code;
  s->message = std::move(msg);
  return s;
}

tfrun_status_t *fromError(const tfrun::Error &e) {
  return e ? makeStatus(static_cast<tfrun_code_t>(e.code), e.message) : nullptr;
}

/// Runs |f| and converts any C++ exception into a status.
template <typename F> tfrun_status_t *guarded(F f) {
  try {
    return f();
  } catch (const std::bad_alloc &) {
    return makeStatus(TFRUN_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception &e) {
    return makeStatus(TFRUN_INTERNAL, e.what());
  } catch (...) {
    return makeStatus(TFRUN_INTERNAL, "unknown internal error");
  }
}

/// An input of one function run: a pointer the caller keeps alive for the run.
struct BoundInput {
  const void *data = nullptr;
  uint32_t dtype = TFC_DTYPE_I64;
  std::vector<int64_t> shape;
};

void *alignedAlloc(uint64_t bytes) {
  return std::aligned_alloc(64, (std::max<uint64_t>(bytes, 64) + 63) / 64 * 64);
}

float halfToFloat(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  uint32_t u;
  if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else { // subnormal: normalize
      int e = -1;
      do {
        ++e;
        man <<= 1;
      } while (!(man & 0x400u));
      u = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | (man << 13);
  } else {
    u = sign | ((exp + 112) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

tfrun_status_t *fromDeviceError(const tfrun::Error &e) {
  return makeStatus(static_cast<tfrun_code_t>(e.code), e.message);
}

/// Adds one kernel call to the session's profile, under its precision label.
void recordKernelTime(tfrun_session_t *s, const tfrun::Instr &in,
                      const std::vector<const tfc::cpu::Tensor *> &args,
                      const tfc::cpu::Tensor &out, std::chrono::steady_clock::time_point t0) {
  char label[24];
  const size_t n = args.size();
  tfc_instr_precision(in.kernel, n > 0 ? args[0]->dtype : UINT32_MAX,
                      n > 1 ? args[1]->dtype : UINT32_MAX, out.dtype, label, sizeof label);
  auto &kt = s->kernelTimes[{in.kernel, label}];
  kt.ms +=
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  kt.calls++;
}

/// Fills the tensors of function |fi| for a run: each value's shape from the
/// bound symbolic dims, its dtype, and its address by storage. |inputData(k)|
/// and |weightData(i)| give input k's and weight value i's data where the
/// plan runs (host memory, or device memory for a device session).
template <typename InputData, typename WeightData>
tfrun_status_t *bindTensors(tfrun_session_t *s, size_t fi, const std::vector<BoundInput> &ins,
                            const std::vector<int64_t> &sym, InputData inputData,
                            WeightData weightData) {
  const tfrun::Model &m = *s->m;
  const tfrun::Function &f = m.functions[fi];
  tfrun_session::FnState &fs = s->fns[fi];
  fs.tensors.assign(f.values.size(), {});
  for (size_t i = 0; i < f.values.size(); ++i) {
    const tfrun::ValueDesc &v = f.values[i];
    tfc::cpu::Tensor &t = fs.tensors[i];
    t.dtype = fs.dtypes.empty() ? v.dtype : fs.dtypes[i];
    for (int64_t d : v.dims) {
      int64_t x = d >= 0 ? d : sym[-(d + 1)];
      if (x < 0)
        return makeStatus(TFRUN_INVALID_ARGUMENT,
                          "'" + f.name + "': no input gives the size of " +
                              m.symbolNames[-(d + 1)]);
      t.shape.push_back(x);
    }
    switch (v.storage) {
    case tfrun::Storage::Input:
      t.data = inputData(v.offset);
      t.shape = ins[v.offset].shape;
      break;
    case tfrun::Storage::Weight:
      t.data = weightData(i);
      t.packed = s->dev ? nullptr : f.packed[i].get();
      break;
    case tfrun::Storage::Arena:
      t.data = static_cast<char *>(fs.arena) + v.offset;
      break;
    case tfrun::Storage::State:
      t.data = static_cast<char *>(s->state) + v.offset;
      break;
    case tfrun::Storage::View:
      t.data = fs.tensors[v.offset].data;
      break;
    }
  }
  return nullptr;
}

/// A device session's first run of function |fi|: each value's dtype on the
/// device, the arena, and the weights (as stored, or converted once to the
/// session's compute dtype).
tfrun_status_t *prepareOnDevice(tfrun_session_t *s, size_t fi) {
  const tfrun::Model &m = *s->m;
  const tfrun::Function &f = m.functions[fi];
  tfrun_session::FnState &fs = s->fns[fi];
  tfrun::Device &d = *s->dev;
  // The scales of i8 weights stay f32 whatever the compute dtype.
  std::vector<char> isScales(f.values.size(), 0);
  for (const tfrun::Instr &in : f.plan)
    if ((in.kernel == TFC_KERNEL_LINEAR || in.kernel == TFC_KERNEL_FUSED_LINEAR ||
         in.kernel == TFC_KERNEL_TOKEN_EMBEDDING) &&
        in.inputs.size() > 2 && f.values[in.inputs[1]].dtype == TFC_DTYPE_I8)
      isScales[in.inputs.back()] = 1;
  fs.dtypes.resize(f.values.size());
  fs.weightPtrs.assign(f.values.size(), nullptr);
  for (size_t i = 0; i < f.values.size(); ++i) {
    const tfrun::ValueDesc &v = f.values[i];
    uint32_t dt = v.dtype;
    if (s->computeDtype != TFC_DTYPE_F32 && dt == TFC_DTYPE_F32 && !isScales[i] &&
        v.storage != tfrun::Storage::Input)
      dt = s->computeDtype;
    fs.dtypes[i] = dt;
    if (v.storage != tfrun::Storage::Weight)
      continue;
    if (dt == v.dtype) {
      fs.weightPtrs[i] = static_cast<char *>(s->devWeights) + v.offset;
      continue;
    }
    uint64_t n = 1;
    for (int64_t x : v.dims)
      n *= (uint64_t)x;
    void *p = nullptr;
    if (tfrun::Error e = d.alloc(std::max<uint64_t>(n, 1) * tfc_dtype_size(dt), &p))
      return fromDeviceError(e);
    s->convertedWeights.push_back(p);
    if (tfrun::Error e = d.convertUpload(
            p, reinterpret_cast<const float *>(m.weights + v.offset), (int64_t)n, dt))
      return fromDeviceError(e);
    fs.weightPtrs[i] = p;
  }
  if (tfrun::Error e = d.alloc(f.arenaSize, &fs.arena))
    return makeStatus(TFRUN_OUT_OF_MEMORY, "cannot allocate the " +
                                               std::to_string(f.arenaSize) +
                                               "-byte device arena of '" + f.name + "': " +
                                               e.message);
  fs.devInputs.assign(f.inputs.size(), {nullptr, 0});
  return nullptr;
}

/// Function |fi| on the session's device: inputs uploaded, the plan queued on
/// the device's stream, one sync, the outputs downloaded as f32.
tfrun_status_t *runOnDevice(tfrun_session_t *s, size_t fi, const std::vector<BoundInput> &ins,
                            const std::vector<int64_t> &sym) {
  const tfrun::Model &m = *s->m;
  const tfrun::Function &f = m.functions[fi];
  tfrun_session::FnState &fs = s->fns[fi];
  tfrun::Device &d = *s->dev;
  if (fs.dtypes.empty())
    if (tfrun_status_t *st = prepareOnDevice(s, fi))
      return st;
  bool usesState = false;
  for (const tfrun::ValueDesc &v : f.values)
    usesState |= v.storage == tfrun::Storage::State;
  if (usesState && !s->state) {
    if (tfrun::Error e = d.alloc(m.stateSize, &s->state))
      return makeStatus(TFRUN_OUT_OF_MEMORY, "cannot allocate the " +
                                                 std::to_string(m.stateSize) +
                                                 "-byte KV cache on the device: " + e.message);
    if (tfrun::Error e = d.zero(s->state, m.stateSize))
      return fromDeviceError(e);
  }
  // Inputs: copies on the device, grown as needed.
  for (size_t i = 0; i < ins.size(); ++i) {
    size_t bytes = tfc_dtype_size(ins[i].dtype);
    for (int64_t x : ins[i].shape)
      bytes *= (size_t)x;
    auto &buf = fs.devInputs[i];
    if (bytes > buf.second) {
      d.release(buf.first);
      buf = {nullptr, 0};
      if (tfrun::Error e = d.alloc(bytes, &buf.first))
        return fromDeviceError(e);
      buf.second = bytes;
    }
    if (bytes)
      if (tfrun::Error e = d.upload(buf.first, ins[i].data, bytes))
        return fromDeviceError(e);
  }
  if (tfrun_status_t *st = bindTensors(
          s, fi, ins, sym, [&](size_t k) { return fs.devInputs[k].first; },
          [&](size_t i) { return fs.weightPtrs[i]; }))
    return st;
  for (const tfrun::Instr &in : f.plan) {
    if (in.kernel == TFC_KERNEL_RESHAPE || in.kernel == TFC_KERNEL_UNSQUEEZE)
      continue;
    std::vector<const tfc::cpu::Tensor *> args;
    for (uint32_t v : in.inputs)
      args.push_back(&fs.tensors[v]);
    auto t0 = std::chrono::steady_clock::now();
    std::string err = d.run(in.kernel, args, fs.tensors[in.output], in.ints, in.floats);
    if (!err.empty())
      return makeStatus(TFRUN_INVALID_ARGUMENT, err);
    if (s->profiling) {
      // Kernel times need a sync after each kernel: profiling slows the run.
      if (tfrun::Error e = d.sync())
        return fromDeviceError(e);
      recordKernelTime(s, in, args, fs.tensors[in.output], t0);
    }
  }
  if (tfrun::Error e = d.sync())
    return fromDeviceError(e);
  // Outputs, widened to f32 on the host.
  fs.hostOutputs.clear();
  for (const tfrun::Binding &b : f.outputs) {
    const tfc::cpu::Tensor &t = fs.tensors[b.value];
    std::vector<float> &h = fs.hostOutputs[b.value];
    h.resize(t.numel());
    if (t.dtype == TFC_DTYPE_F32) {
      if (tfrun::Error e = d.download(h.data(), t.data, h.size() * 4))
        return fromDeviceError(e);
      continue;
    }
    std::vector<uint16_t> raw(h.size());
    if (tfrun::Error e = d.download(raw.data(), t.data, raw.size() * 2))
      return fromDeviceError(e);
    for (size_t k = 0; k < h.size(); ++k)
      h[k] = t.dtype == TFC_DTYPE_BF16 ? tfc_bf16_to_f32(raw[k]) : halfToFloat(raw[k]);
  }
  s->lastRun = (int)fi;
  return nullptr;
}

/// Output value |value| of function |fi|'s last run, as f32 on the host.
const float *hostOutput(const tfrun_session_t *s, size_t fi, uint32_t value) {
  const tfrun_session::FnState &fs = s->fns[fi];
  if (s->dev) {
    auto it = fs.hostOutputs.find(value);
    return it == fs.hostOutputs.end() ? nullptr : it->second.data();
  }
  return fs.tensors[value].as<float>();
}

/// Runs function |fi| of the model on |ins| (one per function input, in order).
tfrun_status_t *runFunction(tfrun_session_t *s, size_t fi, const std::vector<BoundInput> &ins) {
  const tfrun::Model &m = *s->m;
  const tfrun::Function &f = m.functions[fi];
  tfrun_session::FnState &fs = s->fns[fi];
  s->lastRun = -1;
  // Bind symbolic dims from the inputs; they must agree across inputs.
  std::vector<int64_t> sym(m.symbolNames.size(), -1);
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    const tfrun::ValueDesc &v = f.values[f.inputs[i].value];
    const auto &shape = ins[i].shape;
    if (shape.size() != v.dims.size() || ins[i].dtype != v.dtype)
      return makeStatus(TFRUN_INVALID_ARGUMENT, "input '" + f.inputs[i].name +
                                                    "' of '" + f.name +
                                                    "' has the wrong rank or dtype");
    for (size_t d = 0; d < v.dims.size(); ++d) {
      if (v.dims[d] >= 0) {
        if (shape[d] != v.dims[d])
          return makeStatus(TFRUN_INVALID_ARGUMENT,
                            "input '" + f.inputs[i].name + "' dim " + std::to_string(d) +
                                " must be " + std::to_string(v.dims[d]));
        continue;
      }
      size_t k = -(v.dims[d] + 1);
      if (sym[k] >= 0 && sym[k] != shape[d])
        return makeStatus(TFRUN_INVALID_ARGUMENT,
                          "input '" + f.inputs[i].name + "' has " + m.symbolNames[k] +
                              " " + std::to_string(shape[d]) + ", but another input has " +
                              std::to_string(sym[k]));
      if (shape[d] > m.symbolMax[k])
        return makeStatus(TFRUN_INVALID_ARGUMENT,
                          "input '" + f.inputs[i].name + "' dim " + std::to_string(d) +
                              " is " + std::to_string(shape[d]) +
                              ", beyond the declared maximum " + m.symbolNames[k] + " = " +
                              std::to_string(m.symbolMax[k]));
      sym[k] = shape[d];
    }
  }
  if (s->dev)
    return runOnDevice(s, fi, ins, sym);
  // A symbol no input binds (the batch of a state-only dim) stays at 0 only if unused.
  if (!fs.arena) {
    fs.arena = alignedAlloc(f.arenaSize);
    if (!fs.arena)
      return makeStatus(TFRUN_OUT_OF_MEMORY,
                        "cannot allocate the " + std::to_string(f.arenaSize) +
                            "-byte arena of '" + f.name +
                            "' (sized for the declared maximum dims; "
                            "compile with smaller --set max_batch / max_len)");
  }
  bool usesState = false;
  for (const tfrun::ValueDesc &v : f.values)
    usesState |= v.storage == tfrun::Storage::State;
  if (usesState && !s->state) {
    s->state = alignedAlloc(m.stateSize);
    if (!s->state)
      return makeStatus(TFRUN_OUT_OF_MEMORY,
                        "cannot allocate the " + std::to_string(m.stateSize) +
                            "-byte KV cache (compile with smaller --set max_batch / max_len)");
  }
  // Shapes and addresses.
  if (tfrun_status_t *st = bindTensors(
          s, fi, ins, sym, [&](size_t k) { return const_cast<void *>(ins[k].data); },
          [&](size_t i) { return const_cast<uint8_t *>(m.weights + f.values[i].offset); }))
    return st;
  if (s->threads > 0)
    omp_set_num_threads(s->threads);
  for (size_t i = 0; i < f.plan.size(); ++i) {
    const tfrun::Instr &in = f.plan[i];
    if (in.kernel == TFC_KERNEL_RESHAPE || in.kernel == TFC_KERNEL_UNSQUEEZE)
      continue; // views: the address is already the source's
    std::vector<const tfc::cpu::Tensor *> args;
    for (uint32_t v : in.inputs)
      args.push_back(&fs.tensors[v]);
    auto t0 = std::chrono::steady_clock::now();
    std::string err = tfc::cpu::runKernel(in.kernel, args, fs.tensors[in.output], in.ints,
                                          in.floats);
    if (s->profiling)
      recordKernelTime(s, in, args, fs.tensors[in.output], t0);
    if (!err.empty())
      return makeStatus(TFRUN_INVALID_ARGUMENT, err);
  }
  s->lastRun = (int)fi;
  return nullptr;
}

/// @forward on the inputs the user bound.
tfrun_status_t *runForward(tfrun_session_t *s) {
  const tfrun::Function &f = s->m->forward();
  std::vector<BoundInput> ins(f.inputs.size());
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    if (!s->inputs[i].bound)
      return makeStatus(TFRUN_INVALID_ARGUMENT,
                        "input '" + f.inputs[i].name + "' is not bound");
    ins[i] = {s->inputs[i].ids.data(), TFC_DTYPE_I64, s->inputs[i].shape};
  }
  return runFunction(s, 0, ins);
}

/// The decoder side of generation over a session: @encode once, then
/// @decode_step per position, with per-row copies of everything batch-major
/// that decode_step reads (encoder memory, source ids) and the KV cache in the
/// session state, so rows can be dropped, fanned out and reordered (select).
class SessionStepModel : public tfrun::StepModel {
public:
  SessionStepModel(tfrun_session_t *s) : s(s), m(*s->m) {}

  /// Runs @encode (if any) and sets up the per-row inputs of decode_step.
  tfrun_status_t *start(int64_t batch) {
    decIdx = index("decode_step");
    const tfrun::Function &dec = m.functions[decIdx];
    const tfrun::Function &fwd = m.forward();
    rows = batch;
    int encIdx = m.find("encode") ? (int)index("encode") : -1;
    if (encIdx >= 0) {
      const tfrun::Function &enc = m.functions[encIdx];
      std::vector<BoundInput> ins(enc.inputs.size());
      for (size_t i = 0; i < enc.inputs.size(); ++i) {
        int fi = fwd.findInput(enc.inputs[i].name);
        if (fi < 0 || !s->inputs[fi].bound)
          return makeStatus(TFRUN_INVALID_ARGUMENT,
                            "input '" + enc.inputs[i].name + "' is not bound");
        ins[i] = {s->inputs[fi].ids.data(), TFC_DTYPE_I64, s->inputs[fi].shape};
      }
      if (tfrun_status_t *st = runFunction(s, encIdx, ins))
        return st;
    }
    // Per-row copies of decode_step's batch-major inputs.
    for (size_t i = 0; i < dec.inputs.size(); ++i) {
      const std::string &name = dec.inputs[i].name;
      if (name == "step.tokens") {
        tokensIdx = i;
        continue;
      }
      if (name == "step.pos") {
        posIdx = i;
        continue;
      }
      RowInput r;
      r.input = i;
      const void *src = nullptr;
      std::vector<int64_t> shape;
      r.dtype = dec.values[dec.inputs[i].value].dtype;
      int fi = fwd.findInput(name);
      if (fi >= 0 && s->inputs[fi].bound) {
        src = s->inputs[fi].ids.data();
        shape = s->inputs[fi].shape;
      } else if (encIdx >= 0) {
        const tfrun::Function &enc = m.functions[encIdx];
        for (const tfrun::Binding &b : enc.outputs)
          if (b.name == name) {
            src = hostOutput(s, encIdx, b.value);
            shape = s->fns[encIdx].tensors[b.value].shape;
          }
      }
      if (!src || shape.empty() || shape[0] != batch)
        return makeStatus(TFRUN_INVALID_MODEL,
                          "decode_step input '" + name + "' has no source");
      r.rowShape.assign(shape.begin() + 1, shape.end());
      r.rowBytes = tfc_dtype_size(r.dtype);
      for (int64_t d : r.rowShape)
        r.rowBytes *= (uint64_t)d;
      r.data.assign(static_cast<const char *>(src),
                    static_cast<const char *>(src) + r.rowBytes * batch);
      rowInputs.push_back(std::move(r));
    }
    if (tokensIdx < 0 || posIdx < 0)
      return makeStatus(TFRUN_INVALID_MODEL, "decode_step lacks step.tokens or step.pos");
    const tfrun::ValueDesc &logits = dec.values[dec.outputs.at(0).value];
    vocab = logits.dims.empty() ? 0 : logits.dims.back();
    if (vocab <= 0)
      return makeStatus(TFRUN_INVALID_MODEL, "decode_step's logits have no static vocabulary");
    for (size_t vi = 0; vi < dec.values.size(); ++vi) {
      const tfrun::ValueDesc &v = dec.values[vi];
      if (v.storage == tfrun::Storage::State) {
        bool seen = false;
        for (const Cache &c : caches)
          seen |= c.offset == v.offset;
        if (!seen)
          caches.push_back({v.offset, v.dims[1], v.dims[2], (uint32_t)vi});
      }
    }
    return nullptr;
  }

  int64_t vocabSize() const override { return vocab; }
  int64_t maxRows() const override {
    const tfrun::ValueDesc &v = m.functions[decIdx].values[m.functions[decIdx]
                                                               .inputs[tokensIdx]
                                                               .value];
    return v.dims[0] >= 0 ? v.dims[0] : m.symbolMax[-(v.dims[0] + 1)];
  }
  int64_t cacheLen() const { return caches.empty() ? 0 : caches[0].len; }

  tfrun::Error step(const int64_t *tokens, int64_t n, int64_t p, const float **logits) override {
    if (n != rows)
      return {TFRUN_INTERNAL, "decode step with " + std::to_string(n) + " rows, the state has " +
                                  std::to_string(rows)};
    const tfrun::Function &dec = m.functions[decIdx];
    std::vector<BoundInput> ins(dec.inputs.size());
    pos = p;
    ins[tokensIdx] = {tokens, TFC_DTYPE_I64, {n, 1}};
    ins[posIdx] = {&pos, TFC_DTYPE_I64, {}};
    for (const RowInput &r : rowInputs) {
      std::vector<int64_t> shape{n};
      shape.insert(shape.end(), r.rowShape.begin(), r.rowShape.end());
      ins[r.input] = {r.data.data(), r.dtype, std::move(shape)};
    }
    tfrun_status_t *st = runFunction(s, decIdx, ins);
    if (st) {
      tfrun::Error e{(int)st->code, st->message};
      tfrun_status_release(st);
      return e;
    }
    lastPos = p;
    *logits = hostOutput(s, decIdx, dec.outputs[0].value);
    return {};
  }

  tfrun::Error select(const int64_t *from, int64_t n) override {
    if (n > maxRows())
      return {TFRUN_INVALID_ARGUMENT, std::to_string(n) + " rows exceed max_batch " +
                                          std::to_string(maxRows())};
    for (int64_t r = 0; r < n; ++r)
      if (from[r] < 0 || from[r] >= rows)
        return {TFRUN_INTERNAL, "select from a missing row"};
    std::vector<char> tmp;
    for (RowInput &ri : rowInputs) {
      tmp.resize(ri.rowBytes * n);
      for (int64_t r = 0; r < n; ++r)
        std::memcpy(tmp.data() + r * ri.rowBytes, ri.data.data() + from[r] * ri.rowBytes,
                    ri.rowBytes);
      ri.data.swap(tmp);
    }
    // The caches: only positions [0, lastPos] hold data.
    int64_t used = lastPos + 1;
    if (used > 0 && s->state && s->dev) {
      // On the device: gather the rows into a scratch buffer, then back.
      tfrun::Device &d = *s->dev;
      for (const Cache &c : caches) {
        const uint64_t es = c.elemSize(s, decIdx);
        const uint64_t rowBytes = (uint64_t)c.len * c.width * es;
        const uint64_t usedBytes = (uint64_t)used * c.width * es;
        void *tmpDev = nullptr;
        if (tfrun::Error e = d.alloc(usedBytes * n, &tmpDev))
          return e;
        char *base = static_cast<char *>(s->state) + c.offset;
        tfrun::Error e;
        for (int64_t r = 0; r < n && !e; ++r)
          e = d.copy(static_cast<char *>(tmpDev) + r * usedBytes, base + from[r] * rowBytes,
                     usedBytes);
        for (int64_t r = 0; r < n && !e; ++r)
          e = d.copy(base + r * rowBytes, static_cast<char *>(tmpDev) + r * usedBytes,
                     usedBytes);
        if (!e)
          e = d.sync();
        d.release(tmpDev);
        if (e)
          return e;
      }
    } else if (used > 0 && s->state)
      for (const Cache &c : caches) {
        float *base = reinterpret_cast<float *>(static_cast<char *>(s->state) + c.offset);
        uint64_t rowFloats = (uint64_t)c.len * c.width, usedFloats = (uint64_t)used * c.width;
        tmp.resize(sizeof(float) * usedFloats * n);
        float *t = reinterpret_cast<float *>(tmp.data());
        for (int64_t r = 0; r < n; ++r)
          std::memcpy(t + r * usedFloats, base + from[r] * rowFloats, sizeof(float) * usedFloats);
        for (int64_t r = 0; r < n; ++r)
          std::memcpy(base + r * rowFloats, t + r * usedFloats, sizeof(float) * usedFloats);
      }
    rows = n;
    return {};
  }

private:
  struct RowInput {
    size_t input = 0;
    uint32_t dtype = TFC_DTYPE_F32;
    std::vector<int64_t> rowShape;
    uint64_t rowBytes = 0;
    std::vector<char> data;
  };
  struct Cache {
    uint64_t offset;
    int64_t len, width;
    uint32_t value; ///< a decode_step value in this slot
    /// Bytes per element where the cache lives (a device session's compute
    /// dtype may differ from model.bin's f32).
    uint64_t elemSize(const tfrun_session_t *s, size_t fn) const {
      const auto &dts = s->fns[fn].dtypes;
      return tfc_dtype_size(value < dts.size() ? dts[value] : TFC_DTYPE_F32);
    }
  };
  size_t index(const char *name) const {
    for (size_t i = 0; i < m.functions.size(); ++i)
      if (m.functions[i].name == name)
        return i;
    return 0;
  }
  tfrun_session_t *s;
  const tfrun::Model &m;
  size_t decIdx = 0;
  int tokensIdx = -1, posIdx = -1;
  std::vector<RowInput> rowInputs;
  std::vector<Cache> caches;
  int64_t rows = 0, vocab = 0, pos = 0, lastPos = -1;
};

tfrun_status_t *generate(tfrun_session_t *s, const tfrun_generate_options_t &o) {
  const tfrun::Model &m = *s->m;
  s->generated.clear();
  s->scores.clear();
  if (!m.gen.present)
    return makeStatus(TFRUN_INVALID_ARGUMENT,
                      "model '" + m.name + "' cannot generate: it has no decoder "
                      "(no causal self-attention; see tfc compile --report)");
  const tfrun::Function &fwd = m.forward();
  bool encDec = m.find("encode") != nullptr;
  tfrun::SearchOptions opt;
  opt.bos = o.bos_id >= 0 ? o.bos_id : m.gen.bos;
  opt.eos = o.eos_id >= 0 ? o.eos_id : m.gen.eos;
  opt.pad = o.pad_id >= 0 ? o.pad_id : m.gen.pad;
  opt.beam = o.beam_width;
  opt.length_penalty = o.length_penalty;
  opt.sample = o.sample != 0;
  opt.temperature = o.temperature;
  opt.top_k = o.top_k;
  opt.top_p = o.top_p;
  opt.seed = o.seed;
  if (opt.sample && encDec)
    return makeStatus(TFRUN_INVALID_ARGUMENT,
                      "sampling is for decoder-only models; use greedy or beam search");
  // The batch and the prompts.
  std::vector<std::vector<int64_t>> prompts;
  int64_t batch = -1;
  for (size_t i = 0; i < fwd.inputs.size(); ++i) {
    bool isTarget = fwd.inputs[i].name == m.gen.target;
    if (isTarget == encDec)
      continue; // enc-dec: the sources; decoder-only: the prompt
    if (!s->inputs[i].bound)
      return makeStatus(TFRUN_INVALID_ARGUMENT,
                        "input '" + fwd.inputs[i].name + "' is not bound");
    const auto &in = s->inputs[i];
    int64_t b = in.shape[0], len = in.shape.size() > 1 ? in.shape[1] : 1;
    batch = b;
    for (int64_t r = 0; r < b; ++r) {
      const int64_t *row = in.ids.data() + r * len;
      int64_t n = len;
      while (n > 0 && row[n - 1] == opt.pad)
        --n;
      if (n == 0)
        return makeStatus(TFRUN_INVALID_ARGUMENT,
                          (encDec ? "source " : "prompt ") + std::to_string(r) +
                              " of input '" + fwd.inputs[i].name +
                              "' is empty (only pad_id " + std::to_string(opt.pad) + ")");
      if (!encDec)
        prompts.emplace_back(row, row + n);
    }
  }
  if (batch < 0)
    return makeStatus(TFRUN_INVALID_ARGUMENT, "no input to generate from is bound");
  if (encDec)
    prompts.assign(batch, std::vector<int64_t>{opt.bos});
  size_t longest = 0;
  for (const auto &p : prompts)
    longest = std::max(longest, p.size());
  int64_t cache = m.gen.maxLen;
  // Positions fed: the prompt and every new token but the last.
  int64_t room = cache - (int64_t)longest + 1;
  if (o.max_len < 0)
    return makeStatus(TFRUN_INVALID_ARGUMENT,
                      "max_len must be positive, got " + std::to_string(o.max_len));
  opt.max_len = o.max_len ? o.max_len : (int)std::max<int64_t>(room, 0);
  if (opt.max_len > room)
    return makeStatus(TFRUN_INVALID_ARGUMENT,
                      "max_len " + std::to_string(opt.max_len) + " needs " +
                          std::to_string((int64_t)longest + opt.max_len - 1) +
                          " cache positions, but the model's KV cache holds " +
                          std::to_string(cache) + " (recompile with a larger --set max_len)");
  SessionStepModel model(s);
  if (tfrun_status_t *st = model.start(batch))
    return st;
  if (encDec && (opt.bos < 0 || opt.bos >= model.vocabSize()))
    return makeStatus(TFRUN_INVALID_ARGUMENT,
                      "bos_id " + std::to_string(opt.bos) + " is outside the vocabulary [0, " +
                          std::to_string(model.vocabSize()) + ")");
  if (opt.eos < 0 || opt.eos >= model.vocabSize())
    return makeStatus(TFRUN_INVALID_ARGUMENT,
                      "eos_id " + std::to_string(opt.eos) + " is outside the vocabulary [0, " +
                          std::to_string(model.vocabSize()) + ")");
  tfrun::SearchResult res;
  if (tfrun::Error e = tfrun::search(model, prompts, opt, res))
    return fromError(e);
  s->generated = std::move(res.ids);
  s->scores = std::move(res.scores);
  s->lastRun = -1;
  return nullptr;
}

} // namespace

extern "C" {

tfrun_code_t tfrun_status_code(const tfrun_status_t *s) { return s ? s->code : TFRUN_OK; }
const char *tfrun_status_message(const tfrun_status_t *s) {
  return s ? s->message.c_str() : "";
}
void tfrun_status_release(tfrun_status_t *s) { delete s; }

tfrun_status_t *tfrun_model_load_buffer(const void *data, size_t size,
                                        tfrun_model_t **out) {
  if (!out)
    return makeStatus(TFRUN_INVALID_ARGUMENT, "out_model is null");
  *out = nullptr;
  return guarded([&]() -> tfrun_status_t * {
    std::unique_ptr<tfrun::Model> m;
    if (tfrun_status_t *st =
            fromError(tfrun::loadModel(static_cast<const uint8_t *>(data), size, m)))
      return st;
    *out = new tfrun_model{std::move(m)};
    return nullptr;
  });
}

tfrun_status_t *tfrun_model_load_file(const char *path, tfrun_model_t **out) {
  if (!out || !path)
    return makeStatus(TFRUN_INVALID_ARGUMENT, "path or out_model is null");
  *out = nullptr;
  return guarded([&]() -> tfrun_status_t * {
    std::unique_ptr<tfrun::Model> m;
    if (tfrun_status_t *st = fromError(tfrun::loadModelFile(path, m)))
      return st;
    *out = new tfrun_model{std::move(m)};
    return nullptr;
  });
}

void tfrun_model_release(tfrun_model_t *m) { delete m; }

size_t tfrun_model_input_count(const tfrun_model_t *m) {
  return m ? m->m->forward().inputs.size() : 0;
}
const char *tfrun_model_input_name(const tfrun_model_t *m, size_t i) {
  return m && i < m->m->forward().inputs.size() ? m->m->forward().inputs[i].name.c_str()
                                                : nullptr;
}
size_t tfrun_model_output_count(const tfrun_model_t *m) {
  return m ? m->m->forward().outputs.size() : 0;
}
const char *tfrun_model_output_name(const tfrun_model_t *m, size_t i) {
  return m && i < m->m->forward().outputs.size() ? m->m->forward().outputs[i].name.c_str()
                                                 : nullptr;
}
int tfrun_model_can_generate(const tfrun_model_t *m) { return m && m->m->gen.present; }
void tfrun_model_generation_info(const tfrun_model_t *m, int64_t *bos, int64_t *eos,
                                 int64_t *pad, int64_t *maxLen) {
  const tfrun::GenerationInfo *g = m && m->m->gen.present ? &m->m->gen : nullptr;
  if (bos)
    *bos = g ? g->bos : -1;
  if (eos)
    *eos = g ? g->eos : -1;
  if (pad)
    *pad = g ? g->pad : -1;
  if (maxLen)
    *maxLen = g ? g->maxLen : -1;
}
const char *tfrun_model_name(const tfrun_model_t *m) { return m ? m->m->name.c_str() : ""; }

void tfrun_session_options_init(tfrun_session_options_t *o) {
  if (!o)
    return;
  *o = tfrun_session_options_t{};
  o->num_threads = 0;
  o->device = TFRUN_DEVICE_CPU;
  o->device_id = 0;
  o->compute_dtype = TFRUN_F32;
}

int tfrun_cuda_device_count(void) {
  try {
    return tfrun::cudaDeviceCount();
  } catch (...) {
    return 0;
  }
}

const char *tfrun_session_device(const tfrun_session_t *s) {
  return s ? s->deviceText.c_str() : "";
}

tfrun_status_t *tfrun_session_create(const tfrun_model_t *model, int threads,
                                     tfrun_session_t **out) {
  tfrun_session_options_t o;
  tfrun_session_options_init(&o);
  o.num_threads = threads;
  return tfrun_session_create_with_options(model, &o, out);
}

tfrun_status_t *tfrun_session_create_with_options(const tfrun_model_t *model,
                                                  const tfrun_session_options_t *o,
                                                  tfrun_session_t **out) {
  if (!model || !out || !o)
    return makeStatus(TFRUN_INVALID_ARGUMENT, "model, options or out_session is null");
  *out = nullptr;
  return guarded([&]() -> tfrun_status_t * {
    auto s = std::make_unique<tfrun_session>();
    s->m = model->m.get();
    s->threads = o->num_threads;
    s->inputs.resize(s->m->forward().inputs.size());
    s->fns.resize(s->m->functions.size());
    const uint32_t cd = (uint32_t)o->compute_dtype;
    if (cd != TFC_DTYPE_F32 && cd != TFC_DTYPE_F16 && cd != TFC_DTYPE_BF16)
      return makeStatus(TFRUN_INVALID_ARGUMENT,
                        "compute dtype " + std::to_string(o->compute_dtype) +
                            " is not f32, f16 or bf16");
    if (o->device == TFRUN_DEVICE_CUDA) {
      if (tfrun::Error e = tfrun::createCudaDevice(o->device_id, s->dev))
        return fromError(e);
      s->deviceText = s->dev->describe();
      s->computeDtype = cd;
      for (const tfrun::Function &f : s->m->functions)
        for (const tfrun::Instr &in : f.plan)
          if ((in.kernel == TFC_KERNEL_LINEAR || in.kernel == TFC_KERNEL_FUSED_LINEAR) &&
              f.values[in.inputs[1]].dtype == TFC_DTYPE_I8)
            return makeStatus(TFRUN_UNSUPPORTED,
                              "int8 linear weights (tfc compile --precision int8) run on the "
                              "CPU only; on CUDA use an f32 or bf16 model.bin, or --dtype "
                              "f16 / bf16");
      if (cd != TFC_DTYPE_F32)
        for (const tfrun::Function &f : s->m->functions)
          for (const tfrun::ValueDesc &v : f.values)
            if (v.dtype == TFC_DTYPE_BF16 || v.dtype == TFC_DTYPE_I8 ||
                v.dtype == TFC_DTYPE_F16)
              return makeStatus(TFRUN_INVALID_ARGUMENT,
                                std::string("compute dtype ") + tfc_dtype_name(cd) +
                                    " needs an f32 model.bin; this one was compiled with "
                                    "reduced precision (tfc compile --precision)");
      // The weights section, once per session, as stored; converted copies
      // are made on each function's first run.
      if (tfrun::Error e = s->dev->alloc(s->m->weightsSize, &s->devWeights))
        return fromError(e);
      if (s->m->weightsSize)
        if (tfrun::Error e = s->dev->upload(s->devWeights, s->m->weights, s->m->weightsSize))
          return fromError(e);
      if (tfrun_status_t *st = prepareOnDevice(s.get(), 0))
        return st;
      *out = s.release();
      return nullptr;
    }
    if (o->device != TFRUN_DEVICE_CPU)
      return makeStatus(TFRUN_INVALID_ARGUMENT,
                        "unknown device " + std::to_string(o->device));
    if (const tfc::cpu::CpuPaths &cpu = tfc::cpu::cpuPaths(); !cpu.supported)
      return makeStatus(TFRUN_UNSUPPORTED, cpu.error);
    s->deviceText = tfc::cpu::describeCpuPaths();
    if (cd != TFC_DTYPE_F32)
      return makeStatus(TFRUN_UNSUPPORTED,
                        "on the CPU the precision is chosen at compile time "
                        "(tfc compile --precision bf16 | int8); compute_dtype must be f32");
    // @forward's arena now, so a too-large model fails here rather than at run.
    const tfrun::Function &f = s->m->forward();
    s->fns[0].arena = alignedAlloc(f.arenaSize);
    if (!s->fns[0].arena)
      return makeStatus(TFRUN_OUT_OF_MEMORY,
                        "cannot allocate the " + std::to_string(f.arenaSize) +
                            "-byte arena (sized for the declared maximum dims; "
                            "compile with smaller --set max_batch / max_len)");
    *out = s.release();
    return nullptr;
  });
}

void tfrun_session_release(tfrun_session_t *s) { delete s; }

tfrun_status_t *tfrun_session_set_input(tfrun_session_t *s, const char *name,
                                        tfrun_dtype_t dtype, const int64_t *shape,
                                        size_t rank, const void *data) {
  if (!s || !name || (!shape && rank))
    return makeStatus(TFRUN_INVALID_ARGUMENT, "null argument to tfrun_session_set_input");
  return guarded([&]() -> tfrun_status_t * {
    const tfrun::Model &m = *s->m;
    const tfrun::Function &f = m.forward();
    size_t idx = 0;
    while (idx < f.inputs.size() && f.inputs[idx].name != name)
      ++idx;
    if (idx == f.inputs.size()) {
      std::string known;
      for (const auto &b : f.inputs)
        known += (known.empty() ? "" : ", ") + b.name;
      return makeStatus(TFRUN_INVALID_ARGUMENT,
                        std::string("unknown input '") + name + "' (inputs: " + known + ")");
    }
    const tfrun::ValueDesc &v = f.values[f.inputs[idx].value];
    if (dtype != TFRUN_I64 && dtype != TFRUN_I32)
      return makeStatus(TFRUN_INVALID_ARGUMENT,
                        std::string("input '") + name + "' takes token ids (i64 or i32), got " +
                            tfc_dtype_name(dtype));
    if (rank != v.dims.size())
      return makeStatus(TFRUN_INVALID_ARGUMENT,
                        std::string("input '") + name + "' must have rank " +
                            std::to_string(v.dims.size()) + ", got " + std::to_string(rank));
    size_t n = 1;
    for (size_t d = 0; d < rank; ++d) {
      if (shape[d] <= 0)
        return makeStatus(TFRUN_INVALID_ARGUMENT,
                          std::string("input '") + name + "' has an empty dim " +
                              std::to_string(d) + " (" + std::to_string(shape[d]) + ")");
      int64_t limit = v.dims[d] >= 0 ? v.dims[d] : m.symbolMax[-(v.dims[d] + 1)];
      if (v.dims[d] >= 0 ? shape[d] != limit : shape[d] > limit)
        return makeStatus(
            TFRUN_INVALID_ARGUMENT,
            std::string("input '") + name + "' dim " + std::to_string(d) + " is " +
                std::to_string(shape[d]) + ", beyond the declared maximum " +
                (v.dims[d] >= 0 ? "" : m.symbolNames[-(v.dims[d] + 1)] + " = ") +
                std::to_string(limit));
      n *= (size_t)shape[d];
    }
    if (!data)
      return makeStatus(TFRUN_INVALID_ARGUMENT,
                        std::string("input '") + name + "' has no data (null pointer)");
    auto &in = s->inputs[idx];
    in.shape.assign(shape, shape + rank);
    in.ids.resize(n);
    for (size_t i = 0; i < n; ++i)
      in.ids[i] = dtype == TFRUN_I64 ? static_cast<const int64_t *>(data)[i]
                                     : static_cast<const int32_t *>(data)[i];
    in.bound = true;
    return nullptr;
  });
}

tfrun_status_t *tfrun_session_run(tfrun_session_t *s) {
  if (!s)
    return makeStatus(TFRUN_INVALID_ARGUMENT, "session is null");
  return guarded([&] { return runForward(s); });
}

tfrun_status_t *tfrun_session_get_output(tfrun_session_t *s, const char *name,
                                         const float **data, const int64_t **shape,
                                         size_t *rank) {
  if (!s || !name || !data || !shape || !rank)
    return makeStatus(TFRUN_INVALID_ARGUMENT, "null argument to tfrun_session_get_output");
  if (s->lastRun < 0)
    return makeStatus(TFRUN_INVALID_ARGUMENT, "no successful run yet");
  const tfrun::Function &f = s->m->functions[s->lastRun];
  for (const auto &b : f.outputs)
    if (b.name == name) {
      const tfc::cpu::Tensor &t = s->fns[s->lastRun].tensors[b.value];
      *data = hostOutput(s, s->lastRun, b.value);
      *shape = t.shape.data();
      *rank = t.shape.size();
      return nullptr;
    }
  return makeStatus(TFRUN_INVALID_ARGUMENT, std::string("unknown output '") + name + "'");
}

void tfrun_session_enable_profiling(tfrun_session_t *s, int enable) {
  if (s)
    s->profiling = enable != 0;
}

const char *tfrun_session_profile(tfrun_session_t *s) {
  if (!s)
    return "";
  try {
    double total = 0;
    std::vector<std::pair<std::pair<uint32_t, std::string>, tfrun_session::KernelTime>> rows(
        s->kernelTimes.begin(), s->kernelTimes.end());
    for (const auto &r : rows)
      total += r.second.ms;
    std::stable_sort(rows.begin(), rows.end(),
                     [](const auto &a, const auto &b) { return a.second.ms > b.second.ms; });
    char line[160];
    s->profileText = "kernel               dtype      calls    total ms   share\n";
    for (const auto &[key, kt] : rows) {
      std::snprintf(line, sizeof line, "%-20s %-9s %6llu %11.3f %6.1f%%\n",
                    tfc_kernel_name(key.first), key.second.c_str(),
                    (unsigned long long)kt.calls, kt.ms,
                    total > 0 ? 100.0 * kt.ms / total : 0.0);
      s->profileText += line;
    }
    std::snprintf(line, sizeof line, "%-20s %-9s %6s %11.3f %6.1f%%\n", "total", "", "",
                  total, 100.0);
    s->profileText += line;
    return s->profileText.c_str();
  } catch (...) {
    return "";
  }
}

void tfrun_generate_options_init(tfrun_generate_options_t *o) {
  if (!o)
    return;
  *o = tfrun_generate_options_t{};
  o->beam_width = 1;
  o->max_len = 0;
  o->length_penalty = 1.0f;
  o->sample = 0;
  o->temperature = 1.0f;
  o->top_k = 0;
  o->top_p = 1.0f;
  o->seed = 0;
  o->bos_id = o->eos_id = o->pad_id = -1;
}

tfrun_status_t *tfrun_session_generate(tfrun_session_t *s,
                                       const tfrun_generate_options_t *o) {
  if (!s || !o)
    return makeStatus(TFRUN_INVALID_ARGUMENT, "null argument to tfrun_session_generate");
  return guarded([&] { return generate(s, *o); });
}

size_t tfrun_session_generated_count(const tfrun_session_t *s) {
  return s ? s->generated.size() : 0;
}

tfrun_status_t *tfrun_session_get_generated(const tfrun_session_t *s, size_t i,
                                            const int64_t **ids, size_t *len, float *score) {
  if (!s || !ids || !len)
    return makeStatus(TFRUN_INVALID_ARGUMENT, "null argument to tfrun_session_get_generated");
  if (i >= s->generated.size())
    return makeStatus(TFRUN_INVALID_ARGUMENT,
                      "sequence " + std::to_string(i) + " of " +
                          std::to_string(s->generated.size()) + " generated");
  *ids = s->generated[i].data();
  *len = s->generated[i].size();
  if (score)
    *score = s->scores[i];
  return nullptr;
}

} // extern "C"
