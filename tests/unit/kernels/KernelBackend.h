//===- KernelBackend.h - one kernel test, run on every backend --*- C++ -*-===//
//
// What lets tests/unit/kernels/KernelTest.cpp be written once for all
// backends: host tensors of any dtype (with the f16/bf16 encodings), and a
// Backend that runs one plan instruction on them. The CPU backend calls
// tfc::cpu::runKernel on the host buffers; the CUDA backend copies every
// operand to the device, calls tfc::cuda::runKernel, synchronizes and copies
// every operand back (cached attention writes its inputs). Both surround each
// buffer with guard bytes and report a kernel that wrote outside its tensors.
//
// The only #ifdef for CUDA in the tests is here.
//
//===----------------------------------------------------------------------===//
#ifndef TFC_TESTS_UNIT_KERNELS_KERNELBACKEND_H
#define TFC_TESTS_UNIT_KERNELS_KERNELBACKEND_H

#include "backends/cpu/kernels_cpu.h"
#include "tfc/abi.h"
#ifdef TFC_HAVE_CUDA
#include "backends/cuda/kernels_cuda.h"
#endif

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace tfc::test {

// --- f16 and bf16 on the host (round to nearest even, as the devices do) ---

inline uint16_t f32ToF16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u)
    return static_cast<uint16_t>(sign | 0x7e00u); // NaN
  if (ax >= 0x477ff000u)                          // >= 65520 rounds to inf
    return static_cast<uint16_t>(sign | 0x7c00u);
  if (ax < 0x38800000u) { // below 2^-14: a subnormal half, in units of 2^-24
    float v;
    std::memcpy(&v, &ax, 4);
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(v * 16777216.0f)));
  }
  uint32_t h = (((ax >> 23) - 112u) << 10) | ((ax & 0x7fffffu) >> 13);
  const uint32_t rest = ax & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
    ++h; // a carry into the exponent is still the right value
  return static_cast<uint16_t>(sign | h);
}

inline float f16ToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {
    const float v = std::ldexp(static_cast<float>(m), -24);
    return sign ? -v : v;
  }
  const uint32_t bits = e == 31 ? sign | 0x7f800000u | (m << 13) : sign | ((e + 112u) << 23) | (m << 13);
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t f32ToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float bf16ToF32(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// |v| as stored in |dtype| and read back (floats rounded, ints truncated).
inline double roundTo(uint32_t dtype, double v) {
  switch (dtype) {
  case TFC_DTYPE_F32:
    return static_cast<float>(v);
  case TFC_DTYPE_F16:
    return f16ToF32(f32ToF16(static_cast<float>(v)));
  case TFC_DTYPE_BF16:
    return bf16ToF32(f32ToBf16(static_cast<float>(v)));
  case TFC_DTYPE_I64:
    return static_cast<double>(static_cast<int64_t>(v));
  case TFC_DTYPE_I32:
    return static_cast<int32_t>(v);
  case TFC_DTYPE_BOOL:
    return v != 0;
  default:
    return v;
  }
}

/// A contiguous row-major tensor in host memory.
struct HostTensor {
  uint32_t dtype = TFC_DTYPE_F32;
  std::vector<int64_t> shape;
  std::vector<unsigned char> bytes;
  /// An i8 or i4 weight's descriptor: its f32 scales (Tensor::scales), one per
  /// row (group 0) or per group of |group| elements of a row.
  HostTensor *scales = nullptr;
  int64_t group = 0;

  HostTensor() = default;
  HostTensor(uint32_t dt, std::vector<int64_t> sh) : dtype(dt), shape(std::move(sh)) {
    bytes.assign(tfc_dtype_bytes(dtype, static_cast<uint64_t>(numel())), 0);
  }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
  void *data() { return bytes.data(); }

  /// Element i as a double.
  double get(int64_t i) const {
    if (dtype == TFC_DTYPE_I4) { // two's complement nibbles, element i's in byte i / 2
      const unsigned b = bytes[static_cast<size_t>(i / 2)];
      return static_cast<int>(((i & 1) ? b >> 4 : b & 15u) ^ 8u) - 8;
    }
    const unsigned char *p = bytes.data() + tfc_dtype_bytes(dtype, i);
    switch (dtype) {
    case TFC_DTYPE_F32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case TFC_DTYPE_F16:
    case TFC_DTYPE_BF16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return dtype == TFC_DTYPE_F16 ? f16ToF32(h) : bf16ToF32(h);
    }
    case TFC_DTYPE_I64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<double>(v);
    }
    case TFC_DTYPE_I32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case TFC_DTYPE_BOOL:
      return *p;
    case TFC_DTYPE_I8:
      return static_cast<signed char>(*p);
    default:
      return 0;
    }
  }

  /// Stores |v| in element i, rounded (or truncated) to the dtype.
  void set(int64_t i, double v) {
    if (dtype == TFC_DTYPE_I4) {
      const unsigned nib = static_cast<unsigned>(static_cast<int>(v)) & 15u;
      unsigned char &b = bytes[static_cast<size_t>(i / 2)];
      b = static_cast<unsigned char>((i & 1) ? (b & 0x0f) | (nib << 4) : (b & 0xf0) | nib);
      return;
    }
    unsigned char *p = bytes.data() + tfc_dtype_bytes(dtype, i);
    switch (dtype) {
    case TFC_DTYPE_F32: {
      const float f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      break;
    }
    case TFC_DTYPE_F16:
    case TFC_DTYPE_BF16: {
      const float f = static_cast<float>(v);
      const uint16_t h = dtype == TFC_DTYPE_F16 ? f32ToF16(f) : f32ToBf16(f);
      std::memcpy(p, &h, 2);
      break;
    }
    case TFC_DTYPE_I64: {
      const int64_t x = static_cast<int64_t>(v);
      std::memcpy(p, &x, 8);
      break;
    }
    case TFC_DTYPE_I32: {
      const int32_t x = static_cast<int32_t>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case TFC_DTYPE_BOOL:
      *p = v != 0;
      break;
    case TFC_DTYPE_I8:
      *p = static_cast<unsigned char>(static_cast<signed char>(v));
      break;
    default:
      break;
    }
  }

  std::vector<double> values() const {
    std::vector<double> v(static_cast<size_t>(numel()));
    for (int64_t i = 0; i < numel(); ++i)
      v[i] = get(i);
    return v;
  }
};

