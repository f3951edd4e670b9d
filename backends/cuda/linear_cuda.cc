//===- linear_cuda.cc - linear layers and matmul on cuBLASLt --------------===//
//
// LINEAR, FUSED_LINEAR and MATMUL run on cuBLASLt rather than on a GEMM of our
// own: it is NVIDIA's maintained library, with tensor-core kernels tuned for
// each architecture that reach the hardware's ceiling, and its epilogues fuse
// the bias, the activation and the residual into the GEMM's store (the role
// oneDNN's post-ops play on the CPU, see linear_dnnl.h).
//
// Row-major y[rows, N] = x[rows, K] W^T is the column-major product
// y^T = W x^T: cuBLAS's A is W (stored [N, K], used transposed), its B is x,
// and D (N x rows, leading dimension N) is y in place. MATMUL is the same
// trick with the operands swapped.
//
// Epilogues. cuBLASLt computes D = epilogue(alpha A B + beta C) + ...: the
// bias and activation apply AFTER beta C is added, so a residual can ride on
// C (beta = 1) only without an activation. Its GELU epilogue is the tanh
// approximation. So the fused path covers bias, relu, gelu_tanh, and a
// residual without activation; gelu (erf), an activation together with a
// residual, a multiplier (a gated FFN's product), dtypes cuBLASLt's epilogue does not accept (an f32 bias on a
// bf16 layer), and any configuration for which cuBLASLt offers no algorithm
// take the unfused path: the plain GEMM into f32 (the output itself when it is
// f32, scratch otherwise), then one elementwise kernel for bias, activation,
// multiplier, residual and the rounding to the output dtype. A plain GEMM that cuBLASLt
// declines (it can, for some leading dimensions and alignments in f16/bf16)
// runs on plain cuBLAS (cublasGemmStridedBatchedEx), which takes any.
//
// int8 and int4 weights (runQuantLinear) are weight-only: a GEMV of our own on
// the quantized bytes while decoding, and, for more rows, the weight
// dequantized to f32 for cuBLASLt's TF32 tensor cores.
//
// Accumulation is f32 (CUBLAS_COMPUTE_32F, no TF32), so an f32 model gives
// f32 GEMM results. The one exception is the dequantized int8/int4 GEMM:
// TF32 rounds its operands to 11 significant bits, 4x finer than an int8
// weight's own step (docs/precision.md), on the tensor cores.
// Algorithms come from cuBLASLt's heuristic once per shape, dtype, epilogue
// and pointer alignment, and are cached in the Context.
//
//===----------------------------------------------------------------------===//
#include "backends/cuda/cuda_internal.h"
#include "tfc/kernel_schema.h"

#include "tfc/abi.h"

#include <cublasLt.h>
#include <cublas_v2.h>

#include <cstring>
#include <unordered_map>

