//===- model.cc - model.bin loader and validator --------------------------===//
//
// Reads the header, checks magic, version, size and checksum, then decodes the
// metadata with a bounds-checked reader and validates every cross-reference, so a
// truncated or corrupt file is an error status, never an out-of-bounds read.
//
//===----------------------------------------------------------------------===//
#include "runtime/model.h"

#include "tfc/kernel_schema.h"

#include <algorithm>
#include <cmath>
#include <array>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <sys/mman.h>
#include <sys/stat.h>
#include <tuple>
#include <unistd.h>

namespace tfrun::rt {

namespace {

Status invalid(std::string msg) { return Status::invalidModel(std::move(msg)); }

/// The alignment of arena and state slots: every element type's, at least.
constexpr uint64_t kValueAlign = 8;

/// The instruction's attributes, arity and dtypes against its row of
/// tfc/kernels.def (tfc/kernel_schema.h: the one dtype rule set, the CPU's
/// sets being the plan's), plus what only the loader knows: which inputs are
/// weights, and that a cached attention's caches are session state. Returns
/// "" or what is wrong, starting with the kernel's name.
std::string checkOperands(const Function &f, const Instr &in) {
  std::vector<uint32_t> dtypes(in.inputs.size());
  std::vector<uint8_t> weight(in.inputs.size());
  for (size_t i = 0; i < in.inputs.size(); ++i) {
    dtypes[i] = f.values[in.inputs[i]].dtype;
    weight[i] = f.values[in.inputs[i]].storage == Storage::Weight;
  }
  tfc::schema::OperandDtypes d{dtypes.data(), dtypes.size(), f.values[in.output].dtype,
                               weight.data()};
  std::string bad =
      tfc::schema::checkOperands(tfc::schema::Backend::Cpu, in.kernel, in.ints, in.floats, d);
  if (!bad.empty() || in.kernel != TFC_KERNEL_CACHED_ATTENTION)
    return bad;
  for (const char *cache : {"k_cache", "v_cache"}) {
    int32_t at = tfc::schema::operandIndex(in.kernel, cache, in.ints, in.floats,
                                           {dtypes.data(), dtypes.size()});
    if (at < 0 || f.values[in.inputs[at]].storage != Storage::State)
      return std::string("cached_attention: the ") + cache + " is not session state";
  }
  return "";
}

using tfc::format::Reader;

} // namespace

Model::~Model() {
  if (mapping)
    munmap(mapping, mappingSize);
}

/// Where an instruction writes: a kernel writes its output only, into an
/// arena slot (never a weight, an input or a view), and no input of it may
/// share those bytes: kernels do not work in place, so an overlapping plan
/// (which the compiler never makes) would make them read what they already
/// overwrote, or hand memcpy overlapping ranges. Views (reshape, unsqueeze)
/// write nothing. Returns "" or what is wrong.
static std::string checkWrites(const Function &f, const Instr &in,
                               const std::vector<uint64_t> &maxBytes) {
  if (in.kernel == TFC_KERNEL_RESHAPE || in.kernel == TFC_KERNEL_UNSQUEEZE)
    return f.values[in.output].storage == Storage::View ? ""
                                                         : "is a view but its result is not";
  const ValueDesc &o = f.values[in.output];
  if (o.storage != Storage::Arena)
    return "writes a value that is not an arena slot";
  auto root = [&](uint32_t v) {
    for (size_t hops = 0; f.values[v].storage == Storage::View && hops < f.values.size(); ++hops)
      v = (uint32_t)f.values[v].offset;
    return v;
  };
  const uint64_t lo = o.offset, hi = o.offset + maxBytes[in.output];
  for (size_t p = 0; p < in.inputs.size(); ++p) {
    const uint32_t r = root(in.inputs[p]);
    const ValueDesc &v = f.values[r];
    if (v.storage == Storage::Arena && v.offset < hi && lo < v.offset + maxBytes[r])
      return "writes over its input " + std::to_string(p);
  }
  return "";
}

static Status parse(const uint8_t *data, size_t size, std::unique_ptr<Model> &m,
                    bool mapped = false);

Status loadModel(const uint8_t *data, size_t size, std::unique_ptr<Model> &out) {
  auto m = std::make_unique<Model>();
  if (data && size) {
    // Copy into 64-byte aligned storage so weights keep their alignment.
    m->bytes.resize(size + 64);
    size_t shift = (64 - (reinterpret_cast<uintptr_t>(m->bytes.data()) % 64)) % 64;
    std::memcpy(m->bytes.data() + shift, data, size);
    data = m->bytes.data() + shift;
  }
  TFC_RETURN_IF_ERROR(parse(data, size, m));
  out = std::move(m);
  return Status::ok();
}

Status loadModelFile(const char *path, std::unique_ptr<Model> &out) {
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Status::ioError(std::string("cannot open '") + path + "': " + std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::ioError(std::string("'") + path + "' is not a regular file");
  }
  auto m = std::make_unique<Model>();
  size_t size = (size_t)st.st_size;
  const uint8_t *data = nullptr;
  if (size > 0) {
    void *p = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      return Status::ioError(std::string("cannot map '") + path + "': " + std::strerror(errno));
    }
    m->mapping = p;
    m->mappingSize = size;
    data = static_cast<const uint8_t *>(p);
  }
  ::close(fd); // the mapping keeps the file alive
  TFC_RETURN_IF_ERROR(parse(data, size, m, /*mapped=*/true));
  out = std::move(m);
  return Status::ok();
}

