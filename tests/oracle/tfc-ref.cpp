//===- tfc-ref.cpp - reference interpreter of printed tfc IR (the tests' oracle) ===//
//
// Executes the @forward function of what `tfc compile --emit=mlir-import`
// (unfused) or `--emit=mlir` (fused) prints, in double precision, on the
// weights of a safetensors file and .npy inputs. The lit suite
// (tests/lit/numerics) uses it to check, before and independently of the
// plan and the runtime, that
//   - the frontend's IR computes what the PyTorch source computes (goldens), and
//   - the fusion passes do not change the numbers (fused vs unfused).
//
// It is deliberately naive so that it can be read against the op descriptions
// in ir/TfcOps.td: the IR is read by MLIR's own parser (and verified), every
// tensor is a row-major std::vector<double> whatever its element type, and
// every op is a plain loop or one of the shared references of
// tests/reference/Reference.h (the ones the kernel unit tests use). Weights
// come through the frontend's weight store (frontend/Weights.h, over its
// safetensors reader), .npy files through tfrun's reader (tools/tfrun/npy.h).
//
// Usage:
//   tfc-ref model.mlir --weights W.safetensors --input src=src.npy ...
//       [--output out.npy] [--compare golden.npy [--atol 1e-4]]
// With --compare it prints one line, "PASS: max abs error E (atol A), shape
// [..]" or "FAIL: ..." (then where the largest error is), and exits 1 on a
// mismatch: a shape that differs, a non-finite output, or an error above atol.
// Anything that stops the evaluation (a bad file, a missing input, an op it
// does not know) is an error on stderr and exit code 2.
//
//===----------------------------------------------------------------------===//
#include "frontend/Weights.h"
#include "ir/TfcDialect.h"
#include "tests/reference/Reference.h"
#include "tfc/relative_bucket.h"
#include "tools/tfrun/npy.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

using namespace mlir;
namespace td = mlir::tfc;
namespace ref = ::tfc::ref;

namespace {

//===----------------------------------------------------------------------===//
// Values
//===----------------------------------------------------------------------===//

/// What the elements of a tensor are; all are held as doubles (ids are exact
/// below 2^53, far beyond any vocabulary).
enum class Kind { Float, Int, Bool };

struct Tensor {
  std::vector<int64_t> shape;
  std::vector<double> data;
  Kind kind = Kind::Float;
};

Kind kindOf(Type type) {
  Type e = type.cast<ShapedType>().getElementType();
  if (e.isa<FloatType>())
    return Kind::Float;
  return e.isInteger(1) ? Kind::Bool : Kind::Int;
}

std::string shapeStr(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::vector<int64_t> stridesOf(const std::vector<int64_t> &shape) {
  std::vector<int64_t> st(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    st[i] = st[i + 1] * shape[i + 1];
  return st;
}

/// Product of shape[begin, end).
int64_t product(const std::vector<int64_t> &shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i)
    n *= shape[i];
  return n;
}

/// An element as its kind stores it: integers truncate toward zero (as
/// torch's .long() and the runtime's kernels), booleans are "not zero".
double asKind(Kind kind, double v) {
  switch (kind) {
  case Kind::Float:
    return v;
  case Kind::Int:
    return std::trunc(v);
  case Kind::Bool:
    return v != 0 ? 1.0 : 0.0;
  }
  return v;
}

//===----------------------------------------------------------------------===//
// The interpreter
//===----------------------------------------------------------------------===//

class Interpreter {
public:
  explicit Interpreter(::tfc::WeightStore &weights) : weights(weights) {}

  /// Runs |func| on |inputs| (by argument name, the `tfc.name` attribute).
  /// Emits an error at the offending op or argument and fails on anything it
  /// cannot evaluate.
  FailureOr<Tensor> run(func::FuncOp func, std::map<std::string, Tensor> inputs);

private:
  LogicalResult eval(Operation *op);
  const Tensor &in(Value v) { return env.find(v)->second; }
  /// Binds |t| to |result| after checking it against the static dims of the
  /// result type (a wrong shape is an oracle or IR bug, never a silent pass).
  LogicalResult define(Operation *op, Value result, Tensor t);

  LogicalResult elementwise(Operation *op, const std::function<double(ArrayRef<double>)> &f);
  FailureOr<Tensor> weight(td::WeightOp op);
  FailureOr<Tensor> constant(td::ConstantOp op);
  FailureOr<Tensor> sinusoid(td::SinusoidTableOp op);
  FailureOr<Tensor> embedding(Operation *op, const Tensor &table, const Tensor &ids);
  FailureOr<Tensor> linear(Operation *op, const Tensor &x, const Tensor &w, const Tensor *bias,
                           ref::Activation act, const Tensor *residual,
                           const Tensor *multiplier = nullptr);
  FailureOr<Tensor> tokenEmbedding(td::TokenEmbeddingOp op);
  FailureOr<Tensor> attention(td::AttentionOp op);

  ::tfc::WeightStore &weights;
  llvm::DenseMap<Value, Tensor> env;
  std::map<std::string, Tensor> weightCache;
};

/// Whether |shape| is one of the shapes of |type| (its rank, its static dims).
bool fits(Type type, const std::vector<int64_t> &shape) {
  auto ranked = type.cast<RankedTensorType>();
  bool ok = ranked.getRank() == static_cast<int64_t>(shape.size());
  for (int64_t i = 0; ok && i < ranked.getRank(); ++i)
    ok = ranked.isDynamicDim(i) || ranked.getDimSize(i) == shape[i];
  return ok;
}

LogicalResult Interpreter::define(Operation *op, Value result, Tensor t) {
  auto type = result.getType().cast<RankedTensorType>();
  if (!fits(type, t.shape))
    return op->emitError() << "tfc-ref computed shape " << shapeStr(t.shape)
                           << ", which does not fit the result type " << type;
  t.kind = kindOf(type);
  for (double &v : t.data)
    v = asKind(t.kind, v);
  env[result] = std::move(t);
  return success();
}

FailureOr<Tensor> Interpreter::run(func::FuncOp func, std::map<std::string, Tensor> inputs) {
  env.clear();
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    auto nameAttr = func.getArgAttrOfType<StringAttr>(i, "tfc.name");
    const std::string name = nameAttr ? nameAttr.str() : "arg" + std::to_string(i);
    auto it = inputs.find(name);
    if (it == inputs.end())
      return func.emitError() << "no --input for argument '" << name << "' of type "
                              << func.getArgument(i).getType();
    Tensor t = std::move(it->second);
    inputs.erase(it);
    const Kind want = kindOf(func.getArgument(i).getType());
    if (t.kind == Kind::Float && want != Kind::Float)
      return func.emitError() << "input '" << name << "' holds floats but argument " << i << " is "
                              << func.getArgument(i).getType();
    if (!fits(func.getArgument(i).getType(), t.shape))
      return func.emitError() << "input '" << name << "' has shape " << shapeStr(t.shape)
                              << ", which argument " << i << " (" << func.getArgument(i).getType()
                              << ") cannot take";
    if (failed(define(func, func.getArgument(i), std::move(t))))
      return failure();
  }
  if (!inputs.empty())
    return func.emitError() << "--input '" << inputs.begin()->first << "' names no argument of @"
                            << func.getName();
  for (Operation &op : func.getBody().front()) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      if (ret.getNumOperands() != 1)
        return ret.emitError() << "tfc-ref evaluates functions with one result, not "
                               << ret.getNumOperands();
      return in(ret.getOperand(0));
    }
    if (failed(eval(&op)))
      return failure();
  }
  return func.emitError() << "has no return";
}

