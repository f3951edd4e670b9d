//===- PlanWriter.cpp - fused tfc IR to model.bin --------------------------===//
//
// Four steps over each function (@forward, and @encode/@decode_step when
// tfc-derive-generation made them), sharing one weights section (identical
// weight data is stored once) and one table of symbolic dims:
//  1. Symbolic shapes: the function is re-typed with each symbolic dim replaced by
//     a distinct large prime and every op's result type re-inferred; a dim equal to
//     a prime is that symbol, a small one a constant. The same with the declared
//     maximums gives the sizes the arena is planned for.
//  2. Constant evaluation: tfc.weight, tfc.constant, tfc.sinusoid_table and
//     transpose/slice/concat of those are computed here, so the weights section
//     holds exactly what the kernels read (packed QKV, transposed Conv1D weights).
//  3. Precision (--precision bf16 / int8): linear weights and embedding tables
//     are stored converted (bf16, or int8 with per-row scales as an extra input),
//     and each activation the kernels can exchange in bf16 is made bf16; see
//     assignActivations.
//  4. Memory plan: every other value gets an arena slot by liveness (best fit,
//     largest first); reshape and unsqueeze are views of their input.
//     `tfc.state` arguments (the KV caches) live in the session state instead,
//     one slot each at the declared maximums.
//  5. Serialization, with an FNV-1a checksum over everything after the header.
//
//===----------------------------------------------------------------------------===//
#include "passes/PlanWriter.h"

#include "format/model_bin.h"

#include "frontend/Weights.h"
#include "tfc/abi.h"
#include "tfc/bf16.h"
#include "ir/TfcDialect.h"
#include "passes/SymbolicShapes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/IRMapping.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <cstring>

using namespace mlir;
namespace td = mlir::tfc;