/// Files before format version 6 gave an int8 weight's scales as one more
/// input, last, of each instruction that read the weight (a linear or a token
/// embedding); they move into the weight's descriptor. A file where that input
/// is missing or is not a weight fails the descriptor's or the kernel's checks
/// later, with their messages.
static void upgradeInt8Scales(Function &f) {
  for (Instr &in : f.plan) {
    if ((in.kernel != TFC_KERNEL_LINEAR && in.kernel != TFC_KERNEL_FUSED_LINEAR &&
         in.kernel != TFC_KERNEL_TOKEN_EMBEDDING) ||
        in.inputs.size() < 3)
      continue;
    const uint32_t w = in.inputs[1], scales = in.inputs.back();
    if (w >= f.values.size() || f.values[w].dtype != TFC_DTYPE_I8 ||
        f.values[w].storage != Storage::Weight)
      continue;
    in.inputs.pop_back();
    if (!f.values[w].quant.quantized())
      f.values[w].quant.scales = scales;
  }
}

/// A weight's descriptor (format/metadata.h): an i8 weight has f32 weight
/// scales [rows] (group 0) or [rows, ceil(K / group)]; a float weight has
/// none. Returns "" or what is wrong.
static std::string checkQuant(const Function &f, const ValueDesc &v) {
  const tfc::format::WeightQuant &q = v.quant;
  if (v.storage != Storage::Weight || (v.dtype != TFC_DTYPE_I8 && v.dtype != TFC_DTYPE_I4))
    return ""; // only a quantized weight's record has a descriptor
  const std::string what = v.dtype == TFC_DTYPE_I4 ? "an int4 weight" : "an int8 weight";
  if (!q.quantized())
    return "is " + what + " without its scales";
  if (q.scales >= f.values.size())
    return "names missing scales";
  const ValueDesc &s = f.values[q.scales];
  if (v.dims.size() != 2 || v.dims[0] < 1 || v.dims[1] < 1)
    return "is " + what + " that is not a 2-D matrix";
  // The CPU's int4 kernel quantizes the activations in blocks of 32 inside
  // each group (backends/cpu/gemm_q4_avx2.h).
  if (v.dtype == TFC_DTYPE_I4 && (q.group == 0 || q.group % 32 != 0))
    return "is an int4 weight whose group of " + std::to_string(q.group) +
           " is not a multiple of 32";
  if (v.dtype == TFC_DTYPE_I8 && q.group % 32 != 0)
    return "is an int8 weight whose group of " + std::to_string(q.group) +
           " is not 0 (one scale per row) or a multiple of 32";
  const int64_t rows = v.dims[0], k = v.dims[1];
  const std::vector<int64_t> want =
      q.group == 0 ? std::vector<int64_t>{rows}
                   : std::vector<int64_t>{rows, (k + (int64_t)q.group - 1) / (int64_t)q.group};
  if (s.storage != Storage::Weight || s.dtype != TFC_DTYPE_F32 || s.dims != want)
    return "has scales that are not an f32 weight shaped like its rows and groups";
  if (q.zeros != tfc::format::kNoValue)
    return "has zero points, which this runtime does not read";
  // 8-bit activation blocks are for group-wise weights (int4 takes no
  // others).
  if (q.actBits != 0 && (q.actBits != 8 || q.group == 0))
    return "has act_bits " + std::to_string(q.actBits) +
           " (0, the default, or 8 with groups of scales)";
  return "";
}

