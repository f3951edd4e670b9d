//===- linear_dnnl.cc - linear layers on oneDNN matmul --------------------===//
#include "backends/cpu/linear_dnnl.h"

#include "backends/cpu/dnnl_cache.h"

#include "backends/cpu/elementwise_cpu.h"

#include "backends/cpu/convert_cpu.h"
#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/gemm_q4_avx2.h"
#include "backends/cpu/gemm_q_avx512.h"
#include "backends/cpu/gemm_s8_avx2.h"
#include "backends/cpu/weight_memory.h"
#include "tfc/abi.h"
#include "tfc/bf16.h"

#include <oneapi/dnnl/dnnl.hpp>
#include <omp.h>
#if TFC_HAVE_OPENBLAS
#include <cblas.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

namespace tfc::cpu {

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

namespace {
/// The row count the weights' layout is chosen for; oneDNN's blocked weight
/// layouts do not depend on it, and primitives for other row counts accept it.
constexpr int64_t kPackRows = 128;

dt dnnlType(uint32_t dtype) {
  switch (dtype) {
  case TFC_DTYPE_BF16:
    return dt::bf16;
  case TFC_DTYPE_I8:
    return dt::s8;
  default:
    return dt::f32;
  }
}

/// A per-thread, 64-byte-aligned buffer grown to the largest request. Each
/// call site has its own, and only its thread uses it.
class ThreadBuffer {
public:
  void *get(size_t bytes) {
    if (bytes > size) {
      p.reset(static_cast<char *>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)));
      size = p ? bytes : 0;
    }
    return p.get();
  }

private:
  std::unique_ptr<char, void (*)(void *)> p{nullptr, std::free};
  size_t size = 0;
};

/// Rows per oneDNN primitive call. A primitive is made for one row count, so
/// a GEMM of more rows runs in slices of this many (and one of the rest):
/// without them every new row count (each prompt length, each engine step's
/// rows) made primitives of its own, kept for the process's life: 0.4 MB and
/// 20 ms more per new source length on Marian at OPUS-MT's shape, without
/// bound in a server. With them a shape has at most kPrimRows row counts.
/// A slice of 128 rows is compute-bound (the weights are read once per 128
/// rows), as the weights' layout is chosen for it (kPackRows).
constexpr int64_t kPrimRows = kPackRows;
} // namespace

class PackedLinear {
public:
  int64_t n = 0, k = 0;
  uint32_t dtype = TFC_DTYPE_F32;
  /// bf16 weights on a CPU where oneDNN has no bf16 matmul: |weights| holds
  /// them widened to f32 (exactly), and the GEMM runs in f32 on bf16-rounded
  /// inputs, which is the native path's arithmetic (cpu_isa.h).
  bool bf16Emulated = false;
  /// i8: per output channel, a copy: the epilogue reads them on every call,
  /// and a pointer into model.bin's mapping would fault its pages back in
  /// after the device dropped them (with large page-cache folios, each
  /// scale's page maps megabytes of the weights around it: measured 116 MB
  /// of a 135 MB int8 model back in the process).
  std::vector<float> scales;
  /// i8: sum over k of weight[n, k], to take the activations' zero points out
  /// of the u8 x s8 sums: sum_k (q - z) w = sum_k q w - z * wsum[n].
  std::vector<int32_t> wsum;
  /// i8 without VNNI: the weights for our exact AVX2 GEMM (gemm_s8_avx2.h),
  /// instead of oneDNN's, whose s16 pair sums saturate there.
  std::unique_ptr<PackedS8> s8;
  /// i4: the weights for our AVX2 kernel (oneDNN 2.6 has no int4 matmul).
  std::unique_ptr<PackedQ4> q4;
  /// i8 with a scale per group (decoder-only LLMs, Q8_0's weights): our panel
  /// kernel against s16 activations (gemm_s8_avx2.h; oneDNN 2.6 has no
  /// group-wise scales).
  std::unique_ptr<PackedQ8> q8;
  dnnl::memory::desc wdesc;
  WeightMemory storage{nullptr, std::free}; ///< what |weights| points into
  dnnl::memory weights;
  /// f32 GEMMs of at least kBlasMinRows rows run on OpenBLAS's sgemm, on the
  /// same weights (oneDNN lays them out plain, [K, N] row-major, where it
  /// has no brgemm kernel): see cpu_isa.h for when.
  bool blas = false;