LogicalResult Interpreter::elementwise(Operation *op,
                                       const std::function<double(ArrayRef<double>)> &f) {
  std::vector<const Tensor *> xs;
  std::vector<int64_t> shape;
  for (Value v : op->getOperands()) {
    xs.push_back(&in(v));
    const std::vector<int64_t> &s = xs.back()->shape;
    for (size_t i = 0; i < std::min(s.size(), shape.size()); ++i) {
      const int64_t a = s[s.size() - 1 - i], b = shape[shape.size() - 1 - i];
      if (a != b && a != 1 && b != 1)
        return op->emitError() << "operand shapes do not broadcast: " << shapeStr(shape) << " and "
                               << shapeStr(s);
    }
    shape = ref::broadcastShape(shape, s);
  }
  Tensor out;
  out.shape = shape;
  out.data.resize(ref::numElements(shape));
  std::vector<double> args(xs.size());
  for (int64_t e = 0; e < static_cast<int64_t>(out.data.size()); ++e) {
    for (size_t k = 0; k < xs.size(); ++k)
      args[k] = xs[k]->data[ref::broadcastIndex(shape, xs[k]->shape, e)];
    out.data[e] = f(args);
  }
  return define(op, op->getResult(0), std::move(out));
}

FailureOr<Tensor> Interpreter::weight(td::WeightOp op) {
  const std::string name = op.getName().str();
  const auto type = op.getResult().getType().cast<RankedTensorType>();
  const std::vector<int64_t> shape(type.getShape().begin(), type.getShape().end());
  auto cached = weightCache.find(name);
  if (cached != weightCache.end())
    return cached->second;
  std::string err;
  // The store checks presence, dtype and shape, and converts to f32.
  if (!weights.declare(name, shape, ::tfc::WeightRole::Matrix, err))
    return op.emitError() << err;
  const std::vector<float> values = weights.materialize(name);
  Tensor t;
  t.shape = shape;
  t.data.assign(values.begin(), values.end());
  weightCache[name] = t;
  return t;
}

FailureOr<Tensor> Interpreter::constant(td::ConstantOp op) {
  auto dense = op.getValue().dyn_cast<DenseElementsAttr>();
  if (!dense)
    return op.emitError() << "tfc-ref reads dense constants only";
  const auto type = op.getResult().getType().cast<RankedTensorType>();
  Tensor t;
  t.shape.assign(type.getShape().begin(), type.getShape().end());
  if (type.getElementType().isa<FloatType>()) {
    for (APFloat v : dense.getValues<APFloat>()) {
      bool losesInfo = false;
      v.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &losesInfo);
      t.data.push_back(v.convertToDouble());
    }
  } else {
    const bool isBool = type.getElementType().isInteger(1);
    for (const APInt &v : dense.getValues<APInt>())
      t.data.push_back(isBool ? static_cast<double>(v.getZExtValue())
                              : static_cast<double>(v.getSExtValue()));
  }
  return t;
}

