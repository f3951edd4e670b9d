//===- device_cuda.cc - the CUDA Device over backends/cuda -----------------===//
//
// Built into libtfrun_cuda.so, the plugin libtfrun opens on first use
// (cuda_plugin.h), only when the CUDA backend is built (TFC_HAVE_CUDA, see the
// top-level CMakeLists.txt). scripts/cuda-emu links it statically instead.
//
//===----------------------------------------------------------------------===//
#include "runtime/device.h"

#include "tfc/abi.h"

#include <algorithm>

#include "backends/cuda/kernels_cuda.h"

namespace tfrun::rt {

namespace {

// The backend's Statuses carry their codes from where each error was found
// (kernels_cuda.h): they are passed on as they are.
class CudaDevice : public Device {
public:
  CudaDevice(int ordinal, uint32_t computeDtype, tfc::cuda::ContextPtr ctx)
      : ordinal(ordinal), compute(computeDtype), ctx(std::move(ctx)) {}
  ~CudaDevice() override {
    release(weights);
    for (void *p : converted)
      release(p);
  }
  std::string describe() const override {
    std::string name;
    const Status s = tfc::cuda::deviceName(ordinal, name);
    return "cuda:" + std::to_string(ordinal) + " (" + (s.isOk() ? name : s.message()) + ")";
  }
  bool hostMemory() const override { return false; }
  uint32_t computeDtype() const override { return compute; }
  tfc::schema::Backend schemaBackend() const override { return tfc::schema::Backend::Cuda; }

  Status bindModel(const Model &m) override {
    model = &m;
    // int8 and int4 weights run as stored (weight-only; linear_cuda.cc), with
    // the activations the model.bin names: its own precision, not --dtype's.
    if (compute != TFC_DTYPE_F32)
      for (const Function &f : m.functions)
        for (const ValueDesc &v : f.values)
          if (v.dtype == TFC_DTYPE_BF16 || v.dtype == TFC_DTYPE_I8 || v.dtype == TFC_DTYPE_I4 ||
              v.dtype == TFC_DTYPE_F16)
            return Status::invalidArgument(std::string("compute dtype ") + tfc_dtype_name(compute) +
                                           " needs an f32 model.bin; this one was compiled "
                                           "with reduced precision (tfc compile --precision)");
    // The weights section, once per session, as stored; converted copies are
    // made when a function first asks for them.
    TFC_RETURN_IF_ERROR(alloc(m.weightsSize, &weights, false));
    if (m.weightsSize) {
      TFC_RETURN_IF_ERROR(upload(weights, m.weights, m.weightsSize));
      TFC_RETURN_IF_ERROR(sync());
      m.dropWeightPages(0, m.weightsSize); // the device holds them now
    }
    return Status::ok();
  }
  Status weight(size_t fn, uint32_t value, uint32_t dtype, void **data,
                const void **packed) override {
    const ValueDesc &v = model->functions[fn].values[value];
    *packed = nullptr;
    if (dtype == v.dtype) {
      *data = static_cast<char *>(weights) + v.offset;
      return Status::ok();
    }
    uint64_t n = 1;
    for (int64_t x : v.dims)
      n *= (uint64_t)x;
    void *p = nullptr;
    TFC_RETURN_IF_ERROR(alloc(tfc_dtype_bytes(dtype, std::max<uint64_t>(n, 1)), &p, false));
    converted.push_back(p);
    TFC_RETURN_IF_ERROR(tfc::cuda::convertWeights(
        *ctx, reinterpret_cast<const float *>(model->weights + v.offset), (int64_t)n, dtype, p));
    *data = p;
    return Status::ok();
  }

  Status alloc(size_t bytes, void **out, bool zeroed) override {
    TFC_RETURN_IF_ERROR(tfc::cuda::deviceAlloc(*ctx, bytes ? bytes : 64, out));
    return zeroed ? tfc::cuda::fillZero(*ctx, *out, bytes) : Status::ok();
  }
  void release(void *p) override {
    if (p)
      (void)tfc::cuda::deviceFree(*ctx, p);
  }
  Status upload(void *dst, const void *src, size_t n) override {
    return tfc::cuda::copyToDevice(*ctx, dst, src, n);
  }
  Status download(void *dst, const void *src, size_t n) override {
    TFC_RETURN_IF_ERROR(tfc::cuda::copyToHost(*ctx, dst, src, n));
    return sync();
  }
  Status copy(void *dst, const void *src, size_t n) override {
    return tfc::cuda::copyOnDevice(*ctx, dst, src, n);
  }
  Status run(const Instr &in, const std::vector<const tfc::Tensor *> &args,
             tfc::Tensor &out) override {
    return tfc::cuda::runKernel(*ctx, in.kernel, args, out, in.ints, in.floats);
  }
  Status sync() override {
    // The kernels report bad data (a token id out of range) at the next sync,
    // in the CPU backend's words, as InvalidArgument: the caller's input. A
    // CUDA error is ours: Internal.
    return tfc::cuda::synchronize(*ctx);
  }

private:
  int ordinal;
  uint32_t compute;
  tfc::cuda::ContextPtr ctx;
  const Model *model = nullptr;
  void *weights = nullptr;       ///< the weights section, as stored
  std::vector<void *> converted; ///< weights converted to the compute dtype
};

} // namespace

int cudaDeviceCount(std::string *why) {
  int n = 0;
  const Status s = tfc::cuda::deviceCount(n);
  if (why)
    *why = s.isOk() && n == 0 ? "no CUDA device" : s.message();
  return s.isOk() ? n : 0;
}

Status createCudaDevice(int ordinal, uint32_t computeDtype, std::unique_ptr<Device> &out) {
  std::string why;
  int n = cudaDeviceCount(&why);
  if (n == 0)
    return Status::unsupported("no CUDA device: " + why);
  if (ordinal < 0 || ordinal >= n)
    return Status::unsupported("no CUDA device " + std::to_string(ordinal) + " (this machine has " +
                               std::to_string(n) + ")");
  tfc::cuda::ContextPtr ctx;
  TFC_RETURN_IF_ERROR(tfc::cuda::createContext(ordinal, ctx));
  out = std::make_unique<CudaDevice>(ordinal, computeDtype, std::move(ctx));
  return Status::ok();
}

} // namespace tfrun::rt
