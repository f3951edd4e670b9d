//===- bench_attention_cuda.cu - our fused attention vs cuBLAS and cuDNN --===//
//
// The GPU attention benchmark of issue 6 (docs/backend-cuda.md, "GPU
// benchmarks"). For each dtype, batch, sequence length and mask it times, on
// the same inputs and on one stream:
//
//   ours    tfc::cuda::runKernel(TFC_KERNEL_ATTENTION): the runtime's fused
//           kernel (backends/cuda/attention_cuda.cu), key padding or causal.
//   cuBLAS  an unfused composition written here: per head, one
//           cublasGemmStridedBatchedEx over the batch for scale * Q K^T into
//           f32 scores [B, H, S, S]; a masked softmax kernel (below) that
//           writes P in the input dtype; per head, one
//           cublasGemmStridedBatchedEx for P V into the output. Accumulation
//           is f32 (CUBLAS_COMPUTE_32F, no TF32) in every dtype.
//   cuDNN   cuDNN 9's fused flash attention (f16 and bf16 only), through the
//           backend C API (cudnnBackend* descriptors; the C++ frontend,
//           cudnn_frontend.h, is not installed here): the operation graph the
//           frontend's SDPA node lowers to for cuDNN < 9.21 (matmul, scale,
//           mask, softmax as max/sub/exp/sum/div, matmul). libcudnn.so.9 is
//           opened at run time, so a machine without cuDNN still runs the
//           rest; a graph that cuDNN cannot build is reported and skipped.
//
// Inputs are laid out as the runtime lays them out: q, k, v and the output
// [B, S, H * D] with the heads side by side (the cuBLAS and cuDNN descriptions
// use the same memory through strides; nothing is transposed). The key padding
// mask pads the tail of each batch row (pad_id 0 in the key token ids; cuDNN
// gets the same as per-batch key lengths); every query row keeps at least one
// key, so masked_fill(-1e9) (ours, the composition) and -inf (cuDNN) agree.
//
// Timing: cudaEvents around each run, the runs queued back to back on the
// Context's stream after the warm-up; the median is printed. TFLOP/s counts
// 4 * head_dim flops per unmasked (query, key) pair and head for all three
// (the composition computes the masked pairs too). Ratios are theirs / ours:
// above 1, ours is faster.
//
// Correctness, in the same run: the maximum absolute difference of our output
// (and cuDNN's) from the composition's over the whole tensor, and of all three
// from a double-precision reference on sampled rows; a difference over the
// dtype's tolerance marks the row and makes the exit status 1.
//
// Without a GPU it prints one line, "no CUDA device: ...", and exits 0.
//
//===----------------------------------------------------------------------===//
#include "backends/cuda/cuda_internal.h" // Context::stream: everything runs on it
#include "backends/cuda/kernels_cuda.h"
#include "tfc/abi.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#if defined(TFC_BENCH_HAVE_CUDNN) && TFC_BENCH_HAVE_CUDNN
#include <cudnn_graph.h>
#include <dlfcn.h>
#if CUDNN_MAJOR < 9
#undef TFC_BENCH_HAVE_CUDNN
#define TFC_BENCH_HAVE_CUDNN 0
#endif
#else
#undef TFC_BENCH_HAVE_CUDNN
#define TFC_BENCH_HAVE_CUDNN 0
#endif

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using tfc::cuda::Context;

#define BENCH_CUDA(expr, what)                                                                \
  do {                                                                                        \
    cudaError_t bench_err_ = (expr);                                                          \
    if (bench_err_ != cudaSuccess)                                                            \
      return tfc::cuda::cudaMessage(bench_err_, what);                                        \
  } while (0)

#define BENCH_CUBLAS(expr, what)                                                              \
  do {                                                                                        \
    cublasStatus_t bench_st_ = (expr);                                                        \
    if (bench_st_ != CUBLAS_STATUS_SUCCESS)                                                   \
      return std::string("cuBLAS error in ") + what + ": " + cublasGetStatusString(bench_st_); \
  } while (0)

#define BENCH_TRY(expr)                                                                       \
  do {                                                                                        \
    std::string bench_msg_ = (expr);                                                          \
    if (!bench_msg_.empty())                                                                  \
      return bench_msg_;                                                                      \
  } while (0)

enum Mask { kMaskNone = 0, kMaskPadding = 1, kMaskCausal = 2 }; // ATTENTION's mask_kind
constexpr float kMaskValue = -1e9f;                                // the tutorials' fill
constexpr int64_t kPadId = 0;

const char *maskName(int m) { return m == kMaskPadding ? "padding" : m == kMaskCausal ? "causal" : "none"; }

size_t dtypeSize(uint32_t dt) { return dt == TFC_DTYPE_F32 ? 4 : 2; }

cudaDataType cudaType(uint32_t dt) {
  return dt == TFC_DTYPE_F32 ? CUDA_R_32F : dt == TFC_DTYPE_F16 ? CUDA_R_16F : CUDA_R_16BF;
}

// --- The composition's softmax ------------------------------------------------

constexpr int kSoftmaxMaxCols = 16; // per lane: rows of up to 512 keys