FailureOr<Tensor> Interpreter::sinusoid(td::SinusoidTableOp op) {
  const int64_t rows = op.getRowsAttr().getInt(), dim = op.getDimAttr().getInt();
  Tensor t;
  t.shape = {rows, dim};
  t.data.assign(rows * dim, 0.0);
  // The table is f32 by definition: each entry is computed as its variant says,
  // then rounded to f32.
  for (int64_t p = 0; p < rows; ++p)
    for (int64_t i = 0; i < dim; i += 2) {
      double s, c;
      switch (op.getVariant()) {
      case td::PEVariant::standard: {
        // torch: exp(arange(0, d, 2) * (-ln(10000) / d)) and sin/cos in f32.
        const float div =
            std::exp(static_cast<float>(i) * static_cast<float>(-std::log(10000.0) / dim));
        const float angle = static_cast<float>(p) * div;
        s = std::sin(angle);
        c = std::cos(angle);
        break;
      }
      case td::PEVariant::exp2i:
      case td::PEVariant::exp2i_cos_next: {
        // The tutorials' Python math, in double.
        const bool next = op.getVariant() == td::PEVariant::exp2i_cos_next;
        s = std::sin(p / std::pow(10000.0, (2.0 * i) / dim));
        c = std::cos(p / std::pow(10000.0, (2.0 * (next ? i + 1 : i)) / dim));
        break;
      }
      case td::PEVariant::split: {
        // Marian: columns k and d/2 + k hold sin and cos of one angle.
        const int64_t k = i / 2;
        const double angle = p / std::pow(10000.0, (2.0 * k) / dim);
        t.data[p * dim + k] = static_cast<float>(std::sin(angle));
        t.data[p * dim + dim / 2 + k] = static_cast<float>(std::cos(angle));
        continue;
      }
      default:
        return op.emitError() << "tfc-ref does not know this table variant";
      }
      t.data[p * dim + i] = static_cast<float>(s);
      if (i + 1 < dim)
        t.data[p * dim + i + 1] = static_cast<float>(c);
    }
  return t;
}

FailureOr<Tensor> Interpreter::embedding(Operation *op, const Tensor &table, const Tensor &ids) {
  const int64_t vocab = table.shape[0], d = table.shape[1];
  Tensor t;
  t.shape = ids.shape;
  t.shape.push_back(d);
  t.data.resize(ids.data.size() * d);
  for (size_t e = 0; e < ids.data.size(); ++e) {
    const int64_t id = static_cast<int64_t>(ids.data[e]);
    if (id < 0 || id >= vocab)
      return op->emitError() << "id " << id << " is out of range [0, " << vocab << ")";
    std::copy_n(table.data.begin() + id * d, d, t.data.begin() + e * d);
  }
  return t;
}

FailureOr<Tensor> Interpreter::linear(Operation *op, const Tensor &x, const Tensor &w,
                                      const Tensor *bias, ref::Activation act,
                                      const Tensor *residual, const Tensor *multiplier) {
  const int64_t n = w.shape[0], k = w.shape[1];
  if (x.shape.empty() || x.shape.back() != k)
    return op->emitError() << "input " << shapeStr(x.shape) << " does not end in K = " << k;
  const int64_t rows = static_cast<int64_t>(x.data.size()) / k;
  Tensor t;
  t.shape = x.shape;
  t.shape.back() = n;
  t.data.resize(rows * n);
  if (residual && residual->shape != t.shape)
    return op->emitError() << "residual " << shapeStr(residual->shape) << " is not "
                           << shapeStr(t.shape);
  if (multiplier && multiplier->shape != t.shape)
    return op->emitError() << "multiplier " << shapeStr(multiplier->shape) << " is not "
                           << shapeStr(t.shape);
  ref::linear(rows, k, n, x.data.data(), w.data.data(), bias ? bias->data.data() : nullptr, act,
              residual ? residual->data.data() : nullptr, t.data.data(),
              multiplier ? multiplier->data.data() : nullptr);
  return t;
}

FailureOr<Tensor> Interpreter::tokenEmbedding(td::TokenEmbeddingOp op) {
  const Tensor &ids = in(op.getIds());
  FailureOr<Tensor> t = embedding(op, in(op.getTable()), ids);
  if (failed(t))
    return failure();
  const int64_t d = in(op.getTable()).shape[1];
  const double scale = op.getScale().convertToDouble();
  for (double &v : t->data)
    v *= scale;
  const int64_t rank = static_cast<int64_t>(ids.shape.size());
  if (op.getPositions()) {
    const Tensor &pe = in(op.getPositions());
    const int64_t axis = td::normalizeAxis(static_cast<int64_t>(op.getPositionAxis()), rank);
    if (axis < 0)
      return op.emitError() << "position axis " << static_cast<int64_t>(op.getPositionAxis())
                            << " is out of range for ids " << shapeStr(ids.shape);
    const int64_t offset =
        op.getPositionOffset() ? static_cast<int64_t>(in(op.getPositionOffset()).data[0]) : 0;
    const std::vector<int64_t> st = stridesOf(ids.shape);
    for (size_t e = 0; e < ids.data.size(); ++e) {
      // Row e of the output reads the table row of its position along |axis|.
      const int64_t pos = offset + (static_cast<int64_t>(e) / st[axis]) % ids.shape[axis];
      if (pos < 0 || pos >= pe.shape[0])
        return op.emitError() << "position " << pos << " is beyond the table's " << pe.shape[0]
                              << " rows";
      for (int64_t j = 0; j < d; ++j)
        t->data[e * d + j] += pe.data[pos * d + j];
    }
  }
  if (op.getTypeIds()) {
    FailureOr<Tensor> types = embedding(op, in(op.getTypeTable()), in(op.getTypeIds()));
    if (failed(types))
      return failure();
    if (types->data.size() != t->data.size())
      return op.emitError() << "type ids " << shapeStr(in(op.getTypeIds()).shape)
                            << " do not match the ids " << shapeStr(ids.shape);
    for (size_t e = 0; e < t->data.size(); ++e)
      t->data[e] += types->data[e];
  }
  return t;
}