  using Prim = DnnlPrim;
  /// The primitive for |rows| (at most kPrimRows) rows of these weights.
  const Prim &get(int64_t rows, dt srcT, dt dstT, bool bias, int act, bool res) const {
    return primCache().get(rows, wdesc, srcT, dstT, bias, act, res);
  }
};

std::shared_ptr<PackedLinear> packLinear(const void *w, uint32_t dtype, int64_t n, int64_t k,
                                         const float *scales, int64_t group, std::string &err,
                                         const std::function<void(uint64_t, uint64_t)> &done) {
  if (dtype != TFC_DTYPE_F32 && dtype != TFC_DTYPE_BF16 && dtype != TFC_DTYPE_I8 &&
      dtype != TFC_DTYPE_I4) {
    err = std::string("a linear weight of dtype ") + tfc_dtype_name(dtype) +
          " is not supported on the CPU";
    return nullptr;
  }
  if ((dtype == TFC_DTYPE_I8 || dtype == TFC_DTYPE_I4) && !scales) {
    err = std::string("an ") + (dtype == TFC_DTYPE_I8 ? "int8" : "int4") +
          " linear weight has no scales";
    return nullptr;
  }
  if ((dtype == TFC_DTYPE_I4 || (dtype == TFC_DTYPE_I8 && group != 0)) &&
      (group <= 0 || group % 32 != 0)) {
    err = std::string("an ") + (dtype == TFC_DTYPE_I8 ? "int8" : "int4") +
          " linear weight's group of " + std::to_string(group) + " is not a multiple of 32";
    return nullptr;
  }
  const CpuPaths &paths = cpuPaths();
  if (!paths.supported) {
    err = paths.error;
    return nullptr;
  }
  try {
    auto p = std::make_shared<PackedLinear>();
    p->n = n;
    p->k = k;
    p->dtype = dtype;
    if (dtype == TFC_DTYPE_I8 && group != 0) {
      p->q8 = packQ8(static_cast<const int8_t *>(w), scales, n, k, group, done);
      if (!p->q8) {
        err = "out of memory packing an int8 linear weight";
        return nullptr;
      }
      return p;
    }
    if (dtype == TFC_DTYPE_I8)
      p->scales.assign(scales, scales + n);
    if (dtype == TFC_DTYPE_I4) {
      p->q4 = packQ4(static_cast<const uint8_t *>(w), scales, n, k, group);
      if (!p->q4) {
        err = "out of memory packing an int4 linear weight";
        return nullptr;
      }
      return p;
    }
    std::vector<float> widened;
    if (dtype == TFC_DTYPE_BF16 && !paths.bf16Native) {
      p->bf16Emulated = true;
      widened.resize((size_t)(n * k));
      bf16ToF32(static_cast<const uint16_t *>(w), widened.data(), n * k);
      w = widened.data();
    }
    if (dtype == TFC_DTYPE_I8) {
      const int8_t *wq = static_cast<const int8_t *>(w);
      if (!paths.int8Vnni) {
        p->s8 = packS8(wq, n, k, done);
        if (!p->s8) {
          err = "out of memory packing an int8 linear weight";
          return nullptr;
        }
        p->wsum.assign(p->s8->wsum.get(), p->s8->wsum.get() + n);
        return p;
      }
      p->wsum.assign(n, 0);
      for (int64_t r = 0; r < n; ++r)
        for (int64_t c = 0; c < k; ++c)
          p->wsum[r] += wq[r * k + c];
    }
    dt wt = p->bf16Emulated ? dt::f32 : dnnlType(dtype);
    // W [N, K] row-major is the matmul weights [K, N] in layout "ba".
    dnnl::memory::desc plain({k, n}, wt, tag::ba);
    dnnl::memory::desc any({k, n}, wt, tag::any);
    dt srcT = dtype == TFC_DTYPE_I8 ? dt::u8 : wt;
    dt dstT = dtype == TFC_DTYPE_I8 ? dt::s32 : dt::f32;
    dnnl::memory::desc src({kPackRows, k}, srcT, tag::ab);
    dnnl::memory::desc dst({kPackRows, n}, dstT, tag::ab);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, any, dst), cpuEngine());
    p->wdesc = pd.weights_desc();
    p->blas = paths.f32Blas && wt == dt::f32 &&
              p->wdesc == dnnl::memory::desc({k, n}, dt::f32, tag::ab);
    p->storage = allocWeightMemory(p->wdesc.get_size());
    if (!p->storage) {
      err = "out of memory packing a linear weight";
      return nullptr;
    }
    p->weights = dnnl::memory(p->wdesc, cpuEngine(), p->storage.get());
    dnnl::memory from(plain, cpuEngine(), const_cast<void *>(w));
    dnnl::stream s(cpuEngine());
    dnnl::reorder(from, p->weights).execute(s, from, p->weights);
    s.wait();
    return p;
  } catch (const dnnl::error &e) {
    err = std::string("oneDNN could not pack a linear weight: ") + e.what();
    return nullptr;
  }
}