namespace tfc::cuda {

namespace {
/// cuBLASLt recommends 32 MiB of workspace on Hopper.
constexpr size_t kWorkspaceBytes = size_t(32) << 20;
} // namespace

struct GemmState {
  cublasLtHandle_t handle = nullptr;
  /// Plain cuBLAS, for the GEMMs without epilogue that cuBLASLt declines.
  cublasHandle_t blas = nullptr;
  void *workspace = nullptr;
  /// An algorithm per GemmKey (as bytes); ok = false: cuBLASLt has none.
  struct Entry {
    bool ok = false;
    cublasLtMatmulAlgo_t algo;
  };
  std::unordered_map<std::string, Entry> algos;
};

void GemmStateDeleter::operator()(GemmState *s) const {
  if (!s)
    return;
  if (s->handle)
    (void)cublasLtDestroy(s->handle);
  if (s->blas)
    (void)cublasDestroy(s->blas);
  if (s->workspace)
    (void)cudaFree(s->workspace);
  delete s;
}

namespace {

/// A cuBLASLt or cuBLAS call's result: OutOfMemory for a failed allocation,
/// Internal for any other failure.
Status ltStatus(cublasStatus_t st, const char *what) {
  if (st == CUBLAS_STATUS_SUCCESS)
    return Status::ok();
  return Status(st == CUBLAS_STATUS_ALLOC_FAILED ? Code::OutOfMemory : Code::Internal,
                std::string("CUDA error in ") + what + ": " + cublasLtGetStatusString(st));
}

#define TFC_LT_RETURN_IF_ERROR(expr, what)                                                    \
  do {                                                                                        \
    cublasStatus_t tfc_lt_st_ = (expr);                                                       \
    if (tfc_lt_st_ != CUBLAS_STATUS_SUCCESS)                                                  \
      return ltStatus(tfc_lt_st_, what);                                                      \
  } while (0)

bool cudaType(uint32_t dtype, cudaDataType_t &t) {
  switch (dtype) {
  case TFC_DTYPE_F32:
    t = CUDA_R_32F;
    return true;
  case TFC_DTYPE_F16:
    t = CUDA_R_16F;
    return true;
  case TFC_DTYPE_BF16:
    t = CUDA_R_16BF;
    return true;
  default:
    return false;
  }
}

/// The largest power of two (up to 256) dividing the address and every batch
/// offset |strideBytes| (0: no batch).
uint32_t alignmentOf(const void *p, int64_t strideBytes = 0) {
  uint64_t a = reinterpret_cast<uintptr_t>(p) | 256u;
  if (strideBytes > 0)
    a |= static_cast<uint64_t>(strideBytes);
  return static_cast<uint32_t>(a & (~a + 1));
}

/// One column-major GEMM, D (m x n) = op(A) op(B) + beta C, possibly strided
/// batched, with an epilogue.
struct GemmCall {
  cudaDataType_t abType = CUDA_R_32F, cdType = CUDA_R_32F;
  bool transA = false, transB = false;
  uint64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldd = 0;
  const void *A = nullptr, *B = nullptr, *C = nullptr;
  void *D = nullptr;
  float beta = 0.0f;
  int32_t batch = 1;
  int64_t strideA = 0, strideB = 0, strideD = 0;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void *bias = nullptr;
  /// CUBLAS_COMPUTE_32F, or CUBLAS_COMPUTE_32F_FAST_TF32 for f32 operands
  /// whose own error exceeds TF32's rounding (dequantized int8/int4 weights).
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
};

/// What selects an algorithm; compared as bytes, so zero-initialized.
struct GemmKey {
  int32_t abType, cdType, transA, transB;
  uint64_t m, n, k;
  int64_t lda, ldb, ldd;
  int64_t batch, strideA, strideB, strideD;
  uint32_t epilogue, hasBias;
  uint32_t alignA, alignB, alignC, alignD, alignBias, compute;
};

/// RAII for cuBLASLt descriptors.
struct Descriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~Descriptors() {
    if (pref)
      (void)cublasLtMatmulPreferenceDestroy(pref);
    for (cublasLtMatrixLayout_t l : {a, b, c, d})
      if (l)
        (void)cublasLtMatrixLayoutDestroy(l);
    if (op)
      (void)cublasLtMatmulDescDestroy(op);
  }
};

Status makeLayout(cublasLtMatrixLayout_t &l, cudaDataType_t t, uint64_t rows, uint64_t cols,
                  int64_t ld, int32_t batch, int64_t stride) {
  TFC_LT_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&l, t, rows, cols, ld),
                         "cublasLtMatrixLayoutCreate");
  if (batch > 1) {
    TFC_LT_RETURN_IF_ERROR(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                            &batch, sizeof(batch)),
                           "cublasLtMatrixLayoutSetAttribute (batch count)");
    TFC_LT_RETURN_IF_ERROR(
        cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                         sizeof(stride)),
        "cublasLtMatrixLayoutSetAttribute (batch stride)");
  }
  return Status::ok();
}

size_t cudaTypeSize(cudaDataType_t t) { return t == CUDA_R_32F ? 4 : 2; }

/// |g| (no epilogue, C == D) on plain cuBLAS, which accepts any leading
/// dimension and alignment.
Status blasGemm(Context &ctx, const GemmCall &g) {
  const float alpha = 1.0f;
  TFC_LT_RETURN_IF_ERROR(
      cublasGemmStridedBatchedEx_64(ctx.gemm->blas, g.transA ? CUBLAS_OP_T : CUBLAS_OP_N,
                                    g.transB ? CUBLAS_OP_T : CUBLAS_OP_N, g.m, g.n, g.k, &alpha,
                                    g.A, g.abType, g.lda, g.strideA, g.B, g.abType, g.ldb,
                                    g.strideB, &g.beta, g.D, g.cdType, g.ldd, g.strideD, g.batch,
                                    g.compute, CUBLAS_GEMM_DEFAULT),
      "cublasGemmStridedBatchedEx");
  return Status::ok();
}