FailureOr<Tensor> Interpreter::attention(td::AttentionOp op) {
  const Tensor &q = in(op.getQuery()), &k = in(op.getKey()), &v = in(op.getValue());
  const int64_t heads = op.getNumHeadsAttr().getInt();
  if (heads <= 0 || q.shape.size() != 3 || k.shape.size() != 3 || v.shape.size() != 3 ||
      q.shape[0] != k.shape[0] || k.shape[0] != v.shape[0] || k.shape[1] != v.shape[1] ||
      q.shape[2] != k.shape[2] || q.shape[2] % heads || v.shape[2] % heads)
    return op.emitError() << "query " << shapeStr(q.shape) << ", key " << shapeStr(k.shape)
                          << " and value " << shapeStr(v.shape) << " do not make " << heads
                          << "-head attention";
  ref::Attention a;
  a.batch = q.shape[0];
  a.qLen = q.shape[1];
  a.kvLen = k.shape[1];
  a.heads = heads;
  a.headDim = q.shape[2] / heads;
  a.vHeadDim = v.shape[2] / heads;
  a.q = q.data.data();
  a.k = k.data.data();
  a.v = v.data.data();
  a.scale = op.getScale().convertToDouble();
  a.mask = static_cast<ref::Mask>(op.getMaskKind());
  a.maskValue = op.getMaskValue().convertToDouble();
  a.padId = static_cast<int64_t>(op.getPadId());
  const Tensor *mask = op.getMask() ? &in(op.getMask()) : nullptr;
  if (a.mask == ref::Mask::KeyPadding || a.mask == ref::Mask::PaddingCausal) {
    if (!mask || mask->shape != std::vector<int64_t>{a.batch, a.kvLen})
      return op.emitError() << "a padding mask needs the key tokens [" << a.batch << ", " << a.kvLen
                            << "]";
    a.keyToken = [mask, &a](int64_t b, int64_t j) {
      return static_cast<int64_t>(mask->data[b * a.kvLen + j]);
    };
  }
  const std::vector<int64_t> full = {a.batch, a.heads, a.qLen, a.kvLen};
  if (a.mask == ref::Mask::Additive) {
    if (!mask || ref::broadcastShape(full, mask->shape) != full)
      return op.emitError() << "the additive mask does not broadcast to " << shapeStr(full);
    a.additive = [mask, &full, &a](int64_t b, int64_t h, int64_t i, int64_t j) {
      const int64_t e = ((b * a.heads + h) * a.qLen + i) * a.kvLen + j;
      return mask->data[ref::broadcastIndex(full, mask->shape, e)];
    };
  }
  if (Value pb = op.getPositionBias()) {
    // T5's relative position bias from its [num_buckets, H] table.
    const Tensor *tab = &in(pb);
    if (tab->shape.size() != 2 || tab->shape[1] != heads)
      return op.emitError() << "the position bias table " << shapeStr(tab->shape)
                            << " is not [num_buckets, " << heads << "]";
    const int bidir = op.getBiasBidirectional() ? 1 : 0;
    const int64_t maxDist = static_cast<int64_t>(op.getBiasMaxDistance());
    a.bias = [tab, bidir, maxDist, heads](int64_t, int64_t h, int64_t i, int64_t j) {
      const int64_t row = tfc_relative_bucket(j - i, bidir, tab->shape[0], maxDist);
      return tab->data[row * heads + h];
    };
  }
  Tensor t;
  t.shape = {a.batch, a.qLen, v.shape[2]};
  t.data = ref::attention(a);
  return t;
}