namespace {
/// Runs a primitive with a per-call scratchpad.
std::string execute(const PackedLinear::Prim &p, std::unordered_map<int, dnnl::memory> &args) {
  dnnl::engine &eng = cpuEngine();
  const size_t scratch = p.pd.scratchpad_desc().get_size();
  if (scratch) {
    thread_local ThreadBuffer buf;
    void *mem = buf.get(scratch);
    if (!mem)
      return "out of memory for a oneDNN matmul scratchpad";
    args[DNNL_ARG_SCRATCHPAD] = dnnl::memory(p.pd.scratchpad_desc(), eng, mem);
  }
  thread_local dnnl::stream stream(eng);
  p.prim.execute(stream, args);
  stream.wait();
  return "";
}

/// The rest of output row |r| after its f32 sums |y| ([n]; the output row
/// itself when that is f32): bias, activation, residual, and the output dtype.
inline void finishRow(const GemmCall &c, int64_t n, int64_t r, float *y) {
  if (c.bias)
    for (int64_t j = 0; j < n; ++j)
      y[j] += c.bias[j];
  if (c.act == TFC_ACT_RELU)
    for (int64_t j = 0; j < n; ++j)
      y[j] = y[j] > 0.0f ? y[j] : 0.0f;
  else
    applyActivationRow(c.act, y, n);
  if (c.multiplier)
    for (int64_t j = 0; j < n; ++j)
      y[j] *= c.multiplier[r * n + j];
  if (c.residual)
    for (int64_t j = 0; j < n; ++j)
      y[j] += c.residual[r * n + j];
  if (c.yDtype == TFC_DTYPE_BF16)
    f32ToBf16(y, static_cast<uint16_t *>(c.y) + r * n, n);
}

/// The group-wise paths (int4, and int8 with a scale per group): x quantized
/// per block of 32 and the panel kernels (gemm_q4_avx2.h, gemm_s8_avx2.h) into
/// f32 sums, then the epilogue.
std::string runBlocks(const PackedLinear &w, const GemmCall &c) {
  const int64_t rows = c.rows, n = w.n, blocks = w.q4 ? w.q4->blocks : w.q8->blocks;
  thread_local ThreadBuffer ybuf;
  const bool f32Out = c.yDtype == TFC_DTYPE_F32;
  auto *y = f32Out ? static_cast<float *>(c.y)
                   : static_cast<float *>(ybuf.get(rows * n * sizeof(float)));
  if (!y)
    return "out of memory for a group-wise linear layer's buffers";
  // Every row count runs on the integer kernels: widening the weights to f32
  // for OpenBLAS (int4's first prefill path) measured 1.7x (512 rows) to 7x
  // (32 rows) slower than the panel kernel, the widening itself being most of
  // it. The inputs are quantized per block of 32: to s8 for int4 (as Q8_0's),
  // to s16 for int8 by default (docs/precision.md: 26% less KL divergence
  // from f32 than Q8_0's s8 blocks, at the same prefill speed on AVX2), to s8
  // where the file asks (faster prefill on VNNI, Q8_0's accuracy).
  thread_local ThreadBuffer qbuf, dbuf, sbuf;
  auto *d = static_cast<float *>(dbuf.get(rows * blocks * sizeof(float)));
  if (w.q4) {
    const bool tiled = gemmQ4Tiled(); // the VNNI form's row tiles
    const int64_t qrows = tiled ? tiledRows(rows) : rows;
    auto *q = static_cast<int8_t *>(qbuf.get(qrows * blocks * 32));
    auto *ds = static_cast<float *>(sbuf.get(qrows * blocks * sizeof(float)));
    d = static_cast<float *>(dbuf.get(qrows * blocks * sizeof(float)));
    if (!q || !d || !ds)
      return "out of memory for a group-wise linear layer's buffers";
    quantizeQ8Blocks(c.x, c.xDtype == TFC_DTYPE_BF16, rows, w.k, blocks, q, d, ds, tiled);
    gemmQ4(*w.q4, q, d, ds, rows, y);
  } else if (c.actBits == 8 && cpuPaths().avx512Vnni) {
    // 8-bit activation blocks (--activation-bits 8) on VNNI: vpdpbusd, 64
    // products per instruction. Elsewhere the same codes go through the s16
    // kernel below, for the same bits.
    const int64_t qrows = tiledRows(rows); // quantizeS8Blocks' row tiles
    auto *q = static_cast<int8_t *>(qbuf.get(qrows * blocks * 32));
    auto *qsum = static_cast<int32_t *>(sbuf.get(qrows * blocks * sizeof(int32_t)));
    d = static_cast<float *>(dbuf.get(qrows * blocks * sizeof(float)));
    if (!q || !d || !qsum)
      return "out of memory for a group-wise linear layer's buffers";
    quantizeS8Blocks(c.x, c.xDtype == TFC_DTYPE_BF16, rows, w.k, blocks, q, d, qsum);
    avx512::gemmQ8S8(*w.q8, q, d, qsum, rows, y);
  } else {
    const bool tiled = gemmQ8S16Tiled(); // the VNNI form's row tiles
    const int64_t qrows = tiled ? tiledRows(rows) : rows;
    auto *q = static_cast<int16_t *>(qbuf.get(qrows * blocks * 32 * sizeof(int16_t)));
    d = static_cast<float *>(dbuf.get(qrows * blocks * sizeof(float)));
    if (!q || !d)
      return "out of memory for a group-wise linear layer's buffers";
    quantizeS16Blocks(c.x, c.xDtype == TFC_DTYPE_BF16, rows, w.k, blocks, q, d,
                      c.actBits == 8 ? 127.0f : 32767.0f, tiled);
    gemmQ8S16(*w.q8, q, d, rows, y);
  }
#pragma omp parallel for schedule(static) if (rows * n > 32768)
  for (int64_t r = 0; r < rows; ++r)
    finishRow(c, n, r, y + r * n);
  return "";
}

/// The int8 path: quantize x per row (u8 with a zero point), u8 x s8 -> s32
/// (oneDNN with VNNI or AMX; our exact AVX2 GEMM without: cpu_isa.h), then one
/// epilogue pass for the zero points, scales, bias, activation and residual.
std::string runInt8(const PackedLinear &w, const GemmCall &c) {
  const int64_t rows = c.rows, k = w.k, n = w.n;
  thread_local ThreadBuffer qbuf, sbuf, zbuf, accbuf, s8buf;
  auto *q = static_cast<uint8_t *>(qbuf.get(rows * k));
  auto *sx = static_cast<float *>(sbuf.get(rows * sizeof(float)));
  auto *zx = static_cast<int32_t *>(zbuf.get(rows * sizeof(int32_t)));
  auto *acc = static_cast<int32_t *>(accbuf.get(rows * n * sizeof(int32_t)));
  auto *scratch = w.s8 ? static_cast<int8_t *>(s8buf.get(2 * rows * w.s8->kPad)) : nullptr;
  if (!q || !sx || !zx || !acc || (w.s8 && !scratch))
    return "out of memory for an int8 linear layer's buffers";
  const bool u7 = w.s8 && cpuPaths().int8Avx2U7;
  quantizeRows(c.x, c.xDtype == TFC_DTYPE_BF16, rows, k, q, sx, zx, u7 ? 127 : 255);
  if (u7) {
    gemmU7S8(*w.s8, q, rows, acc, reinterpret_cast<uint8_t *>(scratch));
  } else if (w.s8) {
    gemmU8S8(*w.s8, q, rows, acc, scratch);
  } else {
    dnnl::engine &eng = cpuEngine();
    for (int64_t r0 = 0; r0 < rows; r0 += kPrimRows) {
      const PackedLinear::Prim &p =
          w.get(std::min(kPrimRows, rows - r0), dt::u8, dt::s32, false, 0, false);
      std::unordered_map<int, dnnl::memory> args{
          {DNNL_ARG_SRC, dnnl::memory(p.pd.src_desc(), eng, q + r0 * k)},
          {DNNL_ARG_WEIGHTS, w.weights},
          {DNNL_ARG_DST, dnnl::memory(p.pd.dst_desc(), eng, acc + r0 * n)}};
      std::string err = execute(p, args);
      if (!err.empty())
        return err;
    }
  }
  const float *sw = w.scales.data();
  const int32_t *wsum = w.wsum.data();
  const bool bf16Out = c.yDtype == TFC_DTYPE_BF16;
#pragma omp parallel for schedule(static) if (rows * n > 32768)
  for (int64_t r = 0; r < rows; ++r) {
    thread_local std::vector<float> row;
    row.resize(n);
    float *y = bf16Out ? row.data() : static_cast<float *>(c.y) + r * n;
    const int32_t *a = acc + r * n;
    const float s = sx[r];
    const int32_t z = zx[r];
    // Branch-free loops, so that each vectorizes. quantizeRows keeps z in
    // [0, 255], so sum_k (q - z) w, like a itself, is within 255 * 127 * K and
    // fits in 32 bits (K < 66306); the correction is taken in uint32 (wrapping
    // is defined, and exact whenever the result fits), never as a signed
    // overflow (docs/precision.md, "Non-finite values").
    for (int64_t j = 0; j < n; ++j)
      y[j] = (float)(int32_t)((uint32_t)a[j] - (uint32_t)z * (uint32_t)wsum[j]) * (s * sw[j]);
    finishRow(c, n, r, y);
  }
  return "";
}

#if TFC_HAVE_OPENBLAS
/// Below this many rows oneDNN's GEMM wins (measured on AVX2, K 512, N 2048:
/// 1 row 45 vs 8 GFLOP/s, 4 rows 56 vs 40; 16 rows 73 vs 84, 128 rows 77 vs
/// 122): OpenBLAS packs the weights on every call.
constexpr int64_t kBlasMinRows = 16;

/// y = act(x W + b) + residual with OpenBLAS's sgemm: y is first filled with
/// the bias (plus the residual when there is no activation) and the GEMM
/// accumulates into it (beta 1), so the epilogue is at most one more pass.
std::string runBlas(const PackedLinear &w, const GemmCall &c, const float *x, float *y) {
  const int64_t rows = c.rows, n = w.n, k = w.k;
  const float *b = c.bias, *res = c.act ? nullptr : c.residual;
  const bool init = b || res;
#pragma omp parallel for schedule(static) if (rows * n > 32768)
  for (int64_t r = 0; r < rows; ++r) {
    float *yr = y + r * n;
    if (res && b)
      for (int64_t j = 0; j < n; ++j)
        yr[j] = res[r * n + j] + b[j];
    else if (res)
      for (int64_t j = 0; j < n; ++j)
        yr[j] = res[r * n + j];
    else if (b)
      for (int64_t j = 0; j < n; ++j)
        yr[j] = b[j];
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)n, (int)k, 1.0f, x,
              (int)k, static_cast<const float *>(w.weights.get_data_handle()), (int)n,
              init ? 1.0f : 0.0f, y, (int)n);
  if (c.act != TFC_ACT_NONE && c.act != TFC_ACT_RELU) {
    thread_local dnnl::stream stream(cpuEngine());
    for (int64_t r0 = 0; r0 < rows; r0 += kPrimRows) {
      const int64_t count = std::min(kPrimRows, rows - r0) * n;
      dnnl::memory m({{count}, dt::f32, tag::a}, cpuEngine(), y + r0 * n);
      primCache().eltwise(count, c.act).execute(stream, {{DNNL_ARG_SRC, m}, {DNNL_ARG_DST, m}});
    }
    stream.wait();
  }
  if (c.act) {
    const float *res2 = c.residual;
    const bool relu = c.act == TFC_ACT_RELU;
#pragma omp parallel for schedule(static) if (rows * n > 32768)
    for (int64_t r = 0; r < rows; ++r) {
      float *yr = y + r * n;
      if (relu)
        for (int64_t j = 0; j < n; ++j)
          yr[j] = yr[j] > 0.0f ? yr[j] : 0.0f;
      if (res2)
        for (int64_t j = 0; j < n; ++j)
          yr[j] += res2[r * n + j];
    }
  }
  return "";
}
#endif