/// The decoded records as the runtime's model: values, bindings and plans,
/// the generation record and its ranges. Files before format version 6 kept
/// an int8 weight's scales as the last input of each instruction that reads
/// it; those move into the weight's descriptor here, so every later stage sees
/// one layout.
static Status adopt(tfc::format::Metadata &md, uint32_t version, Model &m) {
  m.producer = std::move(md.producer);
  m.name = std::move(md.model);
  for (tfc::format::SymbolRecord &s : md.symbols) {
    m.symbolNames.push_back(std::move(s.name));
    m.symbolMax.push_back(s.max);
  }
  if (md.functions.empty() || md.functions.size() > 8)
    return invalid("model.bin has " + std::to_string(md.functions.size()) + " functions");
  for (tfc::format::FunctionRecord &fr : md.functions) {
    Function f;
    f.name = std::move(fr.name);
    for (tfc::format::ValueRecord &vr : fr.values) {
      if (vr.dims.size() > 8)
        return invalid("value " + std::to_string(f.values.size()) + " has rank " +
                       std::to_string(vr.dims.size()));
      f.values.push_back({vr.dtype, std::move(vr.dims), static_cast<Storage>(vr.storage),
                          vr.offset, vr.quant});
    }
    for (auto *list : {&fr.inputs, &fr.outputs})
      for (tfc::format::BindingRecord &b : *list)
        (list == &fr.inputs ? f.inputs : f.outputs).push_back({std::move(b.name), b.value});
    f.plan = std::move(fr.plan);
    f.arenaSize = fr.arenaSize;
    if (version < 6)
      upgradeInt8Scales(f);
    m.functions.push_back(std::move(f));
  }
  m.stateSize = md.stateSize;
  m.gen = std::move(md.gen);
  const GenerationInfo &g = m.gen;
  if (g.present && (g.forcedBos < -1 || g.forcedEos < -1))
    return invalid("model.bin's forced token ids must be -1 (none) or ids");
  if (g.present &&
      (g.numBeams < 1 || g.numBeams > 1024 || g.maxLength < 0 || g.minLength < 0 ||
       g.noRepeatNgram < 0 || g.earlyStopping < 0 || g.earlyStopping > 2 || g.suppress < -1 ||
       !std::isfinite(g.lengthPenalty)))
    return invalid("model.bin's generation defaults are out of range");
  return Status::ok();
}

