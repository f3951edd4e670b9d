//===- kernels_cpu.cc - the CPU backend's table of kernels ----------------===//
//
// runKernel: a plan instruction -> its typed call (backends/kernel_call.h),
// checked against the schema's CPU dtypes and the shape rules, -> the
// kernel's run() from a table indexed by kernel id, filled from
// include/tfc/kernels.def (a row without a run() does not link).
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/kernels_cpu.h"

#include "backends/cpu/convert_cpu.h"
#include "backends/kernel_rules.h"
#include "tfc/abi.h"

namespace tfc::cpu {
namespace {

using Entry = Status (*)(const RawCall &);

/// Binds, checks and runs one kernel's typed call.
template <typename CallT> Status entry(const RawCall &r) {
  CallT c;
  TFC_RETURN_IF_ERROR(bindCall(schema::Backend::Cpu, r, c));
  std::string bad = checkShapes(c);
  if (!bad.empty())
    return Status::invalidModel(std::move(bad));
  return run(c);
}

constexpr Entry kEntries[] = {
#define TFC_KERNEL(ENUM, name, Camel, ...) &entry<tfc::Camel##Call>,
#include "tfc/kernels.def"
#undef TFC_KERNEL
};
static_assert(sizeof(kEntries) / sizeof(kEntries[0]) == TFC_KERNEL_COUNT,
              "one CPU entry per row of kernels.def");

} // namespace

Status runKernel(uint32_t kernel, const std::vector<const Tensor *> &in, Tensor &out,
                 const std::vector<int64_t> &ints, const std::vector<double> &floats) {
  // The rows are in id order (format/kernel_schema.cc checks it).
  if (kernel >= TFC_KERNEL_COUNT)
    return Status::unsupported("kernel " + std::to_string(kernel) +
                               " is not implemented on the CPU");
  return kEntries[kernel](RawCall{kernel, in, out, ints, floats});
}

const float *asF32(const Tensor &t, std::vector<float> &buf) {
  if (t.dtype != TFC_DTYPE_BF16)
    return t.as<float>();
  buf.resize(t.numel());
  bf16ToF32(t.as<uint16_t>(), buf.data(), (int64_t)buf.size());
  return buf.data();
}

float *outF32(Tensor &out, std::vector<float> &buf) {
  if (out.dtype != TFC_DTYPE_BF16)
    return out.as<float>();
  buf.resize(out.numel());
  return buf.data();
}

void finishOut(Tensor &out, const std::vector<float> &buf) {
  if (out.dtype == TFC_DTYPE_BF16)
    f32ToBf16(buf.data(), out.as<uint16_t>(), out.numel());
}

} // namespace tfc::cpu