/// Runs |g|. Sets |unsupported| (and returns OK) when cuBLASLt has no
/// algorithm for it and |g| needs its epilogue, so that the caller can take
/// another path; a plain GEMM falls back to cuBLAS instead.
Status gemm(Context &ctx, const GemmCall &g, bool &unsupported) {
  unsupported = false;
  GemmState &st = *ctx.gemm;
  Descriptors ds;
  TFC_LT_RETURN_IF_ERROR(cublasLtMatmulDescCreate(&ds.op, g.compute, CUDA_R_32F),
                         "cublasLtMatmulDescCreate");
  const int32_t opA = g.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int32_t opB = g.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  TFC_LT_RETURN_IF_ERROR(
      cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof(opA)),
      "cublasLtMatmulDescSetAttribute (transa)");
  TFC_LT_RETURN_IF_ERROR(
      cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof(opB)),
      "cublasLtMatmulDescSetAttribute (transb)");
  const uint32_t epi = static_cast<uint32_t>(g.epilogue);
  TFC_LT_RETURN_IF_ERROR(
      cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)),
      "cublasLtMatmulDescSetAttribute (epilogue)");
  if (g.bias)
    TFC_LT_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                          &g.bias, sizeof(g.bias)),
                           "cublasLtMatmulDescSetAttribute (bias)");
  TFC_RETURN_IF_ERROR(makeLayout(ds.a, g.abType, g.transA ? g.k : g.m, g.transA ? g.m : g.k, g.lda,
                                 g.batch, g.strideA));
  TFC_RETURN_IF_ERROR(makeLayout(ds.b, g.abType, g.transB ? g.n : g.k, g.transB ? g.k : g.n, g.ldb,
                                 g.batch, g.strideB));
  TFC_RETURN_IF_ERROR(makeLayout(ds.c, g.cdType, g.m, g.n, g.ldd, g.batch, g.strideD));
  TFC_RETURN_IF_ERROR(makeLayout(ds.d, g.cdType, g.m, g.n, g.ldd, g.batch, g.strideD));

  const int64_t abSize = static_cast<int64_t>(cudaTypeSize(g.abType));
  const int64_t cdSize = static_cast<int64_t>(cudaTypeSize(g.cdType));
  GemmKey key;
  std::memset(&key, 0, sizeof key);
  key.abType = g.abType;
  key.cdType = g.cdType;
  key.transA = g.transA;
  key.transB = g.transB;
  key.m = g.m;
  key.n = g.n;
  key.k = g.k;
  key.lda = g.lda;
  key.ldb = g.ldb;
  key.ldd = g.ldd;
  key.batch = g.batch;
  key.strideA = g.strideA;
  key.strideB = g.strideB;
  key.strideD = g.strideD;
  key.epilogue = epi;
  key.hasBias = g.bias != nullptr;
  const int32_t multi = g.batch > 1;
  key.alignA = alignmentOf(g.A, multi * g.strideA * abSize);
  key.alignB = alignmentOf(g.B, multi * g.strideB * abSize);
  key.alignC = alignmentOf(g.C, multi * g.strideD * cdSize);
  key.alignD = alignmentOf(g.D, multi * g.strideD * cdSize);
  key.alignBias = g.bias ? alignmentOf(g.bias) : 0;
  key.compute = static_cast<uint32_t>(g.compute);
  const std::string keyBytes(reinterpret_cast<const char *>(&key), sizeof key);

  auto found = st.algos.find(keyBytes);
  if (found == st.algos.end()) {
    GemmState::Entry entry;
    TFC_LT_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&ds.pref),
                           "cublasLtMatmulPreferenceCreate");
    const uint64_t ws = kWorkspaceBytes;
    TFC_LT_RETURN_IF_ERROR(
        cublasLtMatmulPreferenceSetAttribute(ds.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                             &ws, sizeof(ws)),
        "cublasLtMatmulPreferenceSetAttribute (workspace)");
    const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> aligns[] = {
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.alignA},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.alignB},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.alignC},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.alignD}};
    for (const auto &[attr, value] : aligns)
      TFC_LT_RETURN_IF_ERROR(
          cublasLtMatmulPreferenceSetAttribute(ds.pref, attr, &value, sizeof(value)),
          "cublasLtMatmulPreferenceSetAttribute (alignment)");
    cublasLtMatmulHeuristicResult_t result;
    std::memset(&result, 0, sizeof result);
    int returned = 0;
    const cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(
        st.handle, ds.op, ds.a, ds.b, ds.c, ds.d, ds.pref, 1, &result, &returned);
    if (hs == CUBLAS_STATUS_SUCCESS && returned > 0 && result.state == CUBLAS_STATUS_SUCCESS) {
      entry.ok = true;
      entry.algo = result.algo;
    } else if (hs != CUBLAS_STATUS_SUCCESS && hs != CUBLAS_STATUS_NOT_SUPPORTED) {
      return ltStatus(hs, "cublasLtMatmulAlgoGetHeuristic");
    }
    found = st.algos.emplace(keyBytes, entry).first;
  }
  if (!found->second.ok) {
    if (g.epilogue == CUBLASLT_EPILOGUE_DEFAULT && !g.bias && g.C == g.D)
      return blasGemm(ctx, g);
    unsupported = true;
    return Status::ok();
  }
  const float alpha = 1.0f;
  TFC_LT_RETURN_IF_ERROR(cublasLtMatmul(st.handle, ds.op, &alpha, g.A, ds.a, g.B, ds.b, &g.beta,
                                        g.C, ds.c, g.D, ds.d, &found->second.algo, st.workspace,
                                        kWorkspaceBytes, ctx.stream),
                         "cublasLtMatmul");
  return Status::ok();
}