/// The GEMM with its fused bias, activation and residual (post-ops on the
/// f32 sums), reading x as |srcT| and writing y as |dstT|.
std::string runGemm(const PackedLinear &w, const GemmCall &c, const void *x, dt srcT, void *y,
                    dt dstT) {
#if TFC_HAVE_OPENBLAS
  if (w.blas && c.rows >= kBlasMinRows && srcT == dt::f32 && dstT == dt::f32)
    return runBlas(w, c, static_cast<const float *>(x), static_cast<float *>(y));
#endif
  // In slices of at most kPrimRows rows (one primitive per slice size).
  dnnl::engine &eng = cpuEngine();
  const int64_t xRow = w.k * static_cast<int64_t>(dnnl::memory::data_type_size(srcT)),
                yRow = w.n * static_cast<int64_t>(dnnl::memory::data_type_size(dstT));
  for (int64_t r0 = 0; r0 < c.rows; r0 += kPrimRows) {
    const PackedLinear::Prim &p = w.get(std::min(kPrimRows, c.rows - r0), srcT, dstT,
                                        c.bias != nullptr, c.act, c.residual != nullptr);
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, dnnl::memory(p.pd.src_desc(), eng,
                                    const_cast<char *>(static_cast<const char *>(x)) + r0 * xRow)},
        {DNNL_ARG_WEIGHTS, w.weights},
        {DNNL_ARG_DST, dnnl::memory(p.pd.dst_desc(), eng, static_cast<char *>(y) + r0 * yRow)}};
    if (c.bias)
      args[DNNL_ARG_BIAS] = dnnl::memory(p.pd.bias_desc(), eng, const_cast<float *>(c.bias));
    if (c.residual)
      args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(c.act ? 1 : 0) | DNNL_ARG_SRC_1] =
          dnnl::memory(p.residual, eng, const_cast<float *>(c.residual) + r0 * w.n);
    std::string err = execute(p, args);
    if (!err.empty())
      return err;
  }
  return "";
}