__device__ __forceinline__ void storeAs(float *p, float v) { *p = v; }
__device__ __forceinline__ void storeAs(__half *p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void storeAs(__nv_bfloat16 *p, float v) { *p = __float2bfloat16_rn(v); }

/// One warp per row of the f32 scores [B, H, Sq, Sk] (already scaled): applies
/// the masks with masked_fill semantics (a masked score becomes maskValue),
/// then writes softmax(row) to probs in T. Exactly ATTENTION's semantics for
/// rows with at least one finite score.
template <typename T>
__global__ void maskedSoftmaxKernel(const float *__restrict__ scores, T *__restrict__ probs,
                                    int64_t rows, int sq, int sk, int heads,
                                    const int64_t *__restrict__ tokens, int64_t padId, int causal,
                                    float maskValue) {
  const int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (row >= rows)
    return;
  const int i = static_cast<int>(row % sq);
  const int64_t b = row / sq / heads;
  const float *s = scores + row * sk;
  T *p = probs + row * sk;
  float v[kSoftmaxMaxCols];
  float m = -INFINITY;
#pragma unroll
  for (int c = 0; c < kSoftmaxMaxCols; ++c) {
    const int j = lane + 32 * c;
    float x = -INFINITY;
    if (j < sk) {
      x = s[j];
      if ((tokens && tokens[b * sk + j] == padId) || (causal && j > i))
        x = maskValue;
    }
    v[c] = x;
    m = fmaxf(m, x);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  float sum = 0;
#pragma unroll
  for (int c = 0; c < kSoftmaxMaxCols; ++c) {
    const int j = lane + 32 * c;
    v[c] = j < sk ? expf(v[c] - m) : 0.0f;
    sum += v[c];
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    sum += __shfl_xor_sync(0xffffffffu, sum, o);
  const float inv = 1.0f / sum;
#pragma unroll
  for (int c = 0; c < kSoftmaxMaxCols; ++c) {
    const int j = lane + 32 * c;
    if (j < sk)
      storeAs(p + j, v[c] * inv);
  }
}

std::string launchMaskedSoftmax(uint32_t dtype, const float *scores, void *probs, int64_t rows,
                                int sq, int sk, int heads, const int64_t *tokens, bool causal,
                                cudaStream_t s) {
  if (sk > 32 * kSoftmaxMaxCols)
    return "the composition's softmax handles up to " + std::to_string(32 * kSoftmaxMaxCols) +
           " keys";
  constexpr int kThreads = 256;
  const unsigned grid = static_cast<unsigned>((rows * 32 + kThreads - 1) / kThreads);
  if (dtype == TFC_DTYPE_F32)
    maskedSoftmaxKernel<float><<<grid, kThreads, 0, s>>>(
        scores, static_cast<float *>(probs), rows, sq, sk, heads, tokens, kPadId, causal, kMaskValue);
  else if (dtype == TFC_DTYPE_F16)
    maskedSoftmaxKernel<__half><<<grid, kThreads, 0, s>>>(
        scores, static_cast<__half *>(probs), rows, sq, sk, heads, tokens, kPadId, causal, kMaskValue);
  else
    maskedSoftmaxKernel<__nv_bfloat16><<<grid, kThreads, 0, s>>>(
        scores, static_cast<__nv_bfloat16 *>(probs), rows, sq, sk, heads, tokens, kPadId, causal,
        kMaskValue);
  BENCH_CUDA(cudaGetLastError(), "maskedSoftmaxKernel");
  return "";
}

// --- Host helpers -------------------------------------------------------------

/// Device memory released on scope exit.
struct DevBuf {
  void *p = nullptr;
  DevBuf() = default;
  DevBuf(const DevBuf &) = delete;
  DevBuf &operator=(const DevBuf &) = delete;
  ~DevBuf() {
    if (p)
      cudaFree(p);
  }
  std::string alloc(size_t bytes, const char *what) {
    BENCH_CUDA(cudaMalloc(&p, std::max<size_t>(bytes, 16)), what);
    return "";
  }
  char *bytes() const { return static_cast<char *>(p); }
};

float decodeHalf(uint16_t h) {
  const uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  float v;
  if (exp == 0)
    v = std::ldexp(static_cast<float>(man), -24);
  else if (exp == 31)
    v = man ? NAN : INFINITY;
  else
    v = std::ldexp(static_cast<float>(man | 0x400), static_cast<int>(exp) - 25);
  return (h & 0x8000) ? -v : v;
}

float decodeBf16(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// Copies |n| elements of |dtype| from the device and widens them to f32.
std::string download(const void *src, uint32_t dtype, size_t n, std::vector<float> &out) {
  out.resize(n);
  if (dtype == TFC_DTYPE_F32) {
    BENCH_CUDA(cudaMemcpy(out.data(), src, n * 4, cudaMemcpyDeviceToHost), "cudaMemcpy");
    return "";
  }
  std::vector<uint16_t> raw(n);
  BENCH_CUDA(cudaMemcpy(raw.data(), src, n * 2, cudaMemcpyDeviceToHost), "cudaMemcpy");
  for (size_t i = 0; i < n; ++i)
    out[i] = dtype == TFC_DTYPE_F16 ? decodeHalf(raw[i]) : decodeBf16(raw[i]);
  return "";
}

double maxAbsDiff(const std::vector<float> &a, const std::vector<float> &b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
    if (!(d <= m)) // NaN counts as infinitely wrong
      m = std::isnan(d) ? INFINITY : d;
  }
  return m;
}

/// Median time of |runs| calls of |fn| after |warmup| calls, from cudaEvents
/// recorded between consecutive calls queued back to back on |s|.
template <class Fn>
std::string timeMedian(cudaStream_t s, int warmup, int runs, Fn &&fn, double &ms) {
  for (int i = 0; i < warmup; ++i)
    BENCH_TRY(fn());
  struct Events {
    std::vector<cudaEvent_t> ev;
    ~Events() {
      for (cudaEvent_t e : ev)
        if (e)
          cudaEventDestroy(e);
    }
  } events;
  events.ev.assign(static_cast<size_t>(runs) + 1, nullptr);
  for (cudaEvent_t &e : events.ev)
    BENCH_CUDA(cudaEventCreate(&e), "cudaEventCreate");
  BENCH_CUDA(cudaEventRecord(events.ev[0], s), "cudaEventRecord");
  for (int r = 0; r < runs; ++r) {
    BENCH_TRY(fn());
    BENCH_CUDA(cudaEventRecord(events.ev[r + 1], s), "cudaEventRecord");
  }
  BENCH_CUDA(cudaEventSynchronize(events.ev[runs]), "cudaEventSynchronize");
  std::vector<float> t(static_cast<size_t>(runs));
  for (int r = 0; r < runs; ++r)
    BENCH_CUDA(cudaEventElapsedTime(&t[r], events.ev[r], events.ev[r + 1]), "cudaEventElapsedTime");
  std::sort(t.begin(), t.end());
  ms = runs % 2 ? t[runs / 2] : 0.5 * (t[runs / 2 - 1] + t[runs / 2]);
  return "";
}

/// Deterministic uniform values in [-1, 1).
void fillUniform(std::vector<float> &v, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (float &f : v) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    f = static_cast<float>((x >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
  }
}

// --- One problem: shape, inputs and the three implementations ------------------

struct Problem {
  int64_t batch = 1, seq = 128, heads = 8, headDim = 64;
  uint32_t dtype = TFC_DTYPE_F16;
  int64_t width() const { return heads * headDim; }
  int64_t elems() const { return batch * seq * width(); }
  float scale() const { return 1.0f / std::sqrt(static_cast<float>(headDim)); }
};

/// Valid keys of batch row b under the padding mask: the tail of each row is
/// padding, from none-ish up to a quarter of the sequence.
int64_t keyLength(const Problem &p, int64_t b) {
  return std::max<int64_t>(1, p.seq - (b + 1) * p.seq / (4 * p.batch));
}

/// Unmasked (query, key) pairs summed over the batch (one head).
double unmaskedPairs(const Problem &p, int mask) {
  double pairs = 0;
  for (int64_t b = 0; b < p.batch; ++b) {
    if (mask == kMaskPadding)
      pairs += static_cast<double>(p.seq) * keyLength(p, b);
    else if (mask == kMaskCausal)
      pairs += 0.5 * static_cast<double>(p.seq) * (p.seq + 1);
    else
      pairs += static_cast<double>(p.seq) * p.seq;
  }
  return pairs;
}

struct Buffers {
  DevBuf q, k, v, tokens, outOurs, outBlas, outDnn, scores, probs, seqQ, seqKV;
  std::vector<float> hq, hk, hv; // the inputs as stored (rounded to the dtype)
  std::vector<int64_t> htokens;
};

std::string setUp(Context &ctx, const Problem &p, Buffers &b) {
  const size_t n = static_cast<size_t>(p.elems()), es = dtypeSize(p.dtype);
  const size_t scoreElems = static_cast<size_t>(p.batch * p.heads * p.seq * p.seq);
  BENCH_TRY(b.q.alloc(n * es, "cudaMalloc q"));
  BENCH_TRY(b.k.alloc(n * es, "cudaMalloc k"));
  BENCH_TRY(b.v.alloc(n * es, "cudaMalloc v"));
  BENCH_TRY(b.outOurs.alloc(n * es, "cudaMalloc out"));
  BENCH_TRY(b.outBlas.alloc(n * es, "cudaMalloc out"));
  BENCH_TRY(b.outDnn.alloc(n * es, "cudaMalloc out"));
  BENCH_TRY(b.scores.alloc(scoreElems * 4, "cudaMalloc scores"));
  BENCH_TRY(b.probs.alloc(scoreElems * es, "cudaMalloc probs"));
  BENCH_TRY(b.tokens.alloc(static_cast<size_t>(p.batch * p.seq) * 8, "cudaMalloc tokens"));
  BENCH_TRY(b.seqQ.alloc(static_cast<size_t>(p.batch) * 4, "cudaMalloc seq_q"));
  BENCH_TRY(b.seqKV.alloc(static_cast<size_t>(p.batch) * 4, "cudaMalloc seq_kv"));
  std::vector<float> host(n);
  DevBuf *dst[3] = {&b.q, &b.k, &b.v};
  std::vector<float> *stored[3] = {&b.hq, &b.hk, &b.hv};
  for (int t = 0; t < 3; ++t) {
    fillUniform(host, 1000 * static_cast<uint64_t>(p.batch) + 10 * p.seq + t);
    BENCH_TRY(
        tfc::cuda::convertWeights(ctx, host.data(), p.elems(), p.dtype, dst[t]->p).message());
    BENCH_TRY(download(dst[t]->p, p.dtype, n, *stored[t]));
  }
  b.htokens.assign(static_cast<size_t>(p.batch * p.seq), 0);
  std::vector<int32_t> lq(static_cast<size_t>(p.batch)), lkv(static_cast<size_t>(p.batch));
  for (int64_t r = 0; r < p.batch; ++r) {
    const int64_t len = keyLength(p, r);
    for (int64_t j = 0; j < p.seq; ++j)
      b.htokens[r * p.seq + j] = j < len ? 1 + (r * 31 + j * 7) % 97 : kPadId;
    lq[r] = static_cast<int32_t>(p.seq);
    lkv[r] = static_cast<int32_t>(len);
  }
  BENCH_CUDA(cudaMemcpy(b.tokens.p, b.htokens.data(), b.htokens.size() * 8, cudaMemcpyHostToDevice),
             "cudaMemcpy tokens");
  BENCH_CUDA(cudaMemcpy(b.seqQ.p, lq.data(), lq.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
  BENCH_CUDA(cudaMemcpy(b.seqKV.p, lkv.data(), lkv.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
  // The Context's stream does not wait for the legacy stream these copies used.
  BENCH_CUDA(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  return "";
}

/// Ours: one ATTENTION kernel, as the runtime calls it.
std::string runOurs(Context &ctx, const Problem &p, Buffers &b, int mask) {
  tfc::cuda::Tensor q, k, v, tok, out;
  const std::vector<int64_t> shape = {p.batch, p.seq, p.width()};
  q.data = b.q.p;
  k.data = b.k.p;
  v.data = b.v.p;
  out.data = b.outOurs.p;
  q.dtype = k.dtype = v.dtype = out.dtype = p.dtype;
  q.shape = k.shape = v.shape = out.shape = shape;
  tok.data = b.tokens.p;
  tok.dtype = TFC_DTYPE_I64;
  tok.shape = {p.batch, p.seq};
  std::vector<const tfc::cuda::Tensor *> in = {&q, &k, &v};
  if (mask == kMaskPadding)
    in.push_back(&tok);
  return tfc::cuda::runKernel(ctx, TFC_KERNEL_ATTENTION, in, out, {mask, p.heads, kPadId},
                              {static_cast<double>(p.scale()), static_cast<double>(kMaskValue)})
      .message();
}

/// The cuBLAS composition: scores = scale Q K^T (f32), masked softmax -> P (dtype), P V.
std::string runComposition(cublasHandle_t h, cudaStream_t s, const Problem &p, Buffers &b,
                           int mask) {
  const int sq = static_cast<int>(p.seq), sk = static_cast<int>(p.seq);
  const int d = static_cast<int>(p.headDim), ld = static_cast<int>(p.width());
  const int batch = static_cast<int>(p.batch);
  const size_t es = dtypeSize(p.dtype);
  const cudaDataType t = cudaType(p.dtype);
  const long long qkvBatch = static_cast<long long>(p.seq) * p.width();
  const long long sBatch = static_cast<long long>(p.heads) * p.seq * p.seq;
  const float alpha = p.scale(), one = 1.0f, zero = 0.0f;
  float *scores = static_cast<float *>(b.scores.p);
  for (int64_t hd = 0; hd < p.heads; ++hd) {
    // Column-major: S^T [Sk x Sq] = (K_h [D x Sk])^T Q_h [D x Sq], one head, all batches.
    BENCH_CUBLAS(cublasGemmStridedBatchedEx(
                     h, CUBLAS_OP_T, CUBLAS_OP_N, sk, sq, d, &alpha, b.k.bytes() + hd * d * es, t,
                     ld, qkvBatch, b.q.bytes() + hd * d * es, t, ld, qkvBatch, &zero,
                     scores + hd * p.seq * p.seq, CUDA_R_32F, sk, sBatch, batch,
                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmStridedBatchedEx (Q K^T)");
  }
  BENCH_TRY(launchMaskedSoftmax(p.dtype, scores, b.probs.p, p.batch * p.heads * p.seq, sq, sk,
                                static_cast<int>(p.heads),
                                mask == kMaskPadding ? static_cast<const int64_t *>(b.tokens.p)
                                                     : nullptr,
                                mask == kMaskCausal, s));
  for (int64_t hd = 0; hd < p.heads; ++hd) {
    // Column-major: O_h^T [D x Sq] = V_h^T [D x Sk] P^T [Sk x Sq].
    BENCH_CUBLAS(cublasGemmStridedBatchedEx(
                     h, CUBLAS_OP_N, CUBLAS_OP_N, d, sq, sk, &one, b.v.bytes() + hd * d * es, t, ld,
                     qkvBatch, b.probs.bytes() + hd * p.seq * p.seq * es, t, sk, sBatch, &zero,
                     b.outBlas.bytes() + hd * d * es, t, ld, qkvBatch, batch, CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT),
                 "cublasGemmStridedBatchedEx (P V)");
  }
  return "";
}

/// Max |x - ref| of the three outputs on sampled rows, against softmax(scale Q K^T, masked) V
/// in double from the stored inputs. |outs| are the downloaded outputs (empty: skipped).
void referenceCheck(const Problem &p, const Buffers &b, int mask,
                    const std::vector<const std::vector<float> *> &outs, std::vector<double> &err) {
  err.assign(outs.size(), 0.0);
  const int64_t W = p.width(), D = p.headDim, S = p.seq;
  std::vector<int64_t> bs = {0, p.batch - 1}, hs = {0, p.heads - 1}, is = {0, 1, S / 2, S - 1};
  std::vector<double> sc(static_cast<size_t>(S)), o(static_cast<size_t>(D));
  for (int64_t bb : bs)
    for (int64_t hh : hs)
      for (int64_t i : is) {
        double m = -INFINITY;
        for (int64_t j = 0; j < S; ++j) {
          double s = 0;
          for (int64_t c = 0; c < D; ++c)
            s += static_cast<double>(b.hq[(bb * S + i) * W + hh * D + c]) *
                 b.hk[(bb * S + j) * W + hh * D + c];
          s *= p.scale();
          if ((mask == kMaskPadding && b.htokens[bb * S + j] == kPadId) ||
              (mask == kMaskCausal && j > i))
            s = kMaskValue;
          sc[j] = s;
          m = std::max(m, s);
        }
        double sum = 0;
        for (int64_t j = 0; j < S; ++j)
          sum += sc[j] = std::exp(sc[j] - m);
        std::fill(o.begin(), o.end(), 0.0);
        for (int64_t j = 0; j < S; ++j)
          for (int64_t c = 0; c < D; ++c)
            o[c] += sc[j] / sum * b.hv[(bb * S + j) * W + hh * D + c];
        for (size_t x = 0; x < outs.size(); ++x) {
          if (outs[x]->empty())
            continue;
          for (int64_t c = 0; c < D; ++c) {
            const double e = std::fabs((*outs[x])[(bb * S + i) * W + hh * D + c] - o[c]);
            err[x] = std::isnan(e) ? INFINITY : std::max(err[x], e);
          }
        }
      }
}

/// Tolerance of an output against the double reference: the dtype's rounding
/// of the output and (composition) of P, with f32 accumulation.
double refTolerance(uint32_t dt) {
  return dt == TFC_DTYPE_F32 ? 5e-5 : dt == TFC_DTYPE_F16 ? 2e-3 : 1.6e-2;
}

// --- cuDNN 9 fused attention through the backend API ----------------------------

#if TFC_BENCH_HAVE_CUDNN

/// The cuDNN entry points, from libcudnn.so.9 opened at run time (the types
/// are the installed header's).
struct CudnnApi {
  void *lib = nullptr;
  decltype(&cudnnGetVersion) getVersion = nullptr;
  decltype(&cudnnGetErrorString) getErrorString = nullptr;
  decltype(&cudnnGetLastErrorString) getLastErrorString = nullptr;
  decltype(&cudnnCreate) create = nullptr;
  decltype(&cudnnDestroy) destroy = nullptr;
  decltype(&cudnnSetStream) setStream = nullptr;
  decltype(&cudnnBackendCreateDescriptor) createDescriptor = nullptr;
  decltype(&cudnnBackendDestroyDescriptor) destroyDescriptor = nullptr;
  decltype(&cudnnBackendSetAttribute) setAttribute = nullptr;
  decltype(&cudnnBackendGetAttribute) getAttribute = nullptr;
  decltype(&cudnnBackendFinalize) finalize = nullptr;
  decltype(&cudnnBackendExecute) execute = nullptr;
  cudnnHandle_t handle = nullptr;
  std::string library;
};

std::string loadCudnn(CudnnApi &api, cudaStream_t stream) {
  std::vector<std::string> names;
#ifdef TFC_BENCH_CUDNN_LIBRARY
  names.push_back(TFC_BENCH_CUDNN_LIBRARY);
#endif
  names.push_back("libcudnn.so.9");
  names.push_back("libcudnn.so");
  std::string why;
  for (const std::string &n : names) {
    api.lib = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (api.lib) {
      api.library = n;
      break;
    }
    const char *e = dlerror();
    if (why.empty() && e)
      why = e;
  }
  if (!api.lib)
    return "cannot open libcudnn.so.9 (" + why + ")";
#define BENCH_DLSYM(field, sym)                                                               \
  api.field = reinterpret_cast<decltype(api.field)>(dlsym(api.lib, #sym));                    \
  if (!api.field)                                                                             \
    return api.library + " has no " #sym;
  BENCH_DLSYM(getVersion, cudnnGetVersion)
  BENCH_DLSYM(getErrorString, cudnnGetErrorString)
  BENCH_DLSYM(getLastErrorString, cudnnGetLastErrorString)
  BENCH_DLSYM(create, cudnnCreate)
  BENCH_DLSYM(destroy, cudnnDestroy)
  BENCH_DLSYM(setStream, cudnnSetStream)
  BENCH_DLSYM(createDescriptor, cudnnBackendCreateDescriptor)
  BENCH_DLSYM(destroyDescriptor, cudnnBackendDestroyDescriptor)
  BENCH_DLSYM(setAttribute, cudnnBackendSetAttribute)
  BENCH_DLSYM(getAttribute, cudnnBackendGetAttribute)
  BENCH_DLSYM(finalize, cudnnBackendFinalize)
  BENCH_DLSYM(execute, cudnnBackendExecute)
#undef BENCH_DLSYM
  const size_t v = api.getVersion();
  if (v < 90000)
    return "cuDNN " + std::to_string(v) + " is older than 9 (" + api.library + ")";
  cudnnStatus_t st = api.create(&api.handle);
  if (st != CUDNN_STATUS_SUCCESS)
    return std::string("cudnnCreate: ") + api.getErrorString(st);
  st = api.setStream(api.handle, stream);
  if (st != CUDNN_STATUS_SUCCESS)
    return std::string("cudnnSetStream: ") + api.getErrorString(st);
  return "";
}

struct CudnnFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// One SDPA forward graph, its execution plan and variant pack. Owns every
/// descriptor it creates.
class CudnnSdpa {
public:
  explicit CudnnSdpa(const CudnnApi &api) : api_(api) {}
  CudnnSdpa(const CudnnSdpa &) = delete;
  CudnnSdpa &operator=(const CudnnSdpa &) = delete;
  ~CudnnSdpa() {
    for (auto it = owned_.rbegin(); it != owned_.rend(); ++it)
      api_.destroyDescriptor(*it);
  }

  /// Builds the graph for |p| and |mask| over the buffers of |b| writing b.outDnn.
  std::string build(const Problem &p, Buffers &b, int mask) {
    try {
      buildGraph(p, b, mask);
      return "";
    } catch (const CudnnFailure &e) {
      return e.what();
    }
  }

  std::string run() {
    cudnnStatus_t st = api_.execute(api_.handle, plan_, pack_);
    if (st != CUDNN_STATUS_SUCCESS)
      return "cudnnBackendExecute: " + message(st);
    return "";
  }

private:
  using Dims = std::array<int64_t, 4>;
  enum Uid : int64_t {
    kQ = 1, kK, kV, kO, kScale, kNegInfPad, kNegInfCausal, kSeqQ, kSeqKV, kFirstVirtual = 100
  };

  std::string message(cudnnStatus_t st) const {
    char buf[1024] = {};
    api_.getLastErrorString(buf, sizeof buf);
    std::string m = api_.getErrorString(st);
    if (buf[0])
      m += std::string(" (") + buf + ")";
    return m;
  }
  void check(cudnnStatus_t st, const char *what) const {
    if (st != CUDNN_STATUS_SUCCESS)
      throw CudnnFailure(std::string(what) + ": " + message(st));
  }
  cudnnBackendDescriptor_t make(cudnnBackendDescriptorType_t type) {
    cudnnBackendDescriptor_t d = nullptr;
    check(api_.createDescriptor(type, &d), "cudnnBackendCreateDescriptor");
    owned_.push_back(d);
    return d;
  }
  void set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
           cudnnBackendAttributeType_t type, int64_t count, const void *values, const char *what) {
    check(api_.setAttribute(d, name, type, count, values), what);
  }
  void setDesc(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
               cudnnBackendDescriptor_t value, const char *what) {
    set(d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &value, what);
  }

  cudnnBackendDescriptor_t tensor(int64_t uid, cudnnDataType_t dt, const Dims &dim,
                                  const Dims &stride, bool isVirtual, bool byValue = false) {
    cudnnBackendDescriptor_t d = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    const int64_t alignment = 16;
    set(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt, "tensor data type");
    set(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dim.data(), "tensor dimensions");
    set(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, stride.data(), "tensor strides");
    set(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, "tensor uid");
    set(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment, "tensor alignment");
    set(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &isVirtual, "tensor is_virtual");
    if (byValue)
      set(d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &byValue, "tensor by_value");
    check(api_.finalize(d), "finalize tensor");
    return d;
  }
  cudnnBackendDescriptor_t virt(cudnnDataType_t dt, const Dims &dim, const Dims &stride) {
    return tensor(nextVirtual_++, dt, dim, stride, true);
  }

  void pointwise(cudnnPointwiseMode_t mode, cudnnDataType_t prec, cudnnBackendDescriptor_t x,
                 cudnnBackendDescriptor_t bIn, cudnnBackendDescriptor_t t,
                 cudnnBackendDescriptor_t y, int64_t axis = -1) {
    cudnnBackendDescriptor_t pw = make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, "pointwise mode");
    set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec, "pointwise precision");
    if (axis >= 0)
      set(pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis, "pointwise axis");
    check(api_.finalize(pw), "finalize pointwise descriptor");
    cudnnBackendDescriptor_t op = make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    setDesc(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw, "pointwise op descriptor");
    setDesc(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x, "pointwise op x");
    if (bIn)
      setDesc(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, bIn, "pointwise op b");
    if (t)
      setDesc(op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t, "pointwise op t");
    setDesc(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y, "pointwise op y");
    check(api_.finalize(op), "finalize pointwise op");
    ops_.push_back(op);
  }

  void reduction(cudnnReduceTensorOp_t red, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    cudnnBackendDescriptor_t rd = make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    const cudnnDataType_t prec = CUDNN_DATA_FLOAT;
    set(rd, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &red,
        "reduction operator");
    set(rd, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &prec, "reduction precision");
    check(api_.finalize(rd), "finalize reduction descriptor");
    cudnnBackendDescriptor_t op = make(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    setDesc(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, rd, "reduction op descriptor");
    setDesc(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x, "reduction op x");
    setDesc(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y, "reduction op y");
    check(api_.finalize(op), "finalize reduction op");
    ops_.push_back(op);
  }

  void matmul(cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t bIn, cudnnBackendDescriptor_t c,
              cudnnBackendDescriptor_t mOverride, cudnnBackendDescriptor_t nOverride,
              cudnnBackendDescriptor_t kOverride) {
    cudnnBackendDescriptor_t md = make(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    const cudnnDataType_t prec = CUDNN_DATA_FLOAT;
    set(md, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &prec, "matmul precision");
    check(api_.finalize(md), "finalize matmul descriptor");
    cudnnBackendDescriptor_t op = make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    setDesc(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, a, "matmul a");
    setDesc(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, bIn, "matmul b");
    setDesc(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, c, "matmul c");
    setDesc(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, md, "matmul descriptor");
    if (mOverride)
      setDesc(op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC, mOverride, "matmul m override");
    if (nOverride)
      setDesc(op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC, nOverride, "matmul n override");
    if (kOverride)
      setDesc(op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC, kOverride, "matmul k override");
    check(api_.finalize(op), "finalize matmul op");
    ops_.push_back(op);
  }

  void buildGraph(const Problem &p, Buffers &b, int mask) {
    const int64_t B = p.batch, H = p.heads, S = p.seq, D = p.headDim, W = p.width();
    const cudnnDataType_t io = p.dtype == TFC_DTYPE_F16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16;
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT, i32 = CUDNN_DATA_INT32, bit = CUDNN_DATA_BOOLEAN;
    const Dims one = {1, 1, 1, 1};
    const Dims dimS = {B, H, S, S}, strS = {H * S * S, S * S, S, 1};
    const Dims dimR = {B, H, S, 1}, strR = {H * S, S, 1, 1};
    // [B, S, H * D] in memory, seen as [B, H, S, D]; K as K^T [B, H, D, S].
    cudnnBackendDescriptor_t q = tensor(kQ, io, {B, H, S, D}, {S * W, D, W, 1}, false);
    cudnnBackendDescriptor_t kT = tensor(kK, io, {B, H, D, S}, {S * W, D, 1, W}, false);
    cudnnBackendDescriptor_t v = tensor(kV, io, {B, H, S, D}, {S * W, D, W, 1}, false);
    cudnnBackendDescriptor_t o = tensor(kO, io, {B, H, S, D}, {S * W, D, W, 1}, false);
    cudnnBackendDescriptor_t seqQ = nullptr, seqKV = nullptr;
    if (mask == kMaskPadding) {
      seqQ = tensor(kSeqQ, i32, {B, 1, 1, 1}, one, false);
      seqKV = tensor(kSeqKV, i32, {B, 1, 1, 1}, one, false);
    }

    // S = Q K^T; S *= scale.
    cudnnBackendDescriptor_t s0 = virt(f32, dimS, strS);
    matmul(q, kT, s0, seqQ, seqKV, nullptr);
    cudnnBackendDescriptor_t scale = tensor(kScale, f32, one, one, false, true);
    cudnnBackendDescriptor_t last = virt(f32, dimS, strS);
    pointwise(CUDNN_POINTWISE_MUL, f32, s0, scale, nullptr, last);

    if (mask == kMaskPadding) { // keep row < seq_q[b] && col < seq_kv[b], else -inf
      cudnnBackendDescriptor_t row = virt(i32, dimS, strS), col = virt(i32, dimS, strS);
      pointwise(CUDNN_POINTWISE_GEN_INDEX, i32, last, nullptr, nullptr, row, 2);
      pointwise(CUDNN_POINTWISE_GEN_INDEX, i32, last, nullptr, nullptr, col, 3);
      cudnnBackendDescriptor_t rowOk = virt(bit, dimS, strS), colOk = virt(bit, dimS, strS);
      pointwise(CUDNN_POINTWISE_CMP_LT, bit, row, seqQ, nullptr, rowOk);
      pointwise(CUDNN_POINTWISE_CMP_LT, bit, col, seqKV, nullptr, colOk);
      cudnnBackendDescriptor_t keep = virt(bit, dimS, strS);
      pointwise(CUDNN_POINTWISE_LOGICAL_AND, bit, rowOk, colOk, nullptr, keep);
      cudnnBackendDescriptor_t negInf = tensor(kNegInfPad, f32, one, one, false, true);
      cudnnBackendDescriptor_t masked = virt(f32, dimS, strS);
      pointwise(CUDNN_POINTWISE_BINARY_SELECT, f32, last, negInf, keep, masked);
      last = masked;
    }
    if (mask == kMaskCausal) { // keep row >= col, else -inf (top-left diagonal)
      cudnnBackendDescriptor_t row = virt(i32, dimS, strS), col = virt(i32, dimS, strS);
      pointwise(CUDNN_POINTWISE_GEN_INDEX, f32, last, nullptr, nullptr, row, 2);
      pointwise(CUDNN_POINTWISE_GEN_INDEX, f32, last, nullptr, nullptr, col, 3);
      cudnnBackendDescriptor_t keep = virt(bit, dimS, strS);
      pointwise(CUDNN_POINTWISE_CMP_GE, bit, row, col, nullptr, keep);
      cudnnBackendDescriptor_t negInf = tensor(kNegInfCausal, f32, one, one, false, true);
      cudnnBackendDescriptor_t masked = virt(f32, dimS, strS);
      pointwise(CUDNN_POINTWISE_BINARY_SELECT, f32, last, negInf, keep, masked);
      last = masked;
    }

    // Softmax: max, sub, exp, sum, (log-sum-exp stats, virtual), div -> P in the io type.
    cudnnBackendDescriptor_t mx = virt(f32, dimR, strR);
    reduction(CUDNN_REDUCE_TENSOR_MAX, last, mx);
    cudnnBackendDescriptor_t sub = virt(f32, dimS, strS);
    pointwise(CUDNN_POINTWISE_SUB, f32, last, mx, nullptr, sub);
    cudnnBackendDescriptor_t ex = virt(f32, dimS, strS);
    pointwise(CUDNN_POINTWISE_EXP, f32, sub, nullptr, nullptr, ex);
    cudnnBackendDescriptor_t sum = virt(f32, dimR, strR);
    reduction(CUDNN_REDUCE_TENSOR_ADD, ex, sum);
    cudnnBackendDescriptor_t lg = virt(f32, dimR, strR), stats = virt(f32, dimR, strR);
    pointwise(CUDNN_POINTWISE_LOG, f32, sum, nullptr, nullptr, lg);
    pointwise(CUDNN_POINTWISE_ADD, f32, mx, lg, nullptr, stats);
    cudnnBackendDescriptor_t prob = virt(io, dimS, strS);
    pointwise(CUDNN_POINTWISE_DIV, f32, ex, sum, nullptr, prob);

    // O = P V.
    matmul(prob, v, o, seqQ, nullptr, seqKV);

    cudnnBackendDescriptor_t graph = make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
        static_cast<int64_t>(ops_.size()), ops_.data(), "operation graph ops");
    set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &api_.handle,
        "operation graph handle");
    check(api_.finalize(graph), "finalize operation graph");

    // Heuristics (mode A, then the fallback list); the first config whose plan finalizes.
    std::string firstFailure;
    for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
      cudnnBackendDescriptor_t heur = make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
      setDesc(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph, "heuristics graph");
      set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode, "heuristics mode");
      cudnnStatus_t st = api_.finalize(heur);
      if (st != CUDNN_STATUS_SUCCESS) {
        if (firstFailure.empty())
          firstFailure = "finalize heuristics: " + message(st);
        continue;
      }
      int64_t count = 0;
      check(api_.getAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                              &count, nullptr),
            "heuristics result count");
      count = std::min<int64_t>(count, 64);
      std::vector<cudnnBackendDescriptor_t> cfgs(static_cast<size_t>(count));
      for (auto &c : cfgs)
        c = make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
      if (count > 0)
        check(api_.getAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                count, &count, cfgs.data()),
              "heuristics results");
      for (int64_t i = 0; i < count; ++i) {
        cudnnBackendDescriptor_t plan = make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
        set(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &api_.handle,
            "plan handle");
        setDesc(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, cfgs[i], "plan engine config");
        st = api_.finalize(plan);
        if (st != CUDNN_STATUS_SUCCESS) {
          if (firstFailure.empty())
            firstFailure = "finalize execution plan: " + message(st);
          continue;
        }
        plan_ = plan;
        break;
      }
      if (plan_)
        break;
      if (firstFailure.empty())
        firstFailure = "the heuristics returned no engine config";
    }
    if (!plan_)
      throw CudnnFailure("no cuDNN engine for this graph: " + firstFailure);

    int64_t got = 0;
    check(api_.getAttribute(plan_, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                            &got, &workspaceBytes_),
          "plan workspace size");
    if (workspaceBytes_ > 0) {
      std::string e = workspace_.alloc(static_cast<size_t>(workspaceBytes_), "cudaMalloc workspace");
      if (!e.empty())
        throw CudnnFailure(e);
    }

    scaleValue_ = p.scale();
    negInf_ = -INFINITY;
    std::vector<int64_t> uids = {kQ, kK, kV, kO, kScale};
    std::vector<void *> ptrs = {b.q.p, b.k.p, b.v.p, b.outDnn.p, &scaleValue_};
    if (mask == kMaskPadding) {
      uids.insert(uids.end(), {kNegInfPad, kSeqQ, kSeqKV});
      ptrs.insert(ptrs.end(), {&negInf_, b.seqQ.p, b.seqKV.p});
    }
    if (mask == kMaskCausal) {
      uids.push_back(kNegInfCausal);
      ptrs.push_back(&negInf_);
    }
    void *ws = workspace_.p;
    pack_ = make(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    set(pack_, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64,
        static_cast<int64_t>(uids.size()), uids.data(), "variant pack uids");
    set(pack_, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
        static_cast<int64_t>(ptrs.size()), ptrs.data(), "variant pack pointers");
    set(pack_, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws,
        "variant pack workspace");
    check(api_.finalize(pack_), "finalize variant pack");
  }

  const CudnnApi &api_;
  std::vector<cudnnBackendDescriptor_t> owned_;
  std::vector<cudnnBackendDescriptor_t> ops_;
  int64_t nextVirtual_ = kFirstVirtual;
  cudnnBackendDescriptor_t plan_ = nullptr, pack_ = nullptr;
  int64_t workspaceBytes_ = 0;
  DevBuf workspace_;
  float scaleValue_ = 1, negInf_ = 0; // by-value operands, read at execution
};

#endif // TFC_BENCH_HAVE_CUDNN

// --- Command line ------------------------------------------------------------------

struct Options {
  std::vector<int64_t> batches = {1, 8, 32};
  std::vector<int64_t> seqs = {128, 512};
  std::vector<uint32_t> dtypes = {TFC_DTYPE_F16, TFC_DTYPE_BF16, TFC_DTYPE_F32};
  std::vector<int> masks = {kMaskPadding, kMaskCausal};
  int64_t heads = 8, headDim = 64;
  int runs = 50, warmup = 10, device = 0;
  bool cudnn = true;
};

const char *kUsage =
    "usage: tfc-bench-attention-cuda [--batch 1,8,32] [--seq 128,512] [--dtype f16,bf16,f32]\n"
    "                                [--mask padding,causal] [--heads 8] [--head-dim 64]\n"
    "                                [--runs 50] [--warmup 10] [--device 0] [--no-cudnn]\n"
    "Times tfc's fused CUDA attention against a cuBLAS composition and cuDNN 9's fused\n"
    "attention (f16/bf16), checks the outputs, and prints one row per case.\n"
    "--mask also takes none. Exit status: 0, or 1 on an error or an output out of tolerance;\n"
    "without a GPU it prints 'no CUDA device: ...' and exits 0.\n";

std::vector<std::string> splitList(const std::string &s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(',', start);
    if (end == std::string::npos)
      end = s.size();
    if (end > start)
      out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::string parseOptions(int argc, char **argv, Options &o, bool &help) {
  auto positive = [](const std::string &s, int64_t &v) {
    char *end = nullptr;
    long long x = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || *end || x <= 0)
      return false;
    v = x;
    return true;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      help = true;
      return "";
    }
    if (a == "--no-cudnn") {
      o.cudnn = false;
      continue;
    }
    static const char *kValued[] = {"--batch", "--seq",  "--dtype",  "--mask",  "--heads",
                                    "--head-dim", "--runs", "--warmup", "--device"};
    if (std::find(std::begin(kValued), std::end(kValued), a) == std::end(kValued))
      return "unknown option '" + a + "'";
    if (i + 1 >= argc)
      return "missing value after " + a;
    const std::string v = argv[++i];
    int64_t x = 0;
    if (a == "--batch" || a == "--seq") {
      std::vector<int64_t> &dst = a == "--batch" ? o.batches : o.seqs;
      dst.clear();
      for (const std::string &t : splitList(v)) {
        if (!positive(t, x))
          return a + " expects positive integers, got '" + v + "'";
        dst.push_back(x);
      }
    } else if (a == "--dtype") {
      o.dtypes.clear();
      for (const std::string &t : splitList(v)) {
        if (t == "f32")
          o.dtypes.push_back(TFC_DTYPE_F32);
        else if (t == "f16")
          o.dtypes.push_back(TFC_DTYPE_F16);
        else if (t == "bf16")
          o.dtypes.push_back(TFC_DTYPE_BF16);
        else
          return "--dtype expects f32, f16 or bf16, got '" + t + "'";
      }
    } else if (a == "--mask") {
      o.masks.clear();
      for (const std::string &t : splitList(v)) {
        if (t == "padding" || t == "key_padding")
          o.masks.push_back(kMaskPadding);
        else if (t == "causal")
          o.masks.push_back(kMaskCausal);
        else if (t == "none")
          o.masks.push_back(kMaskNone);
        else
          return "--mask expects padding, causal or none, got '" + t + "'";
      }
    } else if (a == "--heads" || a == "--head-dim" || a == "--runs" || a == "--warmup" ||
               a == "--device") {
      if (a == "--device" || a == "--warmup") {
        char *end = nullptr;
        long long y = std::strtoll(v.c_str(), &end, 10);
        if (v.empty() || *end || y < 0)
          return a + " expects a non-negative integer, got '" + v + "'";
        x = y;
      } else if (!positive(v, x)) {
        return a + " expects a positive integer, got '" + v + "'";
      }
      if (a == "--heads")
        o.heads = x;
      else if (a == "--head-dim")
        o.headDim = x;
      else if (a == "--runs")
        o.runs = static_cast<int>(x);
      else if (a == "--warmup")
        o.warmup = static_cast<int>(x);
      else
        o.device = static_cast<int>(x);
    }
  }
  if (o.batches.empty() || o.seqs.empty() || o.dtypes.empty() || o.masks.empty())
    return "empty list";
  for (int64_t s : o.seqs)
    if (s > 32 * kSoftmaxMaxCols)
      return "--seq: the cuBLAS composition's softmax handles up to " +
             std::to_string(32 * kSoftmaxMaxCols) + " keys";
  return "";
}

std::string fmtMs(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, ms < 1 ? "%.4f" : ms < 100 ? "%.3f" : "%.1f", ms);
  return buf;
}

std::string fmtE(double e) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1e", e);
  return buf;
}

int run(const Options &o) {
  int n = 0;
  std::string err = tfc::cuda::deviceCount(n).message();
  if (!err.empty() || n == 0) {
    std::printf("no CUDA device: %s; the CUDA benchmarks need an NVIDIA GPU\n",
                err.empty() ? "cudaGetDeviceCount found none" : err.c_str());
    return 0;
  }
  if (o.device >= n) {
    std::printf("no CUDA device %d (this machine has %d); the CUDA benchmarks need an NVIDIA GPU\n",
                o.device, n);
    return 0;
  }
  tfc::cuda::ContextPtr ctx;
  err = tfc::cuda::createContext(o.device, ctx).message();
  if (!err.empty()) {
    std::fprintf(stderr, "tfc-bench-attention-cuda: %s\n", err.c_str());
    return 1;
  }
  cudaStream_t stream = ctx->stream;

  struct Blas {
    cublasHandle_t h = nullptr;
    ~Blas() {
      if (h)
        cublasDestroy(h);
    }
  } blas;
  int blasVersion = 0;
  if (cublasCreate(&blas.h) != CUBLAS_STATUS_SUCCESS ||
      cublasSetStream(blas.h, stream) != CUBLAS_STATUS_SUCCESS ||
      cublasGetVersion(blas.h, &blasVersion) != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "tfc-bench-attention-cuda: cannot set up cuBLAS\n");
    return 1;
  }

  std::string dnnInfo;
#if TFC_BENCH_HAVE_CUDNN
  bool haveDnn = false;
  struct DnnHolder {
    CudnnApi api;
    ~DnnHolder() {
      if (api.handle)
        api.destroy(api.handle);
      // The library stays loaded: its engines may hold state until exit.
    }
  } dnn;
  if (o.cudnn) {
    std::string e = loadCudnn(dnn.api, stream);
    if (e.empty()) {
      haveDnn = true;
      dnnInfo = "cuDNN " + std::to_string(dnn.api.getVersion()) + " (backend API, " +
                dnn.api.library + ", built against " + std::to_string(CUDNN_VERSION) + ")";
    } else {
      dnnInfo = "cuDNN not used: " + e;
    }
  } else {
    dnnInfo = "cuDNN not used: --no-cudnn";
  }
#else
  dnnInfo = "cuDNN not used: this build found no cuDNN 9 header (cudnn_graph.h)";
#endif

  std::printf("tfc-bench-attention-cuda: fused attention (tfc::cuda ATTENTION) vs a cuBLAS "
              "composition vs cuDNN 9 fused attention\n");
  std::string deviceName;
  const tfc::Status nameStatus = tfc::cuda::deviceName(o.device, deviceName);
  if (!nameStatus.isOk())
    deviceName = nameStatus.message();
  std::printf("device: %s; cuBLAS %d; %s\n", deviceName.c_str(), blasVersion, dnnInfo.c_str());
  std::printf("heads %lld, head_dim %lld; q, k, v, out [B, S, heads*head_dim]; median of %d "
              "runs after %d warm-up runs (cudaEvents, runs back to back on one stream)\n",
              static_cast<long long>(o.heads), static_cast<long long>(o.headDim), o.runs,
              o.warmup);
  std::printf("cuBLAS = per-head cublasGemmStridedBatchedEx (scale*QK^T into f32) + masked "
              "softmax kernel (P in the dtype) + per-head cublasGemmStridedBatchedEx (PV), "
              "f32 accumulation\n");
  std::printf("ratio = theirs / ours (> 1: ours is faster); TFLOP/s = 4*head_dim flops per "
              "unmasked (query, key) pair and head, the same count for all three\n");
  std::printf("err = max |x - cuBLAS| over the whole output; ref = max |x - double reference| "
              "on 16 sampled rows (ours/cuBLAS/cuDNN)\n\n");
  std::printf("%-5s %-8s %3s %4s | %9s %9s %9s | %8s %8s | %6s %6s %6s | %8s %8s | %s\n", "dtype",
              "mask", "B", "S", "ours ms", "cuBLAS ms", "cuDNN ms", "cuBLAS/o", "cuDNN/o",
              "TF/s o", "cuBLAS", "cuDNN", "err ours", "err cuDNN", "ref");

  bool allOk = true;
  std::vector<std::string> dnnFailures, dnnErrors; // every skipped case; distinct reasons
  for (uint32_t dt : o.dtypes)
    for (int64_t batch : o.batches)
      for (int64_t seq : o.seqs) {
        Problem p;
        p.batch = batch;
        p.seq = seq;
        p.heads = o.heads;
        p.headDim = o.headDim;
        p.dtype = dt;
        Buffers b;
        err = setUp(*ctx, p, b);
        if (!err.empty()) {
          std::fprintf(stderr, "tfc-bench-attention-cuda: %s\n", err.c_str());
          return 1;
        }
        for (int mask : o.masks) {
          double oursMs = 0, blasMs = 0, dnnMs = NAN;
          err = timeMedian(stream, o.warmup, o.runs, [&] { return runOurs(*ctx, p, b, mask); },
                           oursMs);
          if (err.empty())
            err = tfc::cuda::synchronize(*ctx).message();
          if (err.empty())
            err = timeMedian(stream, o.warmup, o.runs,
                             [&] { return runComposition(blas.h, stream, p, b, mask); }, blasMs);
          if (err.empty())
            err = tfc::cuda::synchronize(*ctx).message();
          if (!err.empty()) {
            std::fprintf(stderr, "tfc-bench-attention-cuda: %s %s B=%lld S=%lld: %s\n",
                         tfc_dtype_name(dt), maskName(mask), static_cast<long long>(batch),
                         static_cast<long long>(seq), err.c_str());
            return 1;
          }
          bool dnnRan = false;
#if TFC_BENCH_HAVE_CUDNN
          if (haveDnn && dt != TFC_DTYPE_F32) {
            CudnnSdpa sdpa(dnn.api);
            std::string e = sdpa.build(p, b, mask);
            if (e.empty())
              e = timeMedian(stream, o.warmup, o.runs, [&] { return sdpa.run(); }, dnnMs);
            if (e.empty())
              e = tfc::cuda::synchronize(*ctx).message();
            if (e.empty()) {
              dnnRan = true;
            } else {
              dnnMs = NAN;
              const std::string line = std::string(tfc_dtype_name(dt)) + " " + maskName(mask) +
                                       " B=" + std::to_string(batch) + " S=" +
                                       std::to_string(seq) + ": " + e;
              if (std::find(dnnErrors.begin(), dnnErrors.end(), e) == dnnErrors.end()) {
                dnnErrors.push_back(e);
                std::printf("  (cuDNN SDPA skipped for %s)\n", line.c_str());
              }
              dnnFailures.push_back(line);
            }
          }
#endif
          // Correctness.
          const size_t ne = static_cast<size_t>(p.elems());
          std::vector<float> ours, ref, dnnOut;
          err = download(b.outOurs.p, dt, ne, ours);
          if (err.empty())
            err = download(b.outBlas.p, dt, ne, ref);
          if (err.empty() && dnnRan)
            err = download(b.outDnn.p, dt, ne, dnnOut);
          if (!err.empty()) {
            std::fprintf(stderr, "tfc-bench-attention-cuda: %s\n", err.c_str());
            return 1;
          }
          const double errOurs = maxAbsDiff(ours, ref);
          const double errDnn = dnnRan ? maxAbsDiff(dnnOut, ref) : NAN;
          std::vector<double> refErr;
          referenceCheck(p, b, mask, {&ours, &ref, &dnnOut}, refErr);
          const double tol = refTolerance(dt);
          bool ok = refErr[0] <= tol && refErr[1] <= tol && errOurs <= 2 * tol;
          if (dnnRan)
            ok = ok && refErr[2] <= tol && errDnn <= 2 * tol;
          allOk = allOk && ok;

          const double flops = 4.0 * p.heads * p.headDim * unmaskedPairs(p, mask);
          auto tf = [&](double ms) {
            if (std::isnan(ms))
              return std::string("-");
            char buf[16];
            std::snprintf(buf, sizeof buf, "%.1f", flops / (ms * 1e-3) / 1e12);
            return std::string(buf);
          };
          auto ratio = [&](double theirs) {
            if (std::isnan(theirs))
              return std::string("-");
            char buf[16];
            std::snprintf(buf, sizeof buf, "%.2fx", theirs / oursMs);
            return std::string(buf);
          };
          std::string refCol = fmtE(refErr[0]) + "/" + fmtE(refErr[1]) + "/" +
                               (dnnRan ? fmtE(refErr[2]) : std::string("-"));
          refCol += ok ? " ok" : " FAIL";
          std::printf("%-5s %-8s %3lld %4lld | %9s %9s %9s | %8s %8s | %6s %6s %6s | %8s %8s | %s\n",
                      tfc_dtype_name(dt), maskName(mask), static_cast<long long>(batch),
                      static_cast<long long>(seq), fmtMs(oursMs).c_str(), fmtMs(blasMs).c_str(),
                      std::isnan(dnnMs) ? "-" : fmtMs(dnnMs).c_str(), ratio(blasMs).c_str(),
                      ratio(dnnMs).c_str(), tf(oursMs).c_str(), tf(blasMs).c_str(),
                      tf(dnnMs).c_str(), fmtE(errOurs).c_str(),
                      dnnRan ? fmtE(errDnn).c_str() : "-", refCol.c_str());
          std::fflush(stdout);
        }
      }
  std::printf("\n");
  if (!dnnFailures.empty())
    std::printf("cuDNN SDPA could not run in %zu case(s); the first: %s\n", dnnFailures.size(),
                dnnFailures.front().c_str());
  if (!allOk) {
    std::printf("FAIL: an output is out of tolerance (ref: f32 %.0e, f16 %.0e, bf16 %.1e; err: "
                "twice that)\n",
                refTolerance(TFC_DTYPE_F32), refTolerance(TFC_DTYPE_F16),
                refTolerance(TFC_DTYPE_BF16));
    return 1;
  }
  std::printf("all outputs within tolerance\n");
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  Options o;
  bool help = false;
  std::string err = parseOptions(argc, argv, o, help);
  if (help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (!err.empty()) {
    std::fprintf(stderr, "tfc-bench-attention-cuda: %s\n%s", err.c_str(), kUsage);
    return 2;
  }
  return run(o);
}