Status dtypeError(const char *what, uint32_t dtype) {
  return Status::unsupported(std::string(what) + ": dtype " + std::to_string(dtype) +
                             " is not supported by the CUDA GEMMs (f32, f16, bf16)");
}

/// Bytes rounded up to 256 (scratch sub-buffers stay 256-byte aligned).
size_t round256(size_t n) { return (n + 255) / 256 * 256; }

/// The unfused path's last step: bias, activation, multiplier and residual
/// applied to the f32 sums |acc| [rows, n], rounded to out's dtype (nothing
/// to do when there is none and out is acc).
Status epilogue(Context &ctx, const void *acc, int64_t rows, int64_t n, const Tensor *bias,
                const Tensor *residual, const Tensor *multiplier, int act, Tensor &out) {
  uint32_t actKernel = 0;
  int64_t actMode = 0;
  const bool hasAct = schema::activationUnary(act, &actKernel, &actMode);
  if (!bias && !residual && !multiplier && !hasAct && acc == out.data)
    return Status::ok();
  EpilogueArgs e;
  e.acc = acc;
  e.accType = TFC_DTYPE_F32;
  if (bias) {
    e.bias = bias->data;
    e.biasType = bias->dtype;
  }
  if (residual) {
    e.res = residual->data;
    e.resType = residual->dtype;
  }
  if (multiplier) {
    e.mul = multiplier->data;
    e.mulType = multiplier->dtype;
  }
  e.out = out.data;
  e.outType = out.dtype;
  e.rows = rows;
  e.n = n;
  e.actKernel = hasAct ? static_cast<int32_t>(actKernel) : -1;
  e.actMode = static_cast<int32_t>(actMode);
  return launchLinearEpilogue(e, ctx.stream);
}

/// A linear layer over f32, f16 or bf16 weights, with |compute| (runLinear's
/// CUBLAS_COMPUTE_32F, or TF32 for a dequantized weight).
Status runFloatLinear(Context &ctx, const Tensor &x, const Tensor &w, const Tensor *bias,
                      const Tensor *residual, const Tensor *multiplier, int act, Tensor &out,
                      cublasComputeType_t compute);