/// Optional inputs: each names another, required input of the same shape.
static Status checkInputDefaults(const std::vector<tfc::format::InputDefaultRecord> &defaults,
                                 Model &m) {
  const Function &fwd = m.functions[0];
  m.inputDefaults.assign(fwd.inputs.size(), {});
  for (size_t i = 0; i < defaults.size(); ++i) {
    const tfc::format::InputDefaultRecord &d = defaults[i];
    const std::string which = "optional input record " + std::to_string(i);
    if (d.input >= fwd.inputs.size() || d.source >= fwd.inputs.size() || d.input == d.source)
      return invalid(which + " names a missing input");
    if (d.kind != TFC_INPUT_DEFAULT_ZEROS && d.kind != TFC_INPUT_DEFAULT_NOT_EQUAL)
      return invalid(which + " has unknown kind " + std::to_string(d.kind));
    if (m.inputDefaults[d.input].kind)
      return invalid(which + ": input '" + fwd.inputs[d.input].name + "' has two defaults");
    m.inputDefaults[d.input] = {d.kind, d.source, d.value};
  }
  for (size_t i = 0; i < fwd.inputs.size(); ++i) {
    const InputDefault &d = m.inputDefaults[i];
    if (!d.kind)
      continue;
    // The loader checks the bindings later only for the values; check these
    // here, before the shapes are compared.
    if (fwd.inputs[i].value >= fwd.values.size() || fwd.inputs[d.source].value >= fwd.values.size())
      return invalid("an optional input names a missing value");
    if (m.inputDefaults[d.source].kind ||
        fwd.values[fwd.inputs[i].value].dims != fwd.values[fwd.inputs[d.source].value].dims)
      return invalid("optional input '" + fwd.inputs[i].name + "' is made from '" +
                     fwd.inputs[d.source].name + "', which is optional too or has another shape");
  }
  return Status::ok();
}