LogicalResult Interpreter::eval(Operation *op) {
  auto done = [&](FailureOr<Tensor> t) -> LogicalResult {
    if (failed(t))
      return failure();
    return define(op, op->getResult(0), std::move(*t));
  };
  auto axisOf = [&](int64_t axis, size_t rank) -> FailureOr<int64_t> {
    const int64_t a = td::normalizeAxis(axis, static_cast<int64_t>(rank));
    if (a < 0)
      return op->emitError() << "axis " << axis << " is out of range for rank " << rank;
    return a;
  };
  using Args = ArrayRef<double>;
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      // --- Sources --------------------------------------------------------
      .Case([&](td::WeightOp o) { return done(weight(o)); })
      .Case([&](td::ConstantOp o) { return done(constant(o)); })
      .Case([&](td::SinusoidTableOp o) { return done(sinusoid(o)); })
      .Case([&](td::PositionsOp o) {
        const Tensor &x = in(o.getInput());
        FailureOr<int64_t> axis = axisOf(o.getAxisAttr().getInt(), x.shape.size());
        if (failed(axis))
          return failure();
        Tensor t;
        if (auto padAttr = o.getPaddingIdxAttr()) { // RoBERTa's, from the ids
          const int64_t pad = padAttr.getInt();
          t.shape = x.shape;
          for (int64_t b = 0; b < x.shape[0]; ++b) {
            int64_t count = 0;
            for (int64_t i = 0; i < x.shape[1]; ++i)
              t.data.push_back(x.data[b * x.shape[1] + i] != (double)pad
                                   ? (double)(pad + ++count)
                                   : (double)pad);
          }
          return done(t);
        }
        t.shape.assign(x.shape.size(), 1);
        t.shape[*axis] = x.shape[*axis];
        for (int64_t i = 0; i < x.shape[*axis]; ++i)
          t.data.push_back(static_cast<double>(i));
        return done(t);
      })
      .Case([&](td::RelativePositionBiasOp o) -> LogicalResult {
        const Tensor &tab = in(o.getTable()), &q = in(o.getQuery()), &k = in(o.getKey());
        if (tab.shape.size() != 2 || q.shape.size() != 2 || k.shape.size() != 2)
          return o.emitError() << "expects a [buckets, H] table and [B, S] ids";
        const int64_t nb = tab.shape[0], H = tab.shape[1], sq = q.shape[1], sk = k.shape[1];
        Tensor t;
        t.shape = {1, H, sq, sk};
        t.data.resize(static_cast<size_t>(H * sq * sk));
        for (int64_t h = 0; h < H; ++h)
          for (int64_t i = 0; i < sq; ++i)
            for (int64_t j = 0; j < sk; ++j)
              t.data[(h * sq + i) * sk + j] = tab.data[tfc_relative_bucket(
                  j - i, o.getBidirectional() ? 1 : 0, nb, (int64_t)o.getMaxDistance()) * H + h];
        return done(t);
      })
      .Case([&](td::NopeakMaskOp o) -> LogicalResult {
        const Tensor &x = in(o.getInput());
        if (x.shape.size() < 2)
          return o.emitError() << "expects [B, S] ids, got " << shapeStr(x.shape);
        const int64_t s = x.shape[1];
        Tensor t;
        t.shape = {1, s, s};
        for (int64_t i = 0; i < s; ++i)
          for (int64_t j = 0; j < s; ++j)
            t.data.push_back(j <= i ? 1.0 : 0.0);
        return done(t);
      })
      // --- Primitive tensor ops ------------------------------------------
      .Case([&](td::EmbeddingOp o) { return done(embedding(o, in(o.getTable()), in(o.getIds()))); })
      .Case([&](td::LinearOp o) {
        return done(linear(o, in(o.getInput()), in(o.getWeight()),
                           o.getBias() ? &in(o.getBias()) : nullptr, ref::Activation::None,
                           nullptr));
      })
      .Case([&](td::MatmulOp o) -> LogicalResult {
        const Tensor &a = in(o.getLhs()), &b = in(o.getRhs());
        const bool tb = o.getTransposeB();
        if (a.shape.size() < 2 || b.shape.size() < 2 ||
            a.shape.back() != b.shape[b.shape.size() - (tb ? 1 : 2)])
          return o.emitError() << "cannot multiply " << shapeStr(a.shape) << " by "
                               << shapeStr(b.shape) << (tb ? " transposed" : "");
        Tensor t;
        t.data = ref::matmul(a.shape, a.data.data(), b.shape, b.data.data(), tb, t.shape);
        return done(t);
      })
      .Case([&](td::AddOp o) { return elementwise(o, [](Args x) { return x[0] + x[1]; }); })
      .Case([&](td::SubOp o) { return elementwise(o, [](Args x) { return x[0] - x[1]; }); })
      .Case([&](td::MulOp o) { return elementwise(o, [](Args x) { return x[0] * x[1]; }); })
      .Case([&](td::DivOp o) { return elementwise(o, [](Args x) { return x[0] / x[1]; }); })
      .Case([&](td::AndOp o) {
        return elementwise(o, [](Args x) { return x[0] != 0 && x[1] != 0 ? 1.0 : 0.0; });
      })
      .Case([&](td::CompareOp o) {
        const td::CmpPredicate p = o.getPredicate();
        return elementwise(o, [p](Args x) {
          bool r = false;
          switch (p) {
          case td::CmpPredicate::eq:
            r = x[0] == x[1];
            break;
          case td::CmpPredicate::ne:
            r = x[0] != x[1];
            break;
          case td::CmpPredicate::lt:
            r = x[0] < x[1];
            break;
          case td::CmpPredicate::le:
            r = x[0] <= x[1];
            break;
          case td::CmpPredicate::gt:
            r = x[0] > x[1];
            break;
          case td::CmpPredicate::ge:
            r = x[0] >= x[1];
            break;
          }
          return r ? 1.0 : 0.0;
        });
      })
      .Case(
          [&](td::NotOp o) { return elementwise(o, [](Args x) { return x[0] == 0 ? 1.0 : 0.0; }); })
      // The result's element type decides (define() truncates or tests != 0).
      .Case([&](td::CastOp o) { return elementwise(o, [](Args x) { return x[0]; }); })
      .Case([&](td::MaskedFillOp o) {
        const double value = o.getValue().convertToDouble();
        return elementwise(o, [value](Args x) { return x[1] != 0 ? value : x[0]; });
      })
      .Case([&](td::SelectOp o) {
        return elementwise(o, [](Args x) { return x[0] != 0 ? x[1] : x[2]; });
      })
      .Case([&](td::ReshapeOp o) -> LogicalResult {
        const Tensor &x = in(o.getInput());
        Tensor t;
        t.data = x.data;
        int64_t known = 1, inferred = -1;
        ArrayRef<int64_t> spec = o.getShape();
        for (size_t i = 0; i < spec.size(); ++i) {
          const int64_t s = spec[i];
          int64_t d = s;
          if (s == 0) {
            if (i >= x.shape.size())
              return o.emitError() << "0 at index " << i << " copies no input dim";
            d = x.shape[i];
          }
          if (d == -1)
            inferred = static_cast<int64_t>(i);
          else
            known *= d;
          t.shape.push_back(d);
        }
        const int64_t n = static_cast<int64_t>(x.data.size());
        if (inferred >= 0)
          t.shape[inferred] = known ? n / known : 0;
        if (ref::numElements(t.shape) != n)
          return o.emitError() << "cannot reshape " << shapeStr(x.shape) << " to "
                               << shapeStr(t.shape);
        return done(t);
      })
      .Case([&](td::TransposeOp o) -> LogicalResult {
        const Tensor &x = in(o.getInput());
        ArrayRef<int64_t> perm = o.getPerm();
        if (perm.size() != x.shape.size())
          return o.emitError() << "perm has " << perm.size() << " entries for rank "
                               << x.shape.size();
        Tensor t;
        for (int64_t p : perm)
          t.shape.push_back(x.shape[p]);
        const std::vector<int64_t> inSt = stridesOf(x.shape), outSt = stridesOf(t.shape);
        t.data.resize(x.data.size());
        for (int64_t e = 0; e < static_cast<int64_t>(t.data.size()); ++e) {
          int64_t src = 0;
          for (size_t i = 0; i < perm.size(); ++i)
            src += (e / outSt[i]) % t.shape[i] * inSt[perm[i]];
          t.data[e] = x.data[src];
        }
        return done(t);
      })
      .Case([&](td::UnsqueezeOp o) -> LogicalResult {
        const Tensor &x = in(o.getInput());
        FailureOr<int64_t> axis = axisOf(o.getAxisAttr().getInt(), x.shape.size() + 1);
        if (failed(axis))
          return failure();
        Tensor t = x;
        t.shape.insert(t.shape.begin() + *axis, 1);
        return done(t);
      })
      .Case([&](td::SliceOp o) -> LogicalResult {
        const Tensor &x = in(o.getInput());
        FailureOr<int64_t> axis = axisOf(o.getAxisAttr().getInt(), x.shape.size());
        if (failed(axis))
          return failure();
        const int64_t start = o.getStartAttr().getInt(), size = o.getSizeAttr().getInt();
        const int64_t len = x.shape[*axis];
        if (start < 0 || size < 0 || start + size > len)
          return o.emitError() << "slice [" << start << ", " << start + size << ") is outside dim "
                               << *axis << " of " << shapeStr(x.shape);
        const int64_t outer = product(x.shape, 0, *axis);
        const int64_t inner = product(x.shape, *axis + 1, x.shape.size());
        Tensor t;
        t.shape = x.shape;
        t.shape[*axis] = size;
        for (int64_t a = 0; a < outer; ++a)
          for (int64_t s = 0; s < size; ++s)
            for (int64_t i = 0; i < inner; ++i)
              t.data.push_back(x.data[(a * len + start + s) * inner + i]);
        return done(t);
      })
      .Case([&](td::ConcatOp o) -> LogicalResult {
        if (o.getInputs().empty())
          return o.emitError() << "concatenates nothing";
        const Tensor &first = in(o.getInputs()[0]);
        FailureOr<int64_t> axis = axisOf(o.getAxisAttr().getInt(), first.shape.size());
        if (failed(axis))
          return failure();
        Tensor t;
        t.shape = first.shape;
        t.shape[*axis] = 0;
        for (Value v : o.getInputs()) {
          std::vector<int64_t> s = in(v).shape, f = first.shape;
          if (s.size() != f.size())
            return o.emitError() << "operands of different ranks";
          s[*axis] = f[*axis] = 0;
          if (s != f)
            return o.emitError() << "operand " << shapeStr(in(v).shape) << " differs from "
                                 << shapeStr(first.shape) << " outside axis " << *axis;
          t.shape[*axis] += in(v).shape[*axis];
        }
        const int64_t outer = product(first.shape, 0, *axis);
        for (int64_t a = 0; a < outer; ++a)
          for (Value v : o.getInputs()) {
            const Tensor &x = in(v);
            const int64_t block = product(x.shape, *axis, x.shape.size());
            t.data.insert(t.data.end(), x.data.begin() + a * block,
                          x.data.begin() + (a + 1) * block);
          }
        return done(t);
      })
      .Case<td::ReduceMeanOp, td::ReduceSumOp>([&](auto o) -> LogicalResult {
        const Tensor &x = in(o.getInput());
        FailureOr<int64_t> axis = axisOf(o.getAxisAttr().getInt(), x.shape.size());
        if (failed(axis))
          return failure();
        const bool mean = isa<td::ReduceMeanOp>(o.getOperation());
        const int64_t len = x.shape[*axis];
        const int64_t outer = product(x.shape, 0, *axis);
        const int64_t inner = product(x.shape, *axis + 1, x.shape.size());
        Tensor t;
        t.shape = x.shape;
        if (o.getKeepdim())
          t.shape[*axis] = 1;
        else
          t.shape.erase(t.shape.begin() + *axis);
        for (int64_t a = 0; a < outer; ++a)
          for (int64_t i = 0; i < inner; ++i) {
            double acc = 0;
            for (int64_t l = 0; l < len; ++l)
              acc += x.data[(a * len + l) * inner + i];
            t.data.push_back(mean ? acc / len : acc);
          }
        return done(t);
      })
      .Case([&](td::SqrtOp o) { return elementwise(o, [](Args x) { return std::sqrt(x[0]); }); })
      .Case([&](td::ReluOp o) {
        return elementwise(o, [](Args x) { return ref::activate(ref::Activation::Relu, x[0]); });
      })
      .Case([&](td::SiluOp o) { return elementwise(o, [](Args x) { return ref::silu(x[0]); }); })
      .Case([&](td::TanhOp o) { return elementwise(o, [](Args x) { return std::tanh(x[0]); }); })
      .Case([&](td::GeluOp o) {
        const bool tanhApprox = o.getApproximate() == td::GeluApprox::tanh;
        return elementwise(o, [tanhApprox](Args x) { return ref::gelu(x[0], tanhApprox); });
      })
      .Case<td::SoftmaxOp, td::LogSoftmaxOp>([&](auto o) -> LogicalResult {
        const Tensor &x = in(o.getInput());
        FailureOr<int64_t> axis = axisOf(o.getAxisAttr().getInt(), x.shape.size());
        if (failed(axis))
          return failure();
        Tensor t;
        t.shape = x.shape;
        t.data.resize(x.data.size());
        ref::softmax(x.data.data(), product(x.shape, 0, *axis), x.shape[*axis],
                     product(x.shape, *axis + 1, x.shape.size()),
                     isa<td::LogSoftmaxOp>(o.getOperation()), t.data.data());
        return done(t);
      })
      // --- Fused ops -----------------------------------------------------
      .Case([&](td::LayerNormOp o) -> LogicalResult {
        const Tensor &x = in(o.getInput()), &g = in(o.getGamma());
        const Tensor *b = o.getBeta() ? &in(o.getBeta()) : nullptr; // none for rms_norm
        const int64_t d = x.shape.empty() ? 1 : x.shape.back();
        if (g.data.size() != static_cast<size_t>(d) ||
            (b && b->data.size() != static_cast<size_t>(d)))
          return o.emitError() << "gamma and beta must have the " << d << " values of a row";
        Tensor t;
        t.shape = x.shape;
        t.data.resize(x.data.size());
        ref::layerNorm(static_cast<ref::NormVariant>(o.getVariant()),
                       static_cast<int64_t>(x.data.size()) / d, d, x.data.data(), d, g.data.data(),
                       b ? b->data.data() : nullptr, o.getEps().convertToDouble(), t.data.data());
        return done(t);
      })
      .Case([&](td::FusedLinearOp o) {
        return done(linear(o, in(o.getInput()), in(o.getWeight()),
                           o.getBias() ? &in(o.getBias()) : nullptr,
                           static_cast<ref::Activation>(o.getActivation()),
                           o.getResidual() ? &in(o.getResidual()) : nullptr,
                           o.getMultiplier() ? &in(o.getMultiplier()) : nullptr));
      })
      .Case([&](td::TokenEmbeddingOp o) { return done(tokenEmbedding(o)); })
      .Case([&](td::AttentionOp o) { return done(attention(o)); })
      .Default([&](Operation *o) -> LogicalResult {
        return o->emitError() << "tfc-ref cannot evaluate '" << o->getName()
                              << "' (only the tfc ops of @forward)";
      });
}