/// A linear layer over an int8 or int4 weight (tfc compile --precision int8 /
/// int4), weight-only: the activations stay in their dtype and every sum is
/// f32. Up to kQuantGemvRows rows (a decoding step) a GEMV reads the
/// quantized bytes, a quarter (int8) or an eighth (int4) of the f32 weight's;
/// more rows (a prefill, an encoder) dequantize the weight to f32, exactly,
/// in a scratch of its own and take the f32 GEMM path on TF32 tensor cores.
Status runQuantLinear(Context &ctx, const Tensor &x, const Tensor &w, const Tensor *bias,
                      const Tensor *residual, const Tensor *multiplier, int act, Tensor &out) {
  const char *name = w.dtype == TFC_DTYPE_I8 ? "int8" : "int4";
  if (w.shape.size() != 2 || x.shape.empty() || x.shape.back() != w.shape[1])
    return Status::invalidModel("linear: the input's last dim does not match the weight [N, K]");
  if (!w.scales || w.group < 0)
    return Status::invalidModel(std::string("linear: the ") + name + " weight has no scales");
  uint32_t actKernel = 0;
  int64_t actMode = 0;
  if (act != TFC_ACT_NONE && !schema::activationUnary(act, &actKernel, &actMode))
    return Status::invalidModel("linear: unknown activation " + std::to_string(act));
  QuantWeightArgs q;
  q.q = w.data;
  q.qType = w.dtype;
  q.scales = w.scales;
  q.n = w.shape[0];
  q.k = w.shape[1];
  q.group = w.group;
  const int64_t rows = q.k > 0 ? x.numel() / q.k : 0;
  if (rows > kQuantGemvRows || q.k == 0) {
    void *wf = nullptr;
    TFC_RETURN_IF_ERROR(ctx.weightScratchFor(round256(q.n * q.k * sizeof(float)), &wf));
    TFC_RETURN_IF_ERROR(launchDequantize(q, static_cast<float *>(wf), ctx.stream));
    Tensor f32 = w;
    f32.data = wf;
    f32.dtype = TFC_DTYPE_F32;
    f32.scales = nullptr;
    f32.group = 0;
    // TF32: the tensor cores at f32's range; its rounding of x and of the
    // weight (2^-11) is well under the weight's own quantization step.
    return runFloatLinear(ctx, x, f32, bias, residual, multiplier, act, out,
                          CUBLAS_COMPUTE_32F_FAST_TF32);
  }
  if (rows == 0 || q.n == 0)
    return Status::ok();
  if (out.numel() != rows * q.n || (bias && bias->numel() != q.n) ||
      (residual && residual->numel() != rows * q.n) ||
      (multiplier && multiplier->numel() != rows * q.n))
    return Status::invalidModel("linear: operand sizes do not match");
  // Scratch: x in f32 (the GEMV's vector form reads float4s) and the f32
  // sums when the output is not f32.
  const size_t xBytes = x.dtype == TFC_DTYPE_F32 ? 0 : round256(rows * q.k * sizeof(float));
  const size_t accBytes = out.dtype == TFC_DTYPE_F32 ? 0 : round256(rows * q.n * sizeof(float));
  void *scratch = nullptr;
  if (xBytes + accBytes)
    TFC_RETURN_IF_ERROR(ctx.scratchFor(xBytes + accBytes, &scratch));
  const void *xData = x.data;
  if (xBytes) {
    TFC_RETURN_IF_ERROR(
        launchCast(x.data, x.dtype, scratch, TFC_DTYPE_F32, rows * q.k, ctx.stream));
    xData = scratch;
  }
  void *acc = accBytes ? static_cast<char *>(scratch) + xBytes : out.data;
  TFC_RETURN_IF_ERROR(launchQuantGemv(q, xData, TFC_DTYPE_F32, rows, static_cast<float *>(acc),
                                      ctx.stream));
  return epilogue(ctx, acc, rows, q.n, bias, residual, multiplier, act, out);
}

} // namespace

Status createGemmState(Context &ctx) {
  ctx.gemm.reset(new GemmState);
  TFC_LT_RETURN_IF_ERROR(cublasLtCreate(&ctx.gemm->handle), "cublasLtCreate");
  TFC_LT_RETURN_IF_ERROR(cublasCreate(&ctx.gemm->blas), "cublasCreate");
  TFC_LT_RETURN_IF_ERROR(cublasSetStream(ctx.gemm->blas, ctx.stream), "cublasSetStream");
  TFC_CUDA_RETURN_IF_ERROR(cudaMalloc(&ctx.gemm->workspace, kWorkspaceBytes),
                           "cudaMalloc (cuBLASLt workspace)");
  return Status::ok();
}