/// bf16 weights without a bf16 GEMM: the input is rounded to bf16 (or is
/// bf16) and widened, the f32 GEMM runs on the widened weights, and a bf16
/// output is rounded from the f32 result, as the native path does.
std::string runBf16Emulated(const PackedLinear &w, const GemmCall &c) {
  thread_local ThreadBuffer xbuf, hbuf, ybuf;
  const int64_t nx = c.rows * w.k, ny = c.rows * w.n;
  auto *x = static_cast<float *>(xbuf.get(nx * sizeof(float)));
  const auto *xb = static_cast<const uint16_t *>(c.x);
  if (c.xDtype != TFC_DTYPE_BF16) {
    auto *h = static_cast<uint16_t *>(hbuf.get(nx * sizeof(uint16_t)));
    if (h)
      f32ToBf16(static_cast<const float *>(c.x), h, nx);
    xb = h;
  }
  float *y = c.yDtype == TFC_DTYPE_BF16 ? static_cast<float *>(ybuf.get(ny * sizeof(float)))
                                        : static_cast<float *>(c.y);
  if (!x || !xb || !y)
    return "out of memory for a bf16 linear layer's buffers";
  bf16ToF32(xb, x, nx);
  std::string err = runGemm(w, c, x, dt::f32, y, dt::f32);
  if (err.empty() && c.yDtype == TFC_DTYPE_BF16)
    f32ToBf16(y, static_cast<uint16_t *>(c.y), ny);
  return err;
}
} // namespace

