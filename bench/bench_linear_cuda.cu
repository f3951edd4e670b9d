//===- bench_linear_cuda.cu - quantized linear layers on CUDA -----------===//
//
// tfc-bench-linear-cuda: the LINEAR kernel (tfc::cuda::runKernel, as the
// runtime calls it) on int8 and int4 weights (a scale per group of 32, the
// model.bin layout of tfc compile --precision int8 / int4) against the same
// layer on f32 and bf16 weights, which run on cuBLASLt. Shapes are
// Llama-3.2-1B's and Qwen2.5-0.5B's projections and LM heads; rows 1 (a
// decoding step, where int8 and int4 run our GEMV on the quantized bytes) and
// 128 (a prefill, where they dequantize the weight for cuBLASLt).
//
// Prints, per shape and rows, the median time of each (cudaEvents around runs
// queued back to back), the weight bytes read per microsecond (GB/s) and the
// speed-up against f32 and bf16. Without a GPU it prints one line and exits 0.
//
//   tfc-bench-linear-cuda [--runs N] [--warmup N]
//
//===----------------------------------------------------------------------===//
#include "backends/cuda/cuda_internal.h"
#include "backends/cuda/kernels_cuda.h"
#include "tfc/abi.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using tfc::Tensor;

struct DeviceBuffer {
  void *p = nullptr;
  ~DeviceBuffer() {
    if (p)
      cudaFree(p);
  }
};

/// Deterministic bytes: xorshift.
void fillBytes(std::vector<unsigned char> &v, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (unsigned char &b : v) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b = static_cast<unsigned char>(x >> 32);
  }
}

bool upload(DeviceBuffer &d, const std::vector<unsigned char> &host) {
  return cudaMalloc(&d.p, std::max<size_t>(host.size(), 256)) == cudaSuccess &&
         cudaMemcpy(d.p, host.data(), host.size(), cudaMemcpyHostToDevice) == cudaSuccess;
}

/// Bytes of |n| values of |dtype| whose float values are small and finite:
/// f32 and bf16 from random bytes' top bits, i8/i4 as they come.
std::vector<unsigned char> weightBytes(uint32_t dtype, int64_t count, uint64_t seed) {
  std::vector<unsigned char> b(tfc_dtype_bytes(dtype, static_cast<uint64_t>(count)));
  fillBytes(b, seed);
  if (dtype == TFC_DTYPE_F32) {
    for (int64_t i = 0; i < count; ++i) {
      const float f = static_cast<float>(static_cast<signed char>(b[4 * i])) / 4096.0f;
      std::memcpy(&b[4 * i], &f, 4);
    }
  } else if (dtype == TFC_DTYPE_BF16) {
    for (int64_t i = 0; i < count; ++i) {
      const float f = static_cast<float>(static_cast<signed char>(b[2 * i])) / 4096.0f;
      uint32_t u;
      std::memcpy(&u, &f, 4);
      const uint16_t h = static_cast<uint16_t>(u >> 16);
      std::memcpy(&b[2 * i], &h, 2);
    }
  }
  return b;
}

struct Case {
  const char *name;
  int64_t n, k;
};