//===----------------------------------------------------------------------===//
// Files
//===----------------------------------------------------------------------===//

/// Reads a .npy file into a tensor (kind from its dtype).
bool readNpy(const std::string &path, Tensor &t, std::string &err) {
  ::tfc::npy::Array a;
  err = ::tfc::npy::read(path, a);
  if (!err.empty())
    return false;
  t.shape = a.shape;
  const size_t n = static_cast<size_t>(ref::numElements(a.shape));
  t.data.resize(n);
  const uint8_t *p = a.data.data();
  for (size_t i = 0; i < n; ++i) {
    if (a.descr == "<f4") {
      float f;
      std::memcpy(&f, p + 4 * i, 4);
      t.data[i] = f;
      t.kind = Kind::Float;
    } else if (a.descr == "<i8") {
      int64_t v;
      std::memcpy(&v, p + 8 * i, 8);
      t.data[i] = static_cast<double>(v);
      t.kind = Kind::Int;
    } else if (a.descr == "<i4") {
      int32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      t.data[i] = v;
      t.kind = Kind::Int;
    } else { // |b1 and <u1
      t.data[i] = p[i];
      t.kind = a.descr == "|b1" ? Kind::Bool : Kind::Int;
    }
  }
  return true;
}

/// Writes a float tensor as float32, ids and booleans as int64.
std::string writeNpy(const std::string &path, const Tensor &t) {
  if (t.kind == Kind::Float) {
    const std::vector<float> f(t.data.begin(), t.data.end());
    return ::tfc::npy::writeF32(path, f.data(), t.shape);
  }
  const std::vector<int64_t> v(t.data.begin(), t.data.end());
  return ::tfc::npy::writeI64(path, v.data(), t.shape);
}