/// An activation without a oneDNN post-op, or a multiplier on the oneDNN and
/// OpenBLAS paths: the GEMM (with its bias, and its activation where that is
/// a post-op) into f32, then the activation from tfc/unary.def, then in one
/// pass the multiplier and the residual, then the output's dtype.
static std::string runUnfusedEpilogue(const PackedLinear &w, const GemmCall &c) {
  thread_local ThreadBuffer ybuf;
  const int64_t ny = c.rows * w.n;
  const bool f32Out = c.yDtype == TFC_DTYPE_F32;
  float *y = f32Out ? static_cast<float *>(c.y) : static_cast<float *>(ybuf.get(ny * sizeof(float)));
  if (!y)
    return "out of memory for a linear layer's activation";
  dnnl::algorithm alg = dnnl::algorithm::eltwise_relu;
  const bool postOp = c.act == TFC_ACT_NONE || dnnlEltwise(c.act, alg);
  GemmCall g = c;
  g.act = postOp ? c.act : TFC_ACT_NONE;
  g.residual = nullptr;
  g.multiplier = nullptr;
  g.y = y;
  g.yDtype = TFC_DTYPE_F32;
  std::string err = runPackedLinear(w, g);
  if (!err.empty())
    return err;
  if (!postOp)
    applyActivation(c.act, y, ny);
  if (c.multiplier || c.residual) {
    const float *m = c.multiplier, *res = c.residual;
#pragma omp parallel for schedule(static) if (ny > 32768)
    for (int64_t i = 0; i < ny; ++i) {
      float v = y[i];
      if (m)
        v *= m[i];
      y[i] = res ? v + res[i] : v;
    }
  }
  if (!f32Out)
    f32ToBf16(y, static_cast<uint16_t *>(c.y), ny);
  return "";
}