/// Runs plan instructions on host tensors through one backend.
class Backend {
public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  /// "" when the backend can run here; otherwise why not (the tests skip).
  virtual std::string unavailable() = 0;
  /// Runs |kernel|; the inputs are written back too (KV caches). Returns the
  /// kernel's error message, or a message about bytes written outside a tensor.
  virtual std::string run(uint32_t kernel, const std::vector<HostTensor *> &in, HostTensor &out,
                          const std::vector<int64_t> &ints, const std::vector<double> &floats) = 0;
};

/// Bytes of 0xA5 around every buffer a kernel gets.
constexpr size_t kGuardBytes = 256;

/// |t|'s bytes between two guards.
inline std::vector<unsigned char> guarded(const HostTensor &t) {
  std::vector<unsigned char> b(t.bytes.size() + 2 * kGuardBytes, 0xA5);
  if (!t.bytes.empty())
    std::memcpy(b.data() + kGuardBytes, t.bytes.data(), t.bytes.size());
  return b;
}

/// Copies the payload of |b| back into |t|; "" or a message if a guard changed.
inline std::string unguard(const std::vector<unsigned char> &b, HostTensor &t,
                           const char *which) {
  if (!t.bytes.empty())
    std::memcpy(t.bytes.data(), b.data() + kGuardBytes, t.bytes.size());
  for (size_t i = 0; i < kGuardBytes; ++i)
    if (b[i] != 0xA5 || b[b.size() - 1 - i] != 0xA5)
      return std::string("the kernel wrote outside ") + which;
  return "";
}

class CpuBackend : public Backend {
public:
  std::string name() const override { return "cpu"; }
  std::string unavailable() override { return ""; }
  std::string run(uint32_t kernel, const std::vector<HostTensor *> &in, HostTensor &out,
                  const std::vector<int64_t> &ints, const std::vector<double> &floats) override {
    std::vector<std::vector<unsigned char>> bufs;
    for (HostTensor *t : in)
      bufs.push_back(guarded(*t));
    bufs.push_back(guarded(out));
    std::vector<cpu::Tensor> ts(in.size() + 1);
    std::vector<const cpu::Tensor *> args;
    for (size_t i = 0; i <= in.size(); ++i) {
      const HostTensor &h = i < in.size() ? *in[i] : out;
      ts[i].data = bufs[i].data() + kGuardBytes;
      ts[i].dtype = h.dtype;
      ts[i].shape = h.shape;
      if (h.scales)
        ts[i].scales = static_cast<const float *>(h.scales->data());
      ts[i].group = h.group;
      if (i < in.size())
        args.push_back(&ts[i]);
    }
    std::string err = cpu::runKernel(kernel, args, ts.back(), ints, floats).message();
    for (size_t i = 0; i <= in.size(); ++i) {
      std::string g = unguard(bufs[i], i < in.size() ? *in[i] : out,
                              i < in.size() ? "an input" : "the output");
      if (err.empty())
        err = g;
    }
    return err;
  }
};