/// The multi-index of flat element |e| of |shape|, for messages.
std::string indexStr(const std::vector<int64_t> &shape, int64_t e) {
  std::vector<int64_t> idx(shape.size());
  for (int64_t i = static_cast<int64_t>(shape.size()) - 1; i >= 0; --i) {
    idx[i] = e % shape[i];
    e /= shape[i];
  }
  return shapeStr(idx);
}

/// Compares |out| with the golden file; prints the verdict. Returns the exit code.
int compare(const Tensor &out, const std::string &goldenPath, double atol) {
  Tensor gold;
  std::string err;
  if (!readNpy(goldenPath, gold, err)) {
    llvm::errs() << "tfc-ref: " << err << "\n";
    return 2;
  }
  if (gold.shape != out.shape) {
    std::printf("FAIL: shape %s != golden %s\n", shapeStr(out.shape).c_str(),
                shapeStr(gold.shape).c_str());
    return 1;
  }
  // NaN anywhere (output or golden) makes the error NaN, which never passes.
  double maxErr = 0;
  int64_t worst = -1;
  bool finite = true;
  for (size_t i = 0; i < out.data.size(); ++i) {
    finite = finite && std::isfinite(out.data[i]);
    const double e = std::fabs(out.data[i] - gold.data[i]);
    if (worst < 0 || e > maxErr || (std::isnan(e) && !std::isnan(maxErr))) {
      maxErr = e;
      worst = static_cast<int64_t>(i);
    }
  }
  const bool ok = finite && maxErr <= atol;
  std::printf("%s: max abs error %.3e (atol %g), shape %s\n", ok ? "PASS" : "FAIL", maxErr, atol,
              shapeStr(out.shape).c_str());
  if (!ok && worst >= 0)
    std::printf("  at %s: tfc-ref %.9g, golden %.9g\n", indexStr(out.shape, worst).c_str(),
                out.data[worst], gold.data[worst]);
  return ok ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  llvm::cl::OptionCategory cat("tfc-ref options");
  llvm::cl::opt<std::string> irPath(llvm::cl::Positional, llvm::cl::Required,
                                    llvm::cl::desc("<model.mlir>"), llvm::cl::cat(cat));
  llvm::cl::opt<std::string> weightsPath(
      "weights", llvm::cl::Required, llvm::cl::value_desc("file.safetensors"),
      llvm::cl::desc("the checkpoint the IR was compiled with"), llvm::cl::cat(cat));
  llvm::cl::list<std::string> inputSpecs(
      "input", llvm::cl::value_desc("name=file.npy"),
      llvm::cl::desc("the value of the argument named `name` (its tfc.name)"), llvm::cl::cat(cat));
  llvm::cl::opt<std::string> outputPath("output", llvm::cl::value_desc("out.npy"),
                                        llvm::cl::desc("write the result (float32)"),
                                        llvm::cl::cat(cat));
  llvm::cl::opt<std::string> comparePath(
      "compare", llvm::cl::value_desc("golden.npy"),
      llvm::cl::desc("compare the result with this file; exit 1 on a mismatch"),
      llvm::cl::cat(cat));
  llvm::cl::opt<double> atol("atol", llvm::cl::init(1e-4),
                             llvm::cl::desc("largest absolute error --compare accepts"),
                             llvm::cl::cat(cat));
  llvm::cl::HideUnrelatedOptions(cat);
  llvm::cl::ParseCommandLineOptions(
      argc, argv,
      "tfc-ref: evaluates @forward of printed tfc IR in double precision (the tests' oracle)\n");

  std::map<std::string, Tensor> inputs;
  for (const std::string &spec : inputSpecs) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0) {
      llvm::errs() << "tfc-ref: --input takes name=file.npy, got '" << spec << "'\n";
      return 2;
    }
    std::string err;
    if (!readNpy(spec.substr(eq + 1), inputs[spec.substr(0, eq)], err)) {
      llvm::errs() << "tfc-ref: " << err << "\n";
      return 2;
    }
  }

  ::tfc::WeightStore weights;
  std::string err;
  if (!weights.openCheckpoint(weightsPath, err)) {
    llvm::errs() << "tfc-ref: " << weightsPath << ": " << err << "\n";
    return 2;
  }

  DialectRegistry registry;
  registry.insert<td::TfcDialect, func::FuncDialect>();
  MLIRContext context(registry);
  // Errors at an op print its line of the IR file (not the op once more).
  context.printOpOnDiagnostic(false);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  OwningOpRef<ModuleOp> module =
      parseSourceFile<ModuleOp>(irPath, sourceMgr, ParserConfig(&context));
  if (!module)
    return 2; // the parser has reported where
  auto forward = module->lookupSymbol<func::FuncOp>("forward");
  if (!forward) {
    llvm::errs() << "tfc-ref: " << irPath << " has no func.func @forward\n";
    return 2;
  }

  Interpreter interp(weights);
  FailureOr<Tensor> out = interp.run(forward, std::move(inputs));
  if (failed(out))
    return 2;
  if (!outputPath.empty()) {
    err = writeNpy(outputPath, *out);
    if (!err.empty()) {
      llvm::errs() << "tfc-ref: " << err << "\n";
      return 2;
    }
  }
  if (!comparePath.empty())
    return compare(*out, comparePath, atol);
  return 0;
}