Status runLinear(Context &ctx, const Tensor &x, const Tensor &w, const Tensor *bias,
                 const Tensor *residual, const Tensor *multiplier, int act, Tensor &out) {
  if (w.dtype == TFC_DTYPE_I8 || w.dtype == TFC_DTYPE_I4)
    return runQuantLinear(ctx, x, w, bias, residual, multiplier, act, out);
  return runFloatLinear(ctx, x, w, bias, residual, multiplier, act, out, CUBLAS_COMPUTE_32F);
}

namespace {

Status runFloatLinear(Context &ctx, const Tensor &x, const Tensor &w, const Tensor *bias,
                      const Tensor *residual, const Tensor *multiplier, int act, Tensor &out,
                      cublasComputeType_t compute) {
  cudaDataType_t abType, outType;
  if (!cudaType(w.dtype, abType))
    return dtypeError("linear weight", w.dtype);
  if (!cudaType(out.dtype, outType))
    return dtypeError("linear output", out.dtype);
  cudaDataType_t operandType;
  for (const Tensor *t : {&x, bias, residual, multiplier})
    if (t && !cudaType(t->dtype, operandType))
      return dtypeError("linear operand", t->dtype);
  if (w.shape.size() != 2 || x.shape.empty() || x.shape.back() != w.shape[1])
    return Status::invalidModel("linear: the input's last dim does not match the weight [N, K]");
  // The activation's tfc/unary.def row (tfc/enums.def), which the epilogue
  // kernel applies; cuBLASLt's own epilogues cover relu and tanh-GELU.
  uint32_t actKernel = 0;
  int64_t actMode = 0;
  const bool hasAct = schema::activationUnary(act, &actKernel, &actMode);
  if (act != TFC_ACT_NONE && !hasAct)
    return Status::invalidModel("linear: unknown activation " + std::to_string(act));
  const bool ltEpilogue = act == TFC_ACT_NONE || act == TFC_ACT_RELU || act == TFC_ACT_GELU_TANH;
  const int64_t n = w.shape[0], k = w.shape[1];
  const int64_t rows = k > 0 ? x.numel() / k : 0;
  if (rows == 0 || n == 0)
    return Status::ok();
  if (out.numel() != rows * n || (bias && bias->numel() != n) ||
      (residual && residual->numel() != rows * n) ||
      (multiplier && multiplier->numel() != rows * n))
    return Status::invalidModel("linear: operand sizes do not match");

  // Scratch: x converted to the weight's dtype (when they differ) and the f32
  // GEMM result of the unfused path (when the output is not f32).
  const bool convertX = x.dtype != w.dtype;
  const size_t xBytes = convertX ? round256(tfc_dtype_bytes(w.dtype, rows * k)) : 0;
  const bool f32Out = out.dtype == TFC_DTYPE_F32;
  const size_t accBytes = f32Out ? 0 : round256(rows * n * sizeof(float));
  void *scratch = nullptr;
  if (xBytes + accBytes > 0)
    TFC_RETURN_IF_ERROR(ctx.scratchFor(xBytes + accBytes, &scratch));
  const void *xData = x.data;
  if (convertX) {
    TFC_RETURN_IF_ERROR(launchCast(x.data, x.dtype, scratch, w.dtype, rows * k, ctx.stream));
    xData = scratch;
  }

  GemmCall g;
  g.abType = abType;
  g.transA = true; // A = W stored [N, K]: column-major K x N
  g.transB = false;
  g.m = n;
  g.n = rows;
  g.k = k;
  g.lda = k;
  g.ldb = k;
  g.ldd = n;
  g.A = w.data;
  g.B = xData;
  g.compute = compute;

  // The fused path: everything in cuBLASLt's epilogue.
  const bool sameDtypes = (!bias || bias->dtype == out.dtype) &&
                          (!residual || residual->dtype == out.dtype) &&
                          (out.dtype == w.dtype || f32Out);
  // (cuBLASLt has no epilogue that multiplies by another matrix.)
  if (k > 0 && ltEpilogue && !(hasAct && residual) && !multiplier && sameDtypes) {
    g.cdType = outType;
    g.D = out.data;
    g.C = residual ? residual->data : out.data;
    g.beta = residual ? 1.0f : 0.0f;
    g.bias = bias ? bias->data : nullptr;
    if (act == TFC_ACT_NONE)
      g.epilogue = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    else if (act == TFC_ACT_RELU)
      g.epilogue = bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
    else
      g.epilogue = bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
    bool unsupported = false;
    Status err = gemm(ctx, g, unsupported);
    if (!err.isOk() || !unsupported)
      return err;
  }

  // The unfused path: plain GEMM into f32, then one epilogue kernel.
  void *acc = f32Out ? out.data : static_cast<char *>(scratch) + xBytes;
  if (k == 0) {
    TFC_RETURN_IF_ERROR(fillZero(ctx, acc, rows * n * sizeof(float)));
  } else {
    g.cdType = CUDA_R_32F;
    g.D = acc;
    g.C = acc;
    g.beta = 0.0f;
    g.bias = nullptr;
    g.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    bool unsupported = false;
    TFC_RETURN_IF_ERROR(gemm(ctx, g, unsupported));
    if (unsupported)
      return Status::unsupported("linear: cuBLASLt has no algorithm for a " + std::to_string(rows) +
                                 "x" + std::to_string(k) + " by " + std::to_string(n) + "x" +
                                 std::to_string(k) + " GEMM");
  }
  return epilogue(ctx, acc, rows, n, bias, residual, multiplier, act, out);
}

} // namespace