int runAll(int runs, int warmup) {
  int devices = 0;
  std::string err = tfc::cuda::deviceCount(devices).message();
  if (!err.empty() || devices == 0) {
    std::printf("no CUDA device: %s; the CUDA benchmarks need an NVIDIA GPU\n",
                err.empty() ? "cudaGetDeviceCount found none" : err.c_str());
    return 0;
  }
  tfc::cuda::ContextPtr ctx;
  err = tfc::cuda::createContext(0, ctx).message();
  if (!err.empty()) {
    std::fprintf(stderr, "tfc-bench-linear-cuda: %s\n", err.c_str());
    return 1;
  }
  const Case cases[] = {
      {"Llama-3.2-1B q_proj", 2048, 2048},       {"Llama-3.2-1B gate_proj", 8192, 2048},
      {"Llama-3.2-1B down_proj", 2048, 8192},    {"Llama-3.2-1B lm_head", 128256, 2048},
      {"Qwen2.5-0.5B gate_proj", 4864, 896},     {"Qwen2.5-0.5B lm_head", 151936, 896},
  };
  const uint32_t dtypes[] = {TFC_DTYPE_F32, TFC_DTYPE_BF16, TFC_DTYPE_I8, TFC_DTYPE_I4};
  const char *names[] = {"f32", "bf16", "int8", "int4"};
  std::printf("| layer | rows | f32 ms | bf16 ms | int8 ms | int4 ms | int8 GB/s | int4 GB/s | "
              "f32/int8 | bf16/int8 | f32/int4 | bf16/int4 |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Case &c : cases) {
    const int64_t rowCounts[2] = {1, 128};
    double ms[2][4] = {};
    for (int d = 0; d < 4; ++d) {
      const uint32_t wt = dtypes[d];
      const bool quant = wt == TFC_DTYPE_I8 || wt == TFC_DTYPE_I4;
      // Float weights meet x in their own dtype; quantized ones f32 x (an
      // int8 or int4 model.bin's compute dtype).
      const uint32_t xt = wt == TFC_DTYPE_BF16 ? TFC_DTYPE_BF16 : TFC_DTYPE_F32;
      DeviceBuffer w, x, out, scales;
      const int64_t groups = (c.k + 31) / 32;
      std::vector<unsigned char> sc(static_cast<size_t>(c.n * groups) * 4);
      for (size_t i = 0; i < sc.size(); i += 4) {
        const float v = 1.0f / 512.0f;
        std::memcpy(&sc[i], &v, 4);
      }
      if (!upload(w, weightBytes(wt, c.n * c.k, 7 + d)) ||
          !upload(x, weightBytes(xt, 128 * c.k, 3)) || !upload(scales, sc) ||
          cudaMalloc(&out.p, static_cast<size_t>(128 * c.n) * 4) != cudaSuccess) {
        std::fprintf(stderr, "tfc-bench-linear-cuda: out of device memory\n");
        return 1;
      }
      for (int ri = 0; ri < 2; ++ri) {
        const int64_t rows = rowCounts[ri];
        Tensor tw, tx, to;
        tw.data = w.p;
        tw.dtype = wt;
        tw.shape = {c.n, c.k};
        if (quant) {
          tw.scales = static_cast<const float *>(scales.p);
          tw.group = 32;
        }
        tx.data = x.p;
        tx.dtype = xt;
        tx.shape = {rows, c.k};
        to.data = out.p;
        to.dtype = TFC_DTYPE_F32;
        to.shape = {rows, c.n};
        auto once = [&]() {
          return tfc::cuda::runKernel(*ctx, TFC_KERNEL_LINEAR, {&tx, &tw}, to, {0}, {}).message();
        };
        for (int i = 0; i < warmup; ++i)
          if (!(err = once()).empty()) {
            std::fprintf(stderr, "tfc-bench-linear-cuda: %s %s: %s\n", c.name, names[d],
                         err.c_str());
            return 1;
          }
        std::vector<cudaEvent_t> ev(static_cast<size_t>(runs) + 1);
        for (cudaEvent_t &e : ev)
          cudaEventCreate(&e);
        cudaEventRecord(ev[0], ctx->stream);
        for (int r = 0; r < runs; ++r) {
          (void)once();
          cudaEventRecord(ev[r + 1], ctx->stream);
        }
        cudaEventSynchronize(ev[runs]);
        std::vector<float> t(static_cast<size_t>(runs));
        for (int r = 0; r < runs; ++r)
          cudaEventElapsedTime(&t[r], ev[r], ev[r + 1]);
        for (cudaEvent_t e : ev)
          cudaEventDestroy(e);
        if (!(err = tfc::cuda::synchronize(*ctx).message()).empty()) {
          std::fprintf(stderr, "tfc-bench-linear-cuda: %s\n", err.c_str());
          return 1;
        }
        std::sort(t.begin(), t.end());
        ms[ri][d] = t[t.size() / 2];
      }
    }
    const double q8Bytes = static_cast<double>(c.n * c.k) * (1.0 + 4.0 / 32);
    const double q4Bytes = static_cast<double>(c.n * c.k) * (0.5 + 4.0 / 32);
    for (int ri = 0; ri < 2; ++ri) {
      const double *m = ms[ri];
      std::printf("| %s | %lld | %.4f | %.4f | %.4f | %.4f | %.0f | %.0f | %.2f | %.2f | %.2f | "
                  "%.2f |\n",
                  c.name, static_cast<long long>(rowCounts[ri]), m[0], m[1], m[2], m[3],
                  q8Bytes / (m[2] * 1e6), q4Bytes / (m[3] * 1e6), m[0] / m[2], m[1] / m[2],
                  m[0] / m[3], m[1] / m[3]);
    }
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  int runs = 50, warmup = 5;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--runs") && i + 1 < argc)
      runs = std::max(1, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--warmup") && i + 1 < argc)
      warmup = std::max(0, std::atoi(argv[++i]));
    else {
      std::fprintf(stderr, "usage: tfc-bench-linear-cuda [--runs N] [--warmup N]\n");
      return 2;
    }
  }
  return runAll(runs, warmup);
}