bool packedRowTimes(const PackedLinear &w, int64_t j, float mul, float *out, bool accumulate) {
  if (j < 0 || j >= w.n)
    return false;
  auto emit = [&](auto value) {
    for (int64_t i = 0; i < w.k; ++i)
      out[i] = accumulate ? out[i] + value(i) : value(i);
    return true;
  };
  if (w.q8)
    return emit([&](int64_t i) { return (float)w.q8->at(j, i) * (mul * w.q8->scale(j, i / 32)); });
  if (w.dtype == TFC_DTYPE_I8 && w.s8 && !w.s8->clipped) {
    const float s = mul * w.scales[j];
    return emit([&](int64_t i) { return (float)w.s8->at(j, i) * s; });
  }
  // f32 (and bf16 widened to f32) in the plain [K, N] layout OpenBLAS reads.
  if ((w.dtype == TFC_DTYPE_F32 || w.bf16Emulated) && w.blas) {
    const float *kn = static_cast<const float *>(w.weights.get_data_handle());
    return emit([&](int64_t i) { return kn[i * w.n + j] * mul; });
  }
  // f32, bf16 or int8 in oneDNN's own layout (AVX-512; VNNI for int8):
  // element (i, j) of the [K, N] weights where its blocked format puts it, by
  // oneDNN's formula (memory_desc_wrapper::off_v: the inner blocks innermost,
  // then the strides of what is left of each index). Not where oneDNN keeps
  // extra data that changes the values (an s8 weight's scale adjustment).
  const dnnl_memory_desc_t &md = w.wdesc.data;
  const bool i8 = w.dtype == TFC_DTYPE_I8 && md.data_type == dnnl_s8 &&
                  (int64_t)w.scales.size() == w.n;
  if (!w.weights || md.format_kind != dnnl_blocked || md.ndims != 2 ||
      md.extra.flags != dnnl_memory_extra_flag_none ||
      !((w.dtype == TFC_DTYPE_F32 && md.data_type == dnnl_f32) ||
        (w.dtype == TFC_DTYPE_BF16 && (md.data_type == dnnl_bf16 || md.data_type == dnnl_f32)) ||
        i8))
    return false;
  const dnnl_blocking_desc_t &b = md.format_desc.blocking;
  auto offset = [&](int64_t i) {
    dnnl_dim_t pos[2] = {i, j}, off = md.offset0, inner = 1;
    for (int blk = b.inner_nblks - 1; blk >= 0; --blk) {
      const int d = b.inner_idxs[blk];
      off += pos[d] % b.inner_blks[blk] * inner;
      pos[d] /= b.inner_blks[blk];
      inner *= b.inner_blks[blk];
    }
    return off + pos[0] * b.strides[0] + pos[1] * b.strides[1];
  };
  const void *data = w.weights.get_data_handle();
  if (i8) {
    const float s = mul * w.scales[j];
    return emit([&](int64_t i) { return (float)static_cast<const int8_t *>(data)[offset(i)] * s; });
  }
  if (md.data_type == dnnl_f32)
    return emit([&](int64_t i) { return static_cast<const float *>(data)[offset(i)] * mul; });
  return emit([&](int64_t i) {
    return tfc_bf16_to_f32(static_cast<const uint16_t *>(data)[offset(i)]) * mul;
  });
}

