//===- device_cuda.cc - the CUDA Device over backends/cuda -----------------===//
//
// Compiled into libtfrun always; the body needs TFC_HAVE_CUDA (set when the
// CUDA backend is built, see the top-level CMakeLists.txt). Without it, every
// entry point reports that this libtfrun was built without CUDA.
//
//===----------------------------------------------------------------------===//
#include "runtime/device.h"

#include "tfc/abi.h"

#if TFC_HAVE_CUDA
#include "backends/cuda/kernels_cuda.h"
#endif

namespace tfrun {

#if TFC_HAVE_CUDA
namespace {

constexpr int kUnsupported = 3; // TFRUN_UNSUPPORTED
constexpr int kInternal = 6;    // TFRUN_INTERNAL

Error fail(const std::string &msg, int code = kInternal) {
  return msg.empty() ? Error{} : Error{code, msg};
}

class CudaDevice : public Device {
public:
  CudaDevice(int ordinal, tfc::cuda::ContextPtr ctx) : ordinal(ordinal), ctx(std::move(ctx)) {}
  std::string describe() const override {
    return "cuda:" + std::to_string(ordinal) + " (" + tfc::cuda::deviceName(ordinal) + ")";
  }
  Error alloc(size_t bytes, void **out) override {
    std::string e = tfc::cuda::deviceAlloc(*ctx, bytes ? bytes : 64, out);
    return e.empty() ? Error{} : Error{5 /*TFRUN_OUT_OF_MEMORY*/, e};
  }
  void release(void *p) override { (void)tfc::cuda::deviceFree(*ctx, p); }
  Error upload(void *dst, const void *src, size_t n) override {
    return fail(tfc::cuda::copyToDevice(*ctx, dst, src, n));
  }
  Error download(void *dst, const void *src, size_t n) override {
    if (Error e = fail(tfc::cuda::copyToHost(*ctx, dst, src, n)))
      return e;
    return sync();
  }
  Error copy(void *dst, const void *src, size_t n) override {
    return fail(tfc::cuda::copyOnDevice(*ctx, dst, src, n));
  }
  Error zero(void *dst, size_t n) override { return fail(tfc::cuda::fillZero(*ctx, dst, n)); }
  Error convertUpload(void *dst, const float *src, int64_t count, uint32_t dtype) override {
    return fail(tfc::cuda::convertWeights(*ctx, src, count, dtype, dst));
  }
  std::string run(uint32_t kernel, const std::vector<const tfc::cpu::Tensor *> &in,
                  tfc::cpu::Tensor &out, const std::vector<int64_t> &ints,
                  const std::vector<double> &floats) override {
    // The two Tensor types have the same fields; the CUDA one holds device pointers.
    ins.resize(in.size());
    ptrs.resize(in.size());
    for (size_t i = 0; i < in.size(); ++i) {
      ins[i].data = in[i]->data;
      ins[i].dtype = in[i]->dtype;
      ins[i].shape = in[i]->shape;
      ptrs[i] = &ins[i];
    }
    tfc::cuda::Tensor o;
    o.data = out.data;
    o.dtype = out.dtype;
    o.shape = out.shape;
    return tfc::cuda::runKernel(*ctx, kernel, ptrs, o, ints, floats);
  }
  Error sync() override { return fail(tfc::cuda::synchronize(*ctx), 1 /*INVALID_ARGUMENT*/); }

private:
  int ordinal;
  tfc::cuda::ContextPtr ctx;
  std::vector<tfc::cuda::Tensor> ins;
  std::vector<const tfc::cuda::Tensor *> ptrs;
};

} // namespace

int cudaDeviceCount(std::string *why) {
  int n = 0;
  std::string e = tfc::cuda::deviceCount(n);
  if (why)
    *why = e.empty() && n == 0 ? "no CUDA device" : e;
  return e.empty() ? n : 0;
}

Error createCudaDevice(int ordinal, std::unique_ptr<Device> &out) {
  std::string why;
  int n = cudaDeviceCount(&why);
  if (n == 0)
    return {kUnsupported, "no CUDA device: " + why};
  if (ordinal < 0 || ordinal >= n)
    return {kUnsupported, "no CUDA device " + std::to_string(ordinal) + " (this machine has " +
                              std::to_string(n) + ")"};
  tfc::cuda::ContextPtr ctx;
  std::string e = tfc::cuda::createContext(ordinal, ctx);
  if (!e.empty())
    return {kInternal, e};
  out = std::make_unique<CudaDevice>(ordinal, std::move(ctx));
  return {};
}

#else // !TFC_HAVE_CUDA

int cudaDeviceCount(std::string *why) {
  if (why)
    *why = "this libtfrun was built without CUDA";
  return 0;
}

Error createCudaDevice(int, std::unique_ptr<Device> &) {
  return {3 /*TFRUN_UNSUPPORTED*/,
          "this libtfrun was built without CUDA (configure with the CUDA toolkit at "
          "/usr/local/cuda, or -DTFC_CUDA=ON)"};
}

#endif

} // namespace tfrun