#ifdef TFC_HAVE_CUDA
class CudaBackend : public Backend {
public:
  std::string name() const override { return "cuda"; }
  std::string unavailable() override {
    if (checked_)
      return why_;
    checked_ = true;
    int n = 0;
    std::string err = cuda::deviceCount(n).message();
    if (!err.empty())
      why_ = "no CUDA device: " + err;
    else if (n == 0)
      why_ = "no CUDA device: cudaGetDeviceCount found none";
    else if (!(err = cuda::createContext(0, ctx_).message()).empty())
      why_ = "no CUDA device: " + err;
    return why_;
  }
  std::string run(uint32_t kernel, const std::vector<HostTensor *> &in, HostTensor &out,
                  const std::vector<int64_t> &ints, const std::vector<double> &floats) override {
    cuda::Context &ctx = *ctx_;
    std::vector<HostTensor *> all(in.begin(), in.end());
    all.push_back(&out);
    std::vector<std::vector<unsigned char>> host;
    std::vector<void *> dev(all.size(), nullptr);
    std::vector<cuda::Tensor> ts(all.size());
    std::string err;
    for (size_t i = 0; i < all.size() && err.empty(); ++i) {
      host.push_back(guarded(*all[i]));
      err = cuda::deviceAlloc(ctx, host[i].size(), &dev[i]).message();
      if (err.empty())
        err = cuda::copyToDevice(ctx, dev[i], host[i].data(), host[i].size()).message();
      ts[i].data = static_cast<unsigned char *>(dev[i]) + kGuardBytes;
      ts[i].dtype = all[i]->dtype;
      ts[i].shape = all[i]->shape;
    }
    // An i8 weight's descriptor: its scales in device memory too.
    for (size_t i = 0; i < in.size() && err.empty(); ++i) {
      if (!all[i]->scales)
        continue;
      const HostTensor &sc = *all[i]->scales;
      void *p = nullptr;
      err = cuda::deviceAlloc(ctx, sc.bytes.size(), &p).message();
      if (err.empty()) {
        dev.push_back(p);
        err = cuda::copyToDevice(ctx, p, sc.bytes.data(), sc.bytes.size()).message();
      }
      ts[i].scales = static_cast<const float *>(p);
      ts[i].group = all[i]->group;
    }
    if (err.empty()) {
      std::vector<const cuda::Tensor *> args;
      for (size_t i = 0; i < in.size(); ++i)
        args.push_back(&ts[i]);
      err = cuda::runKernel(ctx, kernel, args, ts.back(), ints, floats).message();
      const std::string sync = cuda::synchronize(ctx).message();
      if (err.empty())
        err = sync;
      for (size_t i = 0; i < all.size(); ++i) {
        std::string e = cuda::copyToHost(ctx, host[i].data(), dev[i], host[i].size()).message();
        if (err.empty())
          err = e;
      }
      const std::string sync2 = cuda::synchronize(ctx).message();
      if (err.empty())
        err = sync2;
      for (size_t i = 0; i < all.size() && sync2.empty(); ++i) {
        std::string g = unguard(host[i], *all[i], i < in.size() ? "an input" : "the output");
        if (err.empty())
          err = g;
      }
    }
    for (void *p : dev)
      (void)cuda::deviceFree(ctx, p);
    return err;
  }

private:
  bool checked_ = false;
  std::string why_;
  cuda::ContextPtr ctx_;
};
#endif

/// The backends' singletons.
inline Backend &cpuBackend() {
  static CpuBackend b;
  return b;
}

#ifdef TFC_HAVE_CUDA
inline Backend &cudaBackend() {
  static CudaBackend b;
  return b;
}
#else
/// Stands in for the CUDA backend in a build without CUDA: every test skips.
class NoCudaBackend : public Backend {
public:
  std::string name() const override { return "cuda"; }
  std::string unavailable() override { return "built without CUDA"; }
  std::string run(uint32_t, const std::vector<HostTensor *> &, HostTensor &,
                  const std::vector<int64_t> &, const std::vector<double> &) override {
    return "built without CUDA";
  }
};
inline Backend &cudaBackend() {
  static NoCudaBackend b;
  return b;
}
#endif

} // namespace tfc::test

#endif // TFC_TESTS_UNIT_KERNELS_KERNELBACKEND_H
