//===- pointwise_cpu.cc - broadcasting elementwise kernels on the CPU -----===//
//
// add, sub, mul, div, and, not, compare, cast, masked_fill and select, with
// numpy broadcasting through per-input strides (broadcast_cpu.h). The float
// unary kernels of tfc/unary.def are elementwise_cpu.cc's.
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/broadcast_cpu.h"
#include "backends/cpu/kernels_cpu.h"

namespace tfc::cpu {
namespace {

enum class Arith { Add, Sub, Mul, Div };

template <Arith op, typename T> T apply(T x, T y) {
  if constexpr (op == Arith::Add)
    return x + y;
  else if constexpr (op == Arith::Sub)
    return x - y;
  else if constexpr (op == Arith::Mul)
    return x * y;
  else
    return x / y;
}

/// lhs (op) rhs: in f32 when the left operand is f32 (then the right one and
/// the output must be f32 too: the loop reads and writes floats), else
/// through double for the integer and bool dtypes.
template <Arith op, typename CallT> Status arithmetic(const CallT &c) {
  Tensor &out = *c.out;
  const Tensor *pair[2] = {c.lhs, c.rhs};
  if (c.lhs->dtype != TFC_DTYPE_F32) {
    forEachBroadcast<2>(out, pair, [&](int64_t e, const int64_t *off) {
      storeFromDouble(out, e, apply<op>(loadAsDouble(*c.lhs, off[0]), loadAsDouble(*c.rhs, off[1])));
    });
    return Status();
  }
  if (c.rhs->dtype != TFC_DTYPE_F32 || out.dtype != TFC_DTYPE_F32)
    return Status::invalidModel(std::string(c.kName) + ": an f32 operation reads " +
                                tfc_dtype_name(c.rhs->dtype) + " and writes " +
                                tfc_dtype_name(out.dtype));
  const float *a = c.lhs->template as<float>(), *b = c.rhs->template as<float>();
  float *o = out.as<float>();
  forEachBroadcast<2>(out, pair, [&](int64_t e, const int64_t *f) {
    o[e] = apply<op>(a[f[0]], b[f[1]]);
  });
  return Status();
}

} // namespace

Status run(const AddCall &c) { return arithmetic<Arith::Add>(c); }
Status run(const SubCall &c) { return arithmetic<Arith::Sub>(c); }
Status run(const MulCall &c) { return arithmetic<Arith::Mul>(c); }
Status run(const DivCall &c) { return arithmetic<Arith::Div>(c); }

Status run(const AndCall &c) {
  const Tensor *pair[2] = {c.lhs, c.rhs};
  const uint8_t *a = c.lhs->as<uint8_t>(), *b = c.rhs->as<uint8_t>();
  uint8_t *o = c.out->as<uint8_t>();
  forEachBroadcast<2>(*c.out, pair,
                      [&](int64_t e, const int64_t *off) { o[e] = a[off[0]] && b[off[1]]; });
  return Status();
}

Status run(const NotCall &c) {
  const uint8_t *a = c.input->as<uint8_t>();
  uint8_t *o = c.out->as<uint8_t>();
  for (int64_t i = 0, n = c.out->numel(); i < n; ++i)
    o[i] = !a[i];
  return Status();
}

Status run(const CompareCall &c) {
  const Tensor *pair[2] = {c.lhs, c.rhs};
  const tfc_cmp_t pred = c.attrs.predicate;
  uint8_t *o = c.out->as<uint8_t>();
  forEachBroadcast<2>(*c.out, pair, [&](int64_t e, const int64_t *off) {
    const double x = loadAsDouble(*c.lhs, off[0]), y = loadAsDouble(*c.rhs, off[1]);
    switch (pred) {
    case TFC_CMP_EQ:
      o[e] = x == y;
      break;
    case TFC_CMP_NE:
      o[e] = x != y;
      break;
    case TFC_CMP_LT:
      o[e] = x < y;
      break;
    case TFC_CMP_LE:
      o[e] = x <= y;
      break;
    case TFC_CMP_GT:
      o[e] = x > y;
      break;
    default:
      o[e] = x >= y;
      break;
    }
  });
  return Status();
}

Status run(const CastCall &c) {
  for (int64_t i = 0, n = c.out->numel(); i < n; ++i)
    storeFromDouble(*c.out, i, loadAsDouble(*c.input, i));
  return Status();
}

Status run(const MaskedFillCall &c) {
  const Tensor *pair[2] = {c.input, c.mask};
  const float *x = c.input->as<float>();
  const uint8_t *m = c.mask->as<uint8_t>();
  const float v = (float)c.attrs.value;
  float *o = c.out->as<float>();
  forEachBroadcast<2>(*c.out, pair,
                      [&](int64_t e, const int64_t *f) { o[e] = m[f[1]] ? v : x[f[0]]; });
  return Status();
}

Status run(const SelectCall &c) {
  const Tensor *tri[3] = {c.condition, c.on_true, c.on_false};
  const uint8_t *cond = c.condition->as<uint8_t>();
  forEachBroadcast<3>(*c.out, tri, [&](int64_t e, const int64_t *f) {
    storeFromDouble(*c.out, e,
                    cond[f[0]] ? loadAsDouble(*c.on_true, f[1]) : loadAsDouble(*c.on_false, f[2]));
  });
  return Status();
}

} // namespace tfc::cpu