Status runMatmul(Context &ctx, const Tensor &a, const Tensor &b, bool transB, Tensor &out) {
  cudaDataType_t abType, outType, bType;
  if (!cudaType(a.dtype, abType))
    return dtypeError("matmul lhs", a.dtype);
  if (!cudaType(b.dtype, bType))
    return dtypeError("matmul rhs", b.dtype);
  if (!cudaType(out.dtype, outType))
    return dtypeError("matmul output", out.dtype);
  const size_t ra = a.shape.size(), rb = b.shape.size(), ro = out.shape.size();
  if (ra < 2 || rb < 2 || ro < 2)
    return Status::invalidModel("matmul operands must have rank 2 or more");
  if (ro > static_cast<size_t>(kMaxRank))
    return Status::unsupported("rank " + std::to_string(ro) + " is above the CUDA backend's " +
                               std::to_string(kMaxRank));
  const int64_t m = a.shape[ra - 2], k = a.shape[ra - 1];
  const int64_t n = out.shape[ro - 1];
  if ((transB ? b.shape[rb - 1] : b.shape[rb - 2]) != k || out.shape[ro - 2] != m ||
      (transB ? b.shape[rb - 2] : b.shape[rb - 1]) != n)
    return Status::invalidModel("matmul: the operand shapes do not agree");

  // Each output batch's lhs and rhs matrix index (numpy broadcasting over the
  // batch dims, as kernels_cpu.cc).
  const std::vector<int64_t> ob(out.shape.begin(), out.shape.end() - 2);
  int64_t batches = 1;
  for (int64_t d : ob)
    batches *= d;
  if (batches == 0 || m == 0 || n == 0)
    return Status::ok();
  auto matrixStrides = [&](const std::vector<int64_t> &shape, size_t rank) {
    std::vector<int64_t> st(ob.size(), 0);
    int64_t s = 1;
    for (size_t i = 0; i + 2 < rank; ++i) {
      const size_t d = rank - 3 - i, o = ob.size() - 1 - i;
      st[o] = shape[d] == 1 ? 0 : s;
      s *= shape[d];
    }
    return st;
  };
  const std::vector<int64_t> sa = matrixStrides(a.shape, ra), sb = matrixStrides(b.shape, rb);
  std::vector<int64_t> offA(batches), offB(batches);
  {
    std::vector<int64_t> idx(ob.size(), 0);
    for (int64_t e = 0; e < batches; ++e) {
      int64_t oa = 0, obb = 0;
      for (size_t d = 0; d < ob.size(); ++d) {
        oa += idx[d] * sa[d];
        obb += idx[d] * sb[d];
      }
      offA[e] = oa;
      offB[e] = obb;
      for (size_t d = ob.size(); d-- > 0;) {
        if (++idx[d] < ob[d])
          break;
        idx[d] = 0;
      }
    }
  }
  // One strided-batched call when the matrix indices are affine in the batch
  // (always, unless the batch dims broadcast in a crossed pattern); one call
  // per batch otherwise.
  const int64_t stepA = batches > 1 ? offA[1] - offA[0] : 0;
  const int64_t stepB = batches > 1 ? offB[1] - offB[0] : 0;
  bool affine = batches <= 0x7fffffff;
  for (int64_t e = 0; e < batches && affine; ++e)
    affine = offA[e] == e * stepA && offB[e] == e * stepB;

  // Mixed operands (an f32 model input against a reduced-precision value):
  // the f32 one is converted to the other's dtype in scratch, as cuBLAS
  // multiplies operands of one type. The scratch also holds the f32 result
  // of the fallback below.
  const uint32_t common = a.dtype == TFC_DTYPE_F32 ? b.dtype : a.dtype;
  cudaType(common, abType);
  const Tensor *conv = a.dtype != common ? &a : b.dtype != common ? &b : nullptr;
  const size_t convBytes = conv ? round256(tfc_dtype_bytes(common, conv->numel())) : 0;
  const bool f32Out = out.dtype == TFC_DTYPE_F32;
  const size_t accBytes = f32Out ? 0 : round256(batches * m * n * sizeof(float));
  void *scratch = nullptr;
  if (convBytes + accBytes > 0)
    TFC_RETURN_IF_ERROR(ctx.scratchFor(convBytes + accBytes, &scratch));
  const void *aData = a.data, *bData = b.data;
  if (conv) {
    TFC_RETURN_IF_ERROR(
        launchCast(conv->data, conv->dtype, scratch, common, conv->numel(), ctx.stream));
    (conv == &a ? aData : bData) = scratch;
  }
  const size_t es = tfc_dtype_bytes(common, 1);
  auto run = [&](cudaDataType_t cdType, void *D, bool &unsupported) -> Status {
    // Column-major: D^T (N x M) = op(b) (N x K) * a^T (K x M).
    GemmCall g;
    g.abType = abType;
    g.cdType = cdType;
    g.transA = transB;
    g.transB = false;
    g.m = n;
    g.n = m;
    g.k = k;
    g.lda = transB ? k : n;
    g.ldb = k;
    g.ldd = n;
    const size_t ds = cdType == CUDA_R_32F ? 4 : 2;
    if (affine) {
      g.A = bData;
      g.B = aData;
      g.D = D;
      g.C = D;
      g.batch = static_cast<int32_t>(batches);
      g.strideA = stepB * k * n;
      g.strideB = stepA * m * k;
      g.strideD = m * n;
      return gemm(ctx, g, unsupported);
    }
    for (int64_t e = 0; e < batches; ++e) {
      g.A = static_cast<const char *>(bData) + offB[e] * k * n * es;
      g.B = static_cast<const char *>(aData) + offA[e] * m * k * es;
      g.D = static_cast<char *>(D) + e * m * n * ds;
      g.C = g.D;
      Status err = gemm(ctx, g, unsupported);
      if (!err.isOk() || unsupported)
        return err;
    }
    return Status::ok();
  };

  if (k > 0) {
    bool unsupported = false;
    Status err = run(outType, out.data, unsupported);
    if (!err.isOk() || !unsupported)
      return err;
  }
  // Fallback: f32 result (or zeros when K = 0), rounded to the output dtype.
  void *acc = f32Out ? out.data : static_cast<char *>(scratch) + convBytes;
  if (k == 0) {
    TFC_RETURN_IF_ERROR(fillZero(ctx, acc, batches * m * n * sizeof(float)));
  } else {
    bool unsupported = false;
    TFC_RETURN_IF_ERROR(run(CUDA_R_32F, acc, unsupported));
    if (unsupported)
      return Status::unsupported("matmul: cuBLASLt has no algorithm for this " + std::to_string(m) +
                                 "x" + std::to_string(k) + "x" + std::to_string(n) + " GEMM");
  }
  if (f32Out)
    return Status::ok();
  EpilogueArgs e;
  e.acc = acc;
  e.accType = TFC_DTYPE_F32;
  e.out = out.data;
  e.outType = out.dtype;
  e.rows = batches * m;
  e.n = n;
  return launchLinearEpilogue(e, ctx.stream);
}

} // namespace tfc::cuda