namespace tfc {
namespace {

struct HostTensor {
  std::vector<int64_t> shape;
  std::vector<float> data; // f32; integer constants are stored as their f32 value
  bool isInt = false;
  std::vector<int64_t> ints;
};

int64_t numElements(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// The sinusoidal tables, computed exactly as the tutorials' PyTorch code does.
std::vector<float> sinusoidTable(td::PEVariant variant, int64_t rows, int64_t dim) {
  std::vector<float> pe(rows * dim);
  if (variant == td::PEVariant::standard) {
    // torch: exp(arange(0, d, 2).float() * (-log(10000) / d)), then
    // sin/cos(position * div_term), all in f32.
    float k = (float)(-std::log(10000.0) / (double)dim);
    for (int64_t p = 0; p < rows; ++p)
      for (int64_t i = 0; i < dim; i += 2) {
        float div = std::exp((float)i * k);
        float arg = (float)p * div;
        pe[p * dim + i] = std::sin(arg);
        pe[p * dim + i + 1] = std::cos(arg);
      }
  } else {
    // Tutorials 001/003: Python's math.sin/cos in double, stored as f32.
    for (int64_t p = 0; p < rows; ++p)
      for (int64_t i = 0; i < dim; i += 2) {
        pe[p * dim + i] = (float)std::sin((double)p / std::pow(10000.0, 2.0 * i / dim));
        double e = variant == td::PEVariant::exp2i_cos_next ? 2.0 * (i + 1) / dim
                                                            : 2.0 * i / dim;
        pe[p * dim + i + 1] = (float)std::cos((double)p / std::pow(10000.0, e));
      }
  }
  return pe;
}

using Out = format::Writer;

using format::Instr;

class Writer {
public:
  Writer(ModuleOp module, const WeightStore &ws, const PlanOptions &opts)
      : module(module), ws(ws), opts(opts) {}
  FailureOr<std::string> run(PlanStats *stats);

private:
  ModuleOp module;
  const WeightStore &ws;
  PlanOptions opts;

  struct ValueInfo {
    uint32_t dtype = TFC_DTYPE_F32;
    std::vector<int64_t> dims;    // >= 0 constant, < 0 symbol -(d+1)
    std::vector<int64_t> maxDims; // at the declared maximums
    uint32_t storage = 2;         // 0 input, 1 weight, 2 arena, 3 view
    uint64_t offset = 0;
  };
  std::vector<std::string> symbolNames;
  std::vector<int64_t> symbolMax;
  // Per function (cleared between functions).
  llvm::DenseMap<Value, HostTensor> constants;
  llvm::DenseMap<Value, uint32_t> ids;
  std::vector<ValueInfo> values;
  // Shared by all functions.
  std::string weightsBlob;
  std::map<std::pair<uint64_t, uint64_t>, std::vector<uint64_t>> weightIndex;
  uint64_t stateSize = 0;
  std::vector<std::string> stateNames;

  LogicalResult planFunction(func::FuncOp f, Out &m, PlanStats *stats);

  LogicalResult inferSymbolicShapes(func::FuncOp f,
                                    llvm::DenseMap<Value, std::vector<int64_t>> &sym,
                                    llvm::DenseMap<Value, std::vector<int64_t>> &max);
  LogicalResult evaluateConstant(Operation *op);
  uint32_t addWeight(Value v, const HostTensor &t);
  uint32_t addWeightBytes(const std::vector<int64_t> &shape, uint32_t dtype,
                          const char *bytes, uint64_t n);
  /// The weight value operand |i| of |op| reads: f32 (or i64), or the reduced
  /// form --precision asks for. |scales| gets the id of an i8 weight's scales.
  uint32_t weightOperand(Operation *op, unsigned i, Value v, std::optional<uint32_t> &scales);
  llvm::DenseMap<std::pair<Value, unsigned>, std::pair<uint32_t, uint32_t>> reducedWeights;
  void assignActivations(const std::vector<Instr> &plan, const std::vector<uint32_t> &outputs);
};

uint32_t dtypeOf(Type t) {
  Type e = t.cast<RankedTensorType>().getElementType();
  if (e.isInteger(1))
    return TFC_DTYPE_BOOL;
  if (e.isInteger(64))
    return TFC_DTYPE_I64;
  if (e.isInteger(32))
    return TFC_DTYPE_I32;
  return TFC_DTYPE_F32;
}

LogicalResult Writer::inferSymbolicShapes(
    func::FuncOp f, llvm::DenseMap<Value, std::vector<int64_t>> &sym,
    llvm::DenseMap<Value, std::vector<int64_t>> &max) {
  // Inference twice: once with a sentinel per symbol, once with the maximums.
  for (int pass = 0; pass < 2; ++pass) {
    auto dimValue = [&](StringRef name) -> FailureOr<int64_t> {
      auto it = llvm::find(symbolNames, name);
      size_t s = it - symbolNames.begin();
      if (it == symbolNames.end()) {
        auto dm = f->getAttrOfType<DictionaryAttr>("tfc.dim_max");
        auto mx = dm ? dm.getAs<IntegerAttr>(name) : IntegerAttr();
        if (!mx)
          return f.emitError("symbolic dim '") << name << "' has no declared maximum";
        if (s >= std::size(td::kDimSentinels))
          return f.emitError("too many symbolic dims");
        symbolNames.push_back(name.str());
        symbolMax.push_back(mx.getInt());
      }
      return pass == 0 ? td::kDimSentinels[s] : symbolMax[s];
    };
    auto record = [&](Value orig, Value cl) -> LogicalResult {
      auto t = cl.getType().cast<RankedTensorType>();
      std::vector<int64_t> dims(t.getShape().begin(), t.getShape().end());
      if (pass == 1) {
        max[orig] = dims;
        return success();
      }
      for (int64_t &d : dims) {
        if (d < td::kDimSentinels[0])
          continue;
        auto it = llvm::find(td::kDimSentinels, d);
        if (it == std::end(td::kDimSentinels))
          return emitError(orig.getLoc(), "a dim depends on a product of symbolic dims, "
                                          "which the plan cannot express");
        d = -((it - std::begin(td::kDimSentinels)) + 1);
      }
      sym[orig] = dims;
      return success();
    };
    if (failed(td::reinferWithDims(f, dimValue, record)))
      return failure();
  }
  return success();
}

LogicalResult Writer::evaluateConstant(Operation *op) {
  auto resT = op->getResult(0).getType().cast<RankedTensorType>();
  HostTensor out;
  out.shape.assign(resT.getShape().begin(), resT.getShape().end());
  if (auto w = dyn_cast<td::WeightOp>(op)) {
    out.data = ws.materialize(w.getName().str());
    if ((int64_t)out.data.size() != numElements(out.shape))
      return op->emitError("weight '") << w.getName() << "' has no data";
  } else if (auto c = dyn_cast<td::ConstantOp>(op)) {
    auto attr = c.getValue().cast<DenseElementsAttr>();
    if (attr.getElementType().isa<IntegerType>()) {
      out.isInt = true;
      for (APInt v : attr.getValues<APInt>())
        out.ints.push_back(v.getSExtValue());
    } else {
      for (APFloat v : attr.getValues<APFloat>())
        out.data.push_back((float)v.convertToDouble());
    }
  } else if (auto s = dyn_cast<td::SinusoidTableOp>(op)) {
    out.data = sinusoidTable(s.getVariant(), (int64_t)s.getRows(), (int64_t)s.getDim());
  } else if (auto t = dyn_cast<td::TransposeOp>(op)) {
    const HostTensor &in = constants[t.getInput()];
    ArrayRef<int64_t> perm = t.getPerm();
    if (in.shape.size() != 2 || perm != ArrayRef<int64_t>{1, 0})
      return op->emitError("only 2-D constant transposes are evaluated at compile time");
    int64_t r = in.shape[0], c = in.shape[1];
    out.data.resize(r * c);
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j)
        out.data[j * r + i] = in.data[i * c + j];
  } else if (auto s = dyn_cast<td::SliceOp>(op)) {
    const HostTensor &in = constants[s.getInput()];
    int64_t rank = in.shape.size();
    int64_t axis = td::normalizeAxis((int64_t)s.getAxis(), rank);
    int64_t outer = numElements(ArrayRef<int64_t>(in.shape).take_front(axis));
    int64_t inner = numElements(ArrayRef<int64_t>(in.shape).drop_front(axis + 1));
    int64_t start = (int64_t)s.getStart(), size = (int64_t)s.getSize();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t a = start; a < start + size; ++a)
        for (int64_t i = 0; i < inner; ++i)
          out.data.push_back(in.data[(o * in.shape[axis] + a) * inner + i]);
  } else if (auto c = dyn_cast<td::ConcatOp>(op)) {
    int64_t rank = out.shape.size();
    int64_t axis = td::normalizeAxis((int64_t)c.getAxis(), rank);
    int64_t outer = numElements(ArrayRef<int64_t>(out.shape).take_front(axis));
    for (int64_t o = 0; o < outer; ++o)
      for (Value in : c.getInputs()) {
        const HostTensor &t = constants[in];
        int64_t chunk = numElements(ArrayRef<int64_t>(t.shape).drop_front(axis));
        out.data.insert(out.data.end(), t.data.begin() + o * chunk,
                        t.data.begin() + (o + 1) * chunk);
      }
  } else {
    return failure();
  }
  constants[op->getResult(0)] = std::move(out);
  return success();
}

uint32_t Writer::addWeightBytes(const std::vector<int64_t> &shape, uint32_t dtype,
                                const char *bytes, uint64_t n) {
  ValueInfo info;
  info.storage = TFC_STORAGE_WEIGHT;
  info.dims = shape;
  info.maxDims = shape;
  info.dtype = dtype;
  // The derived entry points read the same weights as @forward: store each once.
  auto key = std::make_pair(tfc_fnv1a64(bytes, n), n);
  bool found = false;
  for (uint64_t off : weightIndex[key])
    if (std::memcmp(weightsBlob.data() + off, bytes, n) == 0) {
      info.offset = off;
      found = true;
      break;
    }
  if (!found) {
    while (weightsBlob.size() % TFC_WEIGHT_ALIGN)
      weightsBlob.push_back('\0');
    info.offset = weightsBlob.size();
    weightsBlob.append(bytes, n);
    weightIndex[key].push_back(info.offset);
  }
  values.push_back(info);
  return values.size() - 1;
}

uint32_t Writer::addWeight(Value v, const HostTensor &t) {
  const char *bytes = t.isInt ? reinterpret_cast<const char *>(t.ints.data())
                              : reinterpret_cast<const char *>(t.data.data());
  uint64_t n = t.isInt ? t.ints.size() * 8 : t.data.size() * 4;
  ids[v] = addWeightBytes(t.shape, t.isInt ? TFC_DTYPE_I64 : TFC_DTYPE_F32, bytes, n);
  return ids[v];
}

uint32_t Writer::weightOperand(Operation *op, unsigned i, Value v,
                               std::optional<uint32_t> &scales) {
  // Only a linear layer's weight and a token embedding's table are stored in
  // reduced precision; everything else (biases, norms, positional tables) stays
  // f32: it is small, and the kernels add it to f32 sums.
  bool reducible = opts.precision != Precision::F32 && i == 1 &&
                   isa<td::LinearOp, td::FusedLinearOp, td::TokenEmbeddingOp>(op) &&
                   !constants[v].isInt && constants[v].shape.size() == 2;
  if (!reducible) {
    if (!ids.count(v))
      addWeight(v, constants[v]);
    return ids[v];
  }
  unsigned mode = (unsigned)opts.precision;
  auto it = reducedWeights.find({v, mode});
  if (it != reducedWeights.end()) {
    if (opts.precision == Precision::Int8)
      scales = it->second.second;
    return it->second.first;
  }
  const HostTensor &t = constants[v];
  const int64_t rows = t.shape[0], cols = t.shape[1];
  uint32_t id, sid = 0;
  if (opts.precision == Precision::BF16) {
    std::vector<uint16_t> h(t.data.size());
    for (size_t e = 0; e < h.size(); ++e)
      h[e] = tfc_f32_to_bf16(t.data[e]);
    id = addWeightBytes(t.shape, TFC_DTYPE_BF16, reinterpret_cast<const char *>(h.data()),
                        h.size() * 2);
  } else {
    // Symmetric per row (= per output channel of a linear weight [N, K], and per
    // token of an embedding table [V, D]: the same numbers for a tied weight).
    std::vector<int8_t> q(t.data.size());
    std::vector<float> sc(rows);
    for (int64_t r = 0; r < rows; ++r) {
      const float *w = t.data.data() + r * cols;
      float amax = 0;
      for (int64_t c = 0; c < cols; ++c)
        amax = std::max(amax, std::fabs(w[c]));
      sc[r] = amax / 127.0f;
      float inv = amax > 0 ? 127.0f / amax : 0.0f;
      for (int64_t c = 0; c < cols; ++c)
        q[r * cols + c] = (int8_t)std::clamp(std::nearbyint(w[c] * inv), -127.0f, 127.0f);
    }
    id = addWeightBytes(t.shape, TFC_DTYPE_I8, reinterpret_cast<const char *>(q.data()),
                        q.size());
    sid = addWeightBytes({rows}, TFC_DTYPE_F32, reinterpret_cast<const char *>(sc.data()),
                         sc.size() * 4);
    scales = sid;
  }
  reducedWeights[{v, mode}] = {id, sid};
  return id;
}

/// Picks the activations that travel in bf16 (--precision bf16 / int8). A value
/// is bf16 when its producer can write bf16 and every reader can read it:
/// - writers: linear, fused_linear without a residual, attention, layer_norm,
///   and slice/reshape/unsqueeze of a bf16 value;
/// - readers: a linear's input, attention's q/k/v (all three alike),
///   layer_norm's input, slice/reshape/unsqueeze (which keep the dtype).
/// Everything else stays f32: the residual stream (token embeddings and
/// fused_linear with a residual), softmax/log_softmax, elementwise ops, the KV
/// caches and cached_attention, and every function output. Starting from all
/// writers, values that break a rule are cleared until nothing changes.
void Writer::assignActivations(const std::vector<Instr> &plan,
                               const std::vector<uint32_t> &outputs) {
  if (opts.precision == Precision::F32)
    return;
  auto keepsDtype = [](uint32_t k) {
    return k == TFC_KERNEL_SLICE || k == TFC_KERNEL_RESHAPE || k == TFC_KERNEL_UNSQUEEZE;
  };
  auto writes = [&](const Instr &in) {
    return in.kernel == TFC_KERNEL_LINEAR || in.kernel == TFC_KERNEL_ATTENTION ||
           in.kernel == TFC_KERNEL_LAYER_NORM || keepsDtype(in.kernel) ||
           (in.kernel == TFC_KERNEL_FUSED_LINEAR && in.ints[1] == 0);
  };
  auto reads = [&](const Instr &in, size_t p) {
    if (in.kernel == TFC_KERNEL_ATTENTION)
      return p < 3;
    return p == 0 && (in.kernel == TFC_KERNEL_LINEAR || in.kernel == TFC_KERNEL_FUSED_LINEAR ||
                      in.kernel == TFC_KERNEL_LAYER_NORM || keepsDtype(in.kernel));
  };
  std::vector<char> bf(values.size(), 0);
  for (const Instr &in : plan)
    if (writes(in) && values[in.output].dtype == TFC_DTYPE_F32)
      bf[in.output] = 1;
  for (uint32_t o : outputs)
    bf[o] = 0;
  bool changed = true;
  auto clear = [&](uint32_t v) {
    if (bf[v]) {
      bf[v] = 0;
      changed = true;
    }
  };
  while (changed) {
    changed = false;
    for (const Instr &in : plan) {
      for (size_t p = 0; p < in.inputs.size(); ++p)
        if (bf[in.inputs[p]] && !reads(in, p))
          clear(in.inputs[p]);
      if (keepsDtype(in.kernel) && bf[in.inputs[0]] != bf[in.output]) {
        clear(in.inputs[0]);
        clear(in.output);
      }
      if (in.kernel == TFC_KERNEL_ATTENTION &&
          !(bf[in.inputs[0]] && bf[in.inputs[1]] && bf[in.inputs[2]]))
        for (size_t p = 0; p < 3; ++p)
          clear(in.inputs[p]);
    }
  }
  for (size_t v = 0; v < values.size(); ++v)
    if (bf[v])
      values[v].dtype = TFC_DTYPE_BF16;
}

/// Kernel id and attributes of a non-constant op; failure if unsupported.
LogicalResult describe(Operation *op, uint32_t &kernel, std::vector<int64_t> &ints,
                       std::vector<double> &floats) {
  auto axisOf = [&](int64_t axis) {
    int64_t rank = op->getOperand(0).getType().cast<RankedTensorType>().getRank();
    return td::normalizeAxis(axis, rank);
  };
  if (auto o = dyn_cast<td::TokenEmbeddingOp>(op)) {
    kernel = TFC_KERNEL_TOKEN_EMBEDDING;
    ints = {(int64_t)o.getPositionAxis(), o.getPositions() ? 1 : 0, o.getTypeIds() ? 1 : 0,
            o.getPositionOffset() ? 1 : 0};
    floats = {o.getScale().convertToDouble()};
  } else if (isa<td::EmbeddingOp>(op)) {
    kernel = TFC_KERNEL_EMBEDDING;
  } else if (auto o = dyn_cast<td::LinearOp>(op)) {
    kernel = TFC_KERNEL_LINEAR;
    ints = {o.getBias() ? 1 : 0};
  } else if (auto o = dyn_cast<td::FusedLinearOp>(op)) {
    kernel = TFC_KERNEL_FUSED_LINEAR;
    ints = {o.getBias() ? 1 : 0, o.getResidual() ? 1 : 0, (int64_t)o.getActivation()};
  } else if (auto o = dyn_cast<td::MatmulOp>(op)) {
    kernel = TFC_KERNEL_MATMUL;
    ints = {o.getTransposeB() ? 1 : 0};
  } else if (isa<td::AddOp>(op)) {
    kernel = TFC_KERNEL_ADD;
  } else if (isa<td::SubOp>(op)) {
    kernel = TFC_KERNEL_SUB;
  } else if (isa<td::MulOp>(op)) {
    kernel = TFC_KERNEL_MUL;
  } else if (isa<td::DivOp>(op)) {
    kernel = TFC_KERNEL_DIV;
  } else if (isa<td::AndOp>(op)) {
    kernel = TFC_KERNEL_AND;
  } else if (isa<td::NotOp>(op)) {
    kernel = TFC_KERNEL_NOT;
  } else if (auto o = dyn_cast<td::CompareOp>(op)) {
    kernel = TFC_KERNEL_COMPARE;
    ints = {(int64_t)o.getPredicate()};
  } else if (isa<td::CastOp>(op)) {
    kernel = TFC_KERNEL_CAST;
  } else if (auto o = dyn_cast<td::MaskedFillOp>(op)) {
    kernel = TFC_KERNEL_MASKED_FILL;
    floats = {o.getValue().convertToDouble()};
  } else if (isa<td::SelectOp>(op)) {
    kernel = TFC_KERNEL_SELECT;
  } else if (isa<td::ReshapeOp>(op)) {
    kernel = TFC_KERNEL_RESHAPE;
  } else if (auto o = dyn_cast<td::TransposeOp>(op)) {
    kernel = TFC_KERNEL_TRANSPOSE;
    ints.assign(o.getPerm().begin(), o.getPerm().end());
  } else if (isa<td::UnsqueezeOp>(op)) {
    kernel = TFC_KERNEL_UNSQUEEZE;
  } else if (auto o = dyn_cast<td::SliceOp>(op)) {
    kernel = TFC_KERNEL_SLICE;
    ints = {axisOf((int64_t)o.getAxis()), (int64_t)o.getStart(), (int64_t)o.getSize()};
  } else if (auto o = dyn_cast<td::ReduceMeanOp>(op)) {
    kernel = TFC_KERNEL_REDUCE_MEAN;
    ints = {axisOf((int64_t)o.getAxis()), o.getKeepdim() ? 1 : 0};
  } else if (auto o = dyn_cast<td::ReduceSumOp>(op)) {
    kernel = TFC_KERNEL_REDUCE_SUM;
    ints = {axisOf((int64_t)o.getAxis()), o.getKeepdim() ? 1 : 0};
  } else if (isa<td::SqrtOp>(op)) {
    kernel = TFC_KERNEL_SQRT;
  } else if (isa<td::ReluOp>(op)) {
    kernel = TFC_KERNEL_RELU;
  } else if (auto o = dyn_cast<td::GeluOp>(op)) {
    kernel = TFC_KERNEL_GELU;
    ints = {(int64_t)o.getApproximate()};
  } else if (auto o = dyn_cast<td::SoftmaxOp>(op)) {
    kernel = TFC_KERNEL_SOFTMAX;
    ints = {axisOf((int64_t)o.getAxis())};
  } else if (auto o = dyn_cast<td::LogSoftmaxOp>(op)) {
    kernel = TFC_KERNEL_LOG_SOFTMAX;
    ints = {axisOf((int64_t)o.getAxis())};
  } else if (auto o = dyn_cast<td::LayerNormOp>(op)) {
    kernel = TFC_KERNEL_LAYER_NORM;
    ints = {(int64_t)o.getVariant()};
    floats = {o.getEps().convertToDouble()};
  } else if (auto o = dyn_cast<td::AttentionOp>(op)) {
    kernel = TFC_KERNEL_ATTENTION;
    ints = {(int64_t)o.getMaskKind(), (int64_t)o.getNumHeads(), (int64_t)o.getPadId()};
    floats = {o.getScale().convertToDouble(), o.getMaskValue().convertToDouble()};
  } else if (auto o = dyn_cast<td::CachedAttentionOp>(op)) {
    kernel = TFC_KERNEL_CACHED_ATTENTION;
    ints = {(int64_t)o.getNumHeads()};
    floats = {o.getScale().convertToDouble()};
  } else if (auto o = dyn_cast<td::PositionsOp>(op)) {
    kernel = TFC_KERNEL_POSITIONS;
    ints = {axisOf((int64_t)o.getAxis())};
  } else if (isa<td::NopeakMaskOp>(op)) {
    kernel = TFC_KERNEL_NOPEAK_MASK;
  } else {
    return failure();
  }
  return success();
}

LogicalResult Writer::planFunction(func::FuncOp f, Out &m, PlanStats *stats) {
  constants.clear();
  ids.clear();
  values.clear();
  llvm::DenseMap<Value, std::vector<int64_t>> sym, maxShapes;
  if (failed(inferSymbolicShapes(f, sym, maxShapes)))
    return failure();

  // Inputs, and the state (KV cache) arguments.
  uint32_t numInputs = 0;
  for (auto [i, arg] : llvm::enumerate(f.getArguments())) {
    ValueInfo info;
    info.dtype = dtypeOf(arg.getType());
    info.dims = sym[arg];
    info.maxDims = maxShapes[arg];
    if (f.getArgAttr(i, "tfc.state")) {
      auto nm = f.getArgAttrOfType<StringAttr>(i, "tfc.name");
      uint64_t bytes = tfc_dtype_size(info.dtype);
      for (int64_t d : info.maxDims)
        bytes *= (uint64_t)d;
      info.storage = TFC_STORAGE_STATE;
      info.offset = stateSize;
      stateSize += (bytes + 63) / 64 * 64;
      stateNames.push_back(nm ? nm.str() : "state");
    } else {
      info.storage = TFC_STORAGE_INPUT;
      info.offset = numInputs++;
    }
    ids[arg] = values.size();
    values.push_back(info);
  }

  // Constants first (they only depend on each other), then the plan.
  reducedWeights.clear();
  std::vector<Instr> plan;
  auto isConstSource = [](Operation *op) {
    return isa<td::WeightOp, td::ConstantOp, td::SinusoidTableOp>(op);
  };
  Block &body = f.getBody().front();
  for (Operation &op : body.without_terminator()) {
    bool allConst = op.getNumOperands() > 0 &&
                    llvm::all_of(op.getOperands(), [&](Value v) { return constants.count(v); });
    if (isConstSource(&op) || (allConst && isa<td::TransposeOp, td::SliceOp, td::ConcatOp>(op))) {
      if (failed(evaluateConstant(&op)))
        return failure();
    }
  }
  for (Operation &op : body.without_terminator()) {
    Value r = op.getResult(0);
    if (constants.count(r))
      continue;
    Instr in;
    if (failed(describe(&op, in.kernel, in.ints, in.floats)))
      return op.emitError("no runtime kernel for '") << op.getName() << "'";
    // Constants something non-constant reads become weights (in the precision
    // --precision asks for); an i8 weight's scales are the last input.
    std::optional<uint32_t> scales;
    for (auto [i, v] : llvm::enumerate(op.getOperands()))
      in.inputs.push_back(constants.count(v) ? weightOperand(&op, i, v, scales) : ids.lookup(v));
    if (scales)
      in.inputs.push_back(*scales);
    ValueInfo info;
    info.dtype = dtypeOf(r.getType());
    info.dims = sym[r];
    info.maxDims = maxShapes[r];
    bool view = isa<td::ReshapeOp, td::UnsqueezeOp>(op);
    info.storage = view ? TFC_STORAGE_VIEW : TFC_STORAGE_ARENA;
    info.offset = view ? in.inputs[0] : 0;
    in.output = values.size();
    ids[r] = in.output;
    values.push_back(info);
    plan.push_back(std::move(in));
  }
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  std::vector<uint32_t> outputIds;
  for (Value result : ret.getOperands()) {
    if (!ids.count(result) || values[ids[result]].storage == TFC_STORAGE_WEIGHT)
      return f.emitError("an output of @") << f.getName() << " is a constant";
    outputIds.push_back(ids[result]);
  }
  assignActivations(plan, outputIds);

  // Liveness over instruction indices; a view keeps its source alive.
  std::vector<int64_t> def(values.size(), -1), last(values.size(), -1);
  auto rootOf = [&](uint32_t v) {
    while (values[v].storage == TFC_STORAGE_VIEW)
      v = (uint32_t)values[v].offset;
    return v;
  };
  for (size_t i = 0; i < plan.size(); ++i) {
    def[plan[i].output] = i;
    for (uint32_t v : plan[i].inputs) {
      uint32_t root = rootOf(v);
      last[root] = std::max<int64_t>(last[root], i);
    }
    last[rootOf(plan[i].output)] = std::max<int64_t>(last[rootOf(plan[i].output)], i);
  }
  for (Value result : ret.getOperands())
    last[rootOf(ids[result])] = plan.size(); // outputs live to the end
  // Best-fit placement, largest first, in a free list of [offset, size) holes.
  std::vector<uint32_t> order;
  for (uint32_t v = 0; v < values.size(); ++v)
    if (values[v].storage == TFC_STORAGE_ARENA)
      order.push_back(v);
  auto bytesOf = [&](uint32_t v) {
    uint64_t n = tfc_dtype_size(values[v].dtype);
    for (int64_t d : values[v].maxDims)
      n *= (uint64_t)d;
    return (n + 63) / 64 * 64;
  };
  llvm::sort(order, [&](uint32_t a, uint32_t b) { return bytesOf(a) > bytesOf(b); });
  struct Placed {
    uint64_t off, size;
    int64_t from, to;
  };
  std::vector<Placed> placed;
  uint64_t arena = 0;
  for (uint32_t v : order) {
    uint64_t size = bytesOf(v);
    int64_t from = def[v], to = last[v];
    // Collect the ranges that overlap in time, then take the lowest gap that fits.
    std::vector<std::pair<uint64_t, uint64_t>> busy;
    for (const Placed &p : placed)
      if (!(p.to < from || to < p.from))
        busy.push_back({p.off, p.off + p.size});
    llvm::sort(busy);
    uint64_t off = 0;
    for (auto &[b, e] : busy) {
      if (off + size <= b)
        break;
      off = std::max(off, e);
    }
    values[v].offset = off;
    placed.push_back({off, size, from, to});
    arena = std::max(arena, off + size);
  }

  // Serialize this function.
  m.str(f.getName());
  m.u32(values.size());
  for (const ValueInfo &v : values) {
    m.u32(v.dtype);
    m.u32(v.dims.size());
    for (int64_t d : v.dims)
      m.i64(d);
    m.u32(v.storage);
    m.u64(v.offset);
  }
  m.u32(numInputs);
  for (auto [i, arg] : llvm::enumerate(f.getArguments())) {
    if (values[ids[arg]].storage != TFC_STORAGE_INPUT)
      continue;
    auto nm = f.getArgAttrOfType<StringAttr>(i, "tfc.name");
    m.str(nm ? nm.getValue() : StringRef("input" + std::to_string(i)));
    m.u32(ids[arg]);
  }
  m.u32(ret.getNumOperands());
  for (auto [i, result] : llvm::enumerate(ret.getOperands())) {
    auto outName = f.getResultAttrOfType<StringAttr>(i, "tfc.name");
    m.str(outName ? outName.getValue() : StringRef("output" + std::to_string(i)));
    m.u32(ids[result]);
  }
  m.u32(plan.size());
  for (const Instr &in : plan)
    m.instr(in);
  m.u64(arena);

  if (stats) {
    stats->arenaBytes = std::max(stats->arenaBytes, arena);
    if (f.getName() == "forward") {
      for (const Instr &in : plan) {
        if (in.kernel == TFC_KERNEL_RESHAPE || in.kernel == TFC_KERNEL_UNSQUEEZE)
          continue;
        ++stats->kernels;
        char label[24];
        const size_t n = in.inputs.size();
        tfc_instr_precision(in.kernel, n > 0 ? values[in.inputs[0]].dtype : UINT32_MAX,
                            n > 1 ? values[in.inputs[1]].dtype : UINT32_MAX,
                            values[in.output].dtype, label, sizeof label);
        ++stats->precisionCounts[std::string(tfc_kernel_name(in.kernel)) + " " + label];
      }
      for (const ValueInfo &v : values)
        if (v.storage == TFC_STORAGE_ARENA &&
            (v.dtype == TFC_DTYPE_F32 || v.dtype == TFC_DTYPE_BF16)) {
          ++stats->floatActivations;
          stats->bf16Activations += v.dtype == TFC_DTYPE_BF16;
        }
    }
  }
  return success();
}

FailureOr<std::string> Writer::run(PlanStats *stats) {
  auto fwd = module.lookupSymbol<func::FuncOp>("forward");
  if (!fwd)
    return module.emitError("the module has no @forward function"), failure();
  std::vector<func::FuncOp> funcs{fwd};
  for (const char *name : {"encode", "decode_step"})
    if (auto f = module.lookupSymbol<func::FuncOp>(name))
      funcs.push_back(f);
  if (stats)
    *stats = PlanStats();

  Out body;
  body.u32(funcs.size());
  for (func::FuncOp f : funcs)
    if (failed(planFunction(f, body, stats)))
      return failure();
  body.u64(stateSize);
  // Generation metadata: the target input and the special ids.
  auto gen = module->getAttrOfType<DictionaryAttr>("tfc.generation");
  auto params = module->getAttrOfType<DictionaryAttr>("tfc.params");
  auto param = [&](StringRef n, int64_t dflt) {
    auto a = params ? params.getAs<IntegerAttr>(n) : IntegerAttr();
    return a ? a.getInt() : dflt;
  };
  if (gen && module.lookupSymbol("decode_step")) {
    body.u32(1);
    body.str(gen.getAs<StringAttr>("target").getValue());
    body.i64(param("bos_id", -1));
    body.i64(param("eos_id", -1));
    body.i64(param("pad_id", 0));
    body.i64(gen.getAs<IntegerAttr>("max_len").getInt());
  } else {
    body.u32(0);
  }

  // Serialize the metadata.
  Out m;
  m.str(format::producer());
  auto nameAttr = module->getAttrOfType<StringAttr>("tfc.model");
  m.str(nameAttr ? nameAttr.getValue() : "");
  m.u32(symbolNames.size());
  for (size_t s = 0; s < symbolNames.size(); ++s) {
    m.str(symbolNames[s]);
    m.i64(symbolMax[s]);
  }
  m.buf += body.buf;

  std::string file = format::assemble(m.buf, weightsBlob);

  if (stats) {
    stats->weightBytes = weightsBlob.size();
    stats->stateBytes = stateSize;
    if (stateSize)
      stats->cacheDescription = std::to_string(stateNames.size()) +
                                " buffers of [max_batch, max_len, width] f32";
  }
  return file;
}

} // namespace

FailureOr<std::string> writeModelBin(ModuleOp module, const WeightStore &weights,
                                     PlanStats *stats, const PlanOptions &options) {
  return Writer(module, weights, options).run(stats);
}

} // namespace tfc