static Status parse(const uint8_t *data, size_t size, std::unique_ptr<Model> &m,
                    bool mapped) {
  tfc::format::Header h;
  bool unsupported = false;
  // A mapped file's pages are dropped as they are checksummed: the weights
  // fault back in from the page cache when a kernel (or the packer) reads them.
  if (std::string err = tfc::format::readHeader(data, size, h, unsupported, mapped); !err.empty())
    return unsupported ? Status::unsupported(err) : invalid(err);
  const uint64_t wOff = h.weightsOffset, wSize = h.weightsSize, metaOff = h.metaOffset,
                 metaSize = h.metaSize;

  const uint8_t *base = data;
  m->weights = base + wOff;
  m->weightsSize = wSize;

  tfc::format::Metadata md;
  if (std::string err = tfc::format::decodeMetadata(base + metaOff, metaSize, h.version, md);
      !err.empty())
    return invalid(err);
  TFC_RETURN_IF_ERROR(adopt(md, h.version, *m));
  if (m->functions[0].name != "forward")
    return invalid("model.bin's first function is not forward");
  if (m->gen.present && !m->find("decode_step"))
    return invalid("model.bin has generation metadata but no decode_step");
  TFC_RETURN_IF_ERROR(checkInputDefaults(md.inputDefaults, *m));
  if (m->gen.present && m->functions[0].findInput(m->gen.target) < 0)
    return invalid("model.bin's generation target '" + m->gen.target +
                   "' is not an input of forward");

  // Cross-references, per function.
  for (Function &f : m->functions) {
    const std::string where = "function '" + f.name + "': ";
    size_t nvals = f.values.size();
    std::vector<uint64_t> maxBytes(nvals, 0); ///< each value's bytes at the declared maxima
    for (size_t i = 0; i < nvals; ++i) {
      const ValueDesc &v = f.values[i];
      if (!tfc_dtype_known(v.dtype))
        return invalid(where + "value " + std::to_string(i) + " has unknown dtype " +
                       std::to_string(v.dtype));
      if (std::string bad = checkQuant(f, v); !bad.empty())
        return invalid(where + "value " + std::to_string(i) + " " + bad);
      // Sizes in checked arithmetic: a file can declare dims whose product
      // overflows.
      uint64_t elems = 1, maxElems = 1, bytes = 0;
      bool symbolic = false, overflow = false;
      for (int64_t d : v.dims) {
        if (d < 0) {
          if ((uint64_t)(-(d + 1)) >= m->symbolNames.size())
            return invalid(where + "value " + std::to_string(i) + " uses an unknown symbolic dim");
          symbolic = true;
          overflow |= __builtin_mul_overflow(
              maxElems, (uint64_t)std::max<int64_t>(m->symbolMax[-(d + 1)], 0), &maxElems);
        } else if (d > (int64_t)1 << 40) {
          return invalid(where + "value " + std::to_string(i) + " has an absurd dim");
        } else {
          overflow |= __builtin_mul_overflow(elems, (uint64_t)d, &elems);
          overflow |= __builtin_mul_overflow(maxElems, (uint64_t)d, &maxElems);
        }
      }
      // tfc_dtype_bytes multiplies by the bits per element: at most 64.
      overflow |= maxElems > (UINT64_MAX - 7) / 64;
      bytes = overflow ? 0 : tfc_dtype_bytes(v.dtype, maxElems);
      if (overflow)
        return invalid(where + "value " + std::to_string(i) +
                       " is too large: its size overflows 64 bits at the declared maxima");
      maxBytes[i] = bytes;
      switch (v.storage) {
      case Storage::Input:
        if (v.offset >= f.inputs.size())
          return invalid(where + "value " + std::to_string(i) + " names a missing input");
        break;
      case Storage::Weight:
        if (symbolic || v.offset % TFC_WEIGHT_ALIGN || v.offset > wSize ||
            bytes > wSize - v.offset)
          return invalid(where + "weight value " + std::to_string(i) +
                         " lies outside the weights section");
        break;
      case Storage::Arena:
        if (v.offset > f.arenaSize || bytes > f.arenaSize - v.offset)
          return invalid(where + "value " + std::to_string(i) + " lies outside the arena");
        // Kernels load and store whole elements (the planner's slots are 64-byte aligned).
        if (v.offset % kValueAlign)
          return invalid(where + "value " + std::to_string(i) + " is not " +
                         std::to_string(kValueAlign) + "-byte aligned in the arena");
        break;
      case Storage::State:
        if (v.offset > m->stateSize || bytes > m->stateSize - v.offset ||
            v.dtype != TFC_DTYPE_F32 || v.dims.size() != 3 || v.dims[1] <= 0 || v.dims[2] <= 0 ||
            v.offset % kValueAlign)
          return invalid(where + "state value " + std::to_string(i) +
                         " lies outside the session state");
        break;
      case Storage::View:
        if (v.offset >= i)
          return invalid(where + "view " + std::to_string(i) + " aliases a later value");
        break;
      default:
        return invalid(where + "value " + std::to_string(i) + " has unknown storage");
      }
    }
    for (const auto *list : {&f.inputs, &f.outputs})
      for (const Binding &b : *list)
        if (b.value >= nvals)
          return invalid(where + "binding '" + b.name + "' names a missing value");
    for (size_t i = 0; i < f.inputs.size(); ++i)
      if (f.values[f.inputs[i].value].storage != Storage::Input ||
          f.values[f.inputs[i].value].offset != i)
        return invalid(where + "input '" + f.inputs[i].name + "' is not an input value");
    for (size_t i = 0; i < f.plan.size(); ++i) {
      const Instr &in = f.plan[i];
      if (!tfc::schema::kernelInfo(in.kernel))
        return Status::unsupported("model.bin uses kernel " + std::to_string(in.kernel) +
                                   ", unknown to this runtime");
      if (in.output >= nvals)
        return invalid(where + "instruction " + std::to_string(i) + " writes a missing value");
      for (uint32_t v : in.inputs)
        if (v >= nvals)
          return invalid(where + "instruction " + std::to_string(i) + " reads a missing value");
      std::string bad = checkOperands(f, in);
      if (!bad.empty())
        return invalid(where + "instruction " + std::to_string(i) + ": " + bad);
      bad = checkWrites(f, in, maxBytes);
      if (!bad.empty())
        return invalid(where + "instruction " + std::to_string(i) + " (" +
                       tfc_kernel_name(in.kernel) + ") " + bad);
    }
  }
  return {};
}

} // namespace tfrun::rt