std::string runPackedLinear(const PackedLinear &w, const GemmCall &c) {
  dnnl::algorithm alg = dnnl::algorithm::eltwise_relu;
  // The group-wise and int8 paths apply a multiplier in their own epilogue
  // (finishRow); oneDNN's and OpenBLAS's GEMMs take it in one pass after.
  const bool ownEpilogue = w.q4 || w.q8 || w.dtype == TFC_DTYPE_I8;
  if ((c.act != TFC_ACT_NONE && !dnnlEltwise(c.act, alg)) || (c.multiplier && !ownEpilogue))
    return runUnfusedEpilogue(w, c);
  try {
    const bool xOk = c.xDtype == TFC_DTYPE_F32 ||
                     (c.xDtype == TFC_DTYPE_BF16 && w.dtype != TFC_DTYPE_F32);
    const bool yOk = c.yDtype == TFC_DTYPE_F32 ||
                     (c.yDtype == TFC_DTYPE_BF16 && w.dtype != TFC_DTYPE_F32);
    if (!xOk || !yOk)
      return std::string("a linear layer with ") + tfc_dtype_name(w.dtype) +
             " weights cannot read " + tfc_dtype_name(c.xDtype) + " or write " +
             tfc_dtype_name(c.yDtype);
    if (w.q4 || w.q8)
      return runBlocks(w, c);
    if (w.dtype == TFC_DTYPE_I8)
      return runInt8(w, c);
    if (w.bf16Emulated)
      return runBf16Emulated(w, c);
    const void *x = c.x;
    if (w.dtype == TFC_DTYPE_BF16 && c.xDtype == TFC_DTYPE_F32) {
      thread_local ThreadBuffer xbuf;
      auto *xb = static_cast<uint16_t *>(xbuf.get(c.rows * w.k * sizeof(uint16_t)));
      if (!xb)
        return "out of memory converting a linear layer's input to bf16";
      f32ToBf16(static_cast<const float *>(c.x), xb, c.rows * w.k);
      x = xb;
    }
    return runGemm(w, c, x, dnnlType(w.dtype), c.y, dnnlType(c.yDtype));
  } catch (const dnnl::error &e) {
    return std::string("oneDNN matmul failed: ") + e.what();
  }
}

} // namespace tfc::cpu
