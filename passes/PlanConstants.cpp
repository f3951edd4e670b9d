//===- PlanConstants.cpp - compile-time constants and the weights section --===//
//
// Step 2 of the plan writer (PlanWriter.cpp): tfc.weight, tfc.constant,
// tfc.sinusoid_table and transpose/slice/concat of those are computed here, so
// the weights section holds exactly what the kernels read (packed QKV,
// transposed Conv1D weights). Identical weight data is stored once, and
// --precision bf16 / int8 / int4 stores linear weights and embedding tables
// reduced.
//
//===----------------------------------------------------------------------------===//
#include "passes/PlanWriterImpl.h"

#include "frontend/Weights.h"
#include "ir/TfcDialect.h"
#include "tfc/bf16.h"

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace mlir;
namespace td = mlir::tfc;

namespace tfc::plan {

int64_t numElements(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

namespace {
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
  } else if (variant == td::PEVariant::split) {
    // MarianSinusoidalPositionalEmbedding: numpy in double, stored as f32.
    const int64_t half = dim / 2;
    for (int64_t p = 0; p < rows; ++p)
      for (int64_t k = 0; k < half; ++k) {
        const double angle = (double)p / std::pow(10000.0, 2.0 * k / dim);
        pe[p * dim + k] = (float)std::sin(angle);
        pe[p * dim + half + k] = (float)std::cos(angle);
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
} // namespace

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

namespace {
/// One group of a row in int4: q in [-8, 7] and its scale, real = scale * q.
/// As llama.cpp's Q4_0, the element of largest magnitude maps to -8 (16 levels,
/// not 15); then a few scales around that one are tried and the one with the
/// least squared error is kept, so the error is never above Q4_0's. A group
/// holding NaN or inf gets scale NaN and zeros (its outputs are NaN, as int8's).
float quantizeInt4Group(const float *w, int64_t n, int8_t *q) {
  double m = 0;
  for (int64_t c = 0; c < n; ++c) {
    if (!std::isfinite(w[c])) {
      std::fill(q, q + n, 0);
      return NAN;
    }
    if (std::fabs(w[c]) > std::fabs(m))
      m = w[c];
  }
  if (m == 0) {
    std::fill(q, q + n, 0);
    return 0.0f;
  }
  auto err = [&](double d, bool store) {
    double e = 0;
    for (int64_t c = 0; c < n; ++c) {
      const double v = std::clamp(std::nearbyint(w[c] / d), -8.0, 7.0);
      e += (w[c] - v * d) * (w[c] - v * d);
      if (store)
        q[c] = (int8_t)v;
    }
    return e;
  };
  double best = m / -8.0, bestErr = err(best, false);
  for (int i = -4; i <= 4; ++i) {
    const double d = m / -8.0 * (1.0 + 0.025 * i), e = i ? err(d, false) : bestErr;
    if (e < bestErr) {
      best = d;
      bestErr = e;
    }
  }
  const float d = (float)best;
  err(d, true);
  return d;
}
} // namespace

/// The lm_head: a linear layer whose result a function returns, or whose
/// weight is also a token embedding's table (tied).
bool Writer::isLmHead(Operation *op, Value weight) {
  for (Operation *user : op->getResult(0).getUsers())
    if (user->hasTrait<OpTrait::IsTerminator>())
      return true;
  for (Operation *user : weight.getUsers())
    if (isa<td::TokenEmbeddingOp>(user))
      return true;
  return false;
}

uint32_t Writer::weightOperand(Operation *op, unsigned i, Value v) {
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
  Precision precision = opts.precision;
  if (precision == Precision::Int4 && (!isa<td::LinearOp, td::FusedLinearOp>(op) || isLmHead(op, v)))
    precision = Precision::Int8; // embedding tables and the lm_head stay 8-bit
  unsigned mode = (unsigned)precision;
  auto it = reducedWeights.find({v, mode});
  if (it != reducedWeights.end())
    return it->second.first;
  const HostTensor &t = constants[v];
  const int64_t rows = t.shape[0], cols = t.shape[1];
  uint32_t id, sid = 0;
  if (precision == Precision::Int4) {
    const int64_t group = opts.groupSize, groups = (cols + group - 1) / group;
    std::vector<uint8_t> packed(tfc_dtype_bytes(TFC_DTYPE_I4, (uint64_t)(rows * cols)), 0);
    std::vector<float> sc(rows * groups);
    std::vector<int8_t> q(std::min(group, cols)); // one group's codes
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t g = 0; g < groups; ++g) {
        const int64_t c0 = g * group, c1 = std::min(cols, c0 + group);
        sc[r * groups + g] = quantizeInt4Group(t.data.data() + r * cols + c0, c1 - c0, q.data());
        for (int64_t c = c0; c < c1; ++c) {
          const uint64_t e = (uint64_t)(r * cols + c);
          packed[e / 2] |= (uint8_t)((q[c - c0] & 0xF) << (e % 2 ? 4 : 0));
        }
      }
    id = addWeightBytes(t.shape, TFC_DTYPE_I4, reinterpret_cast<const char *>(packed.data()),
                        packed.size());
    sid = addWeightBytes({rows, groups}, TFC_DTYPE_F32, reinterpret_cast<const char *>(sc.data()),
                         sc.size() * 4);
    values[id].quant.scales = sid; // the weight's descriptor: one scale per group
    values[id].quant.group = (uint32_t)group;
  } else if (precision == Precision::BF16) {
    std::vector<uint16_t> h(t.data.size());
    for (size_t e = 0; e < h.size(); ++e)
      h[e] = tfc_f32_to_bf16(t.data[e]);
    id = addWeightBytes(t.shape, TFC_DTYPE_BF16, reinterpret_cast<const char *>(h.data()),
                        h.size() * 2);
  } else {
    // Symmetric per row (= per output channel of a linear weight [N, K], and per
    // token of an embedding table [V, D]: the same numbers for a tied weight),
    // or per group of opts.int8Group along a row (as llama.cpp's Q8_0).
    const int64_t group = opts.int8Group > 0 ? opts.int8Group : cols;
    const int64_t groups = (cols + group - 1) / group;
    std::vector<int8_t> q(t.data.size());
    std::vector<float> sc(rows * groups);
    // A row holding NaN or inf is stored as scale NaN and zeros: its outputs
    // (a linear layer's output column, an embedding's token row) are NaN
    // (docs/precision.md, "Non-finite values"). The rest in double, so that
    // 127 / amax cannot overflow and nothing non-finite is cast to int8.
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t g = 0; g < groups; ++g) {
        const int64_t c0 = g * group, c1 = std::min(cols, c0 + group);
        const float *w = t.data.data() + r * cols;
        float amax = 0;
        bool finite = true;
        for (int64_t c = c0; c < c1; ++c) {
          finite &= std::isfinite(w[c]);
          amax = std::max(amax, std::fabs(w[c]));
        }
        sc[r * groups + g] = finite ? amax / 127.0f : NAN;
        const double inv = finite && amax > 0 ? 127.0 / amax : 0.0;
        for (int64_t c = c0; c < c1; ++c)
          q[r * cols + c] =
              finite ? (int8_t)std::clamp(std::nearbyint(w[c] * inv), -127.0, 127.0) : 0;
      }
    id = addWeightBytes(t.shape, TFC_DTYPE_I8, reinterpret_cast<const char *>(q.data()),
                        q.size());
    const std::vector<int64_t> sshape =
        opts.int8Group > 0 ? std::vector<int64_t>{rows, groups} : std::vector<int64_t>{rows};
    sid = addWeightBytes(sshape, TFC_DTYPE_F32, reinterpret_cast<const char *>(sc.data()),
                         sc.size() * 4);
    values[id].quant.scales = sid; // the weight's descriptor: per row, or per group
    values[id].quant.group = (uint32_t)std::max<int64_t>(opts.int8Group, 0);
    values[id].quant.actBits = opts.int8Group > 0 ? (uint32_t)opts.int8ActBits : 0;
  }
  reducedWeights[{v, mode}] = {id, sid};
  return id;
}

} // namespace tfc::plan
