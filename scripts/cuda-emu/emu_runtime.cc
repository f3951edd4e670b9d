// Fake CUDA runtime, cuBLASLt and cuBLAS entry points on host memory, for the
// emulation harness. cuBLASLt semantics as tfc's linear_cuda.cc assumes them:
// D = epilogue(alpha op(A) op(B) + beta C (+ bias)), GELU = tanh approximation.
#include <cuda_runtime_api.h>
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <vector>

static int g_device = 0;
extern "C" {
const char *CUDARTAPI cudaGetErrorString(cudaError_t e) { return e ? "emulated error" : "no error"; }
const char *CUDARTAPI cudaGetErrorName(cudaError_t) { return "emu"; }
cudaError_t CUDARTAPI cudaGetLastError(void) { return cudaSuccess; }
cudaError_t CUDARTAPI cudaGetDeviceCount(int *n) { *n = 1; return cudaSuccess; }
cudaError_t CUDARTAPI cudaGetDevice(int *d) { *d = g_device; return cudaSuccess; }
cudaError_t CUDARTAPI cudaSetDevice(int d) { g_device = d; return cudaSuccess; }
cudaError_t CUDARTAPI cudaGetDeviceProperties(struct cudaDeviceProp *p, int) {
  std::memset(p, 0, sizeof *p);
  std::strcpy(p->name, "emulated");
  p->major = 9;
  return cudaSuccess;
}
cudaError_t CUDARTAPI cudaStreamCreateWithFlags(cudaStream_t *s, unsigned) { *s = (cudaStream_t)0x10; return cudaSuccess; }
cudaError_t CUDARTAPI cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
cudaError_t CUDARTAPI cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t CUDARTAPI cudaMalloc(void **p, size_t n) { *p = std::aligned_alloc(256, (n + 255) / 256 * 256); std::memset(*p, 0xCD, n); return cudaSuccess; }
cudaError_t CUDARTAPI cudaFree(void *p) { std::free(p); return cudaSuccess; }
cudaError_t CUDARTAPI cudaHostAlloc(void **p, size_t n, unsigned) { *p = std::malloc(n); return cudaSuccess; }
cudaError_t CUDARTAPI cudaFreeHost(void *p) { std::free(p); return cudaSuccess; }
cudaError_t CUDARTAPI cudaMemcpyAsync(void *d, const void *s, size_t n, enum cudaMemcpyKind, cudaStream_t) { std::memmove(d, s, n); return cudaSuccess; }
cudaError_t CUDARTAPI cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t) { std::memset(d, v, n); return cudaSuccess; }
}

// --- cuBLASLt ---------------------------------------------------------------
struct FakeDesc { int32_t ta = 0, tb = 0; uint32_t epi = 1; const void *bias = nullptr; bool tf32 = false; };
struct FakeLayout { cudaDataType t; uint64_t rows, cols; int64_t ld; int32_t batch = 1; int64_t stride = 0; };
static bool env(const char *n) { const char *v = std::getenv(n); return v && *v == '1'; }
static double ld(const void *p, cudaDataType t, int64_t i) {
  if (t == CUDA_R_32F) return ((const float *)p)[i];
  if (t == CUDA_R_16F) return __half2float(((const __half *)p)[i]);
  return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
}
static void st(void *p, cudaDataType t, int64_t i, double v) {
  if (t == CUDA_R_32F) ((float *)p)[i] = (float)v;
  else if (t == CUDA_R_16F) ((__half *)p)[i] = __float2half_rn((float)v);
  else ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn((float)v);
}
// TF32 as the worst case: f32 operands truncated to 11 significant bits.
static double tf32(double v) {
  float f = (float)v;
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u &= ~0x1fffu;
  std::memcpy(&f, &u, 4);
  return f;
}
static void gemmRef(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *A, cudaDataType at, int64_t lda, int64_t sa,
                    const void *B, int64_t ldb, int64_t sb, double beta, const void *C, void *D, cudaDataType dt, int64_t ldd,
                    int64_t sd, int64_t batch, uint32_t epi, const void *bias, bool useTf32 = false) {
  std::vector<double> out(m * n);
  for (int64_t e = 0; e < batch; ++e) {
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < m; ++i) {
        double acc = 0;
        for (int64_t x = 0; x < k; ++x) {
          double a = ta ? ld(A, at, e * sa + x + i * lda) : ld(A, at, e * sa + i + x * lda);
          double b = tb ? ld(B, at, e * sb + j + x * ldb) : ld(B, at, e * sb + x + j * ldb);
          acc += useTf32 ? tf32(a) * tf32(b) : a * b;
        }
        if (beta != 0) acc += beta * ld(C, dt, e * sd + i + j * ldd);
        if (epi & CUBLASLT_EPILOGUE_BIAS) acc += ld(bias, dt, i);
        if (epi & CUBLASLT_EPILOGUE_RELU) acc = acc > 0 ? acc : 0;
        if (epi & CUBLASLT_EPILOGUE_GELU) acc = 0.5 * acc * (1 + std::tanh(0.7978845608028654 * (acc + 0.044715 * acc * acc * acc)));
        out[i + j * m] = acc;
      }
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < m; ++i) st(D, dt, e * sd + i + j * ldd, out[i + j * m]);
  }
}
extern "C" {
cublasStatus_t CUBLASWINAPI cublasLtCreate(cublasLtHandle_t *h) { *h = (cublasLtHandle_t)0x20; return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t CUBLASWINAPI cublasLtDestroy(cublasLtHandle_t) { return CUBLAS_STATUS_SUCCESS; }
const char *CUBLASWINAPI cublasLtGetStatusString(cublasStatus_t) { return "emulated cublas status"; }
cublasStatus_t CUBLASWINAPI cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t c, cudaDataType_t s) {
  if ((c != CUBLAS_COMPUTE_32F && c != CUBLAS_COMPUTE_32F_FAST_TF32) || s != CUDA_R_32F) return CUBLAS_STATUS_INVALID_VALUE;
  FakeDesc *f = new FakeDesc;
  f->tf32 = c == CUBLAS_COMPUTE_32F_FAST_TF32;
  *d = (cublasLtMatmulDesc_t)f; return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t CUBLASWINAPI cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) { delete (FakeDesc *)d; return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t CUBLASWINAPI cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, const void *buf, size_t n) {
  FakeDesc *f = (FakeDesc *)d;
  if (a == CUBLASLT_MATMUL_DESC_TRANSA && n == 4) std::memcpy(&f->ta, buf, 4);
  else if (a == CUBLASLT_MATMUL_DESC_TRANSB && n == 4) std::memcpy(&f->tb, buf, 4);
  else if (a == CUBLASLT_MATMUL_DESC_EPILOGUE && n == 4) std::memcpy(&f->epi, buf, 4);
  else if (a == CUBLASLT_MATMUL_DESC_BIAS_POINTER && n == sizeof(void *)) std::memcpy(&f->bias, buf, n);
  else return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType t, uint64_t r, uint64_t c, int64_t ld) {
  if (ld < (int64_t)r) return CUBLAS_STATUS_INVALID_VALUE;
  *l = (cublasLtMatrixLayout_t) new FakeLayout{t, r, c, ld}; return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) { delete (FakeLayout *)l; return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t a, const void *buf, size_t n) {
  FakeLayout *f = (FakeLayout *)l;
  if (a == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT && n == 4) std::memcpy(&f->batch, buf, 4);
  else if (a == CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET && n == 8) std::memcpy(&f->stride, buf, 8);
  else return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) { *p = (cublasLtMatmulPreference_t)0x30; return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t, cublasLtMatmulPreferenceAttributes_t a, const void *, size_t n) {
  if (a == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES) return n == 8 ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
  return n == 4 ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
    cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatmulPreference_t, int req, cublasLtMatmulHeuristicResult_t r[], int *ret) {
  FakeDesc *f = (FakeDesc *)d;
  *ret = 0;
  if (req < 1) return CUBLAS_STATUS_INVALID_VALUE;
  if (env("EMU_LT_NONE") || (env("EMU_LT_NO_EPILOGUE") && f->epi != CUBLASLT_EPILOGUE_DEFAULT)) return CUBLAS_STATUS_NOT_SUPPORTED;
  std::memset(&r[0], 0, sizeof r[0]);
  r[0].state = CUBLAS_STATUS_SUCCESS;
  *ret = 1;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t CUBLASWINAPI cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t d, const void *alpha, const void *A, cublasLtMatrixLayout_t ad,
    const void *B, cublasLtMatrixLayout_t bd, const void *beta, const void *C, cublasLtMatrixLayout_t cd, void *D, cublasLtMatrixLayout_t dd,
    const cublasLtMatmulAlgo_t *, void *, size_t, cudaStream_t) {
  FakeDesc *f = (FakeDesc *)d;
  FakeLayout *a = (FakeLayout *)ad, *b = (FakeLayout *)bd, *c = (FakeLayout *)cd, *o = (FakeLayout *)dd;
  if (*(const float *)alpha != 1.0f) return CUBLAS_STATUS_INVALID_VALUE;
  const bool ta = f->ta == CUBLAS_OP_T, tb = f->tb == CUBLAS_OP_T;
  const uint64_t m = o->rows, n = o->cols, k = ta ? a->rows : a->cols;
  // Shapes must agree, as cuBLASLt checks.
  if ((ta ? a->cols : a->rows) != m || (tb ? b->rows : b->cols) != n || (tb ? b->cols : b->rows) != k ||
      c->rows != m || c->cols != n || a->t != b->t || c->t != o->t || a->batch != o->batch || b->batch != o->batch ||
      c->ld != o->ld || c->stride != o->stride || ((f->epi & CUBLASLT_EPILOGUE_BIAS) && !f->bias)) {
    std::fprintf(stderr, "emu cublasLtMatmul: inconsistent descriptors\n");
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  gemmRef(ta, tb, m, n, k, A, a->t, a->ld, a->stride, B, b->ld, b->stride, *(const float *)beta, C, D, o->t, o->ld, o->stride,
          o->batch, f->epi, f->bias, f->tf32 && a->t == CUDA_R_32F);
  return CUBLAS_STATUS_SUCCESS;
}
// --- cuBLAS ------------------------------------------------------------------
cublasStatus_t CUBLASWINAPI cublasCreate_v2(cublasHandle_t *h) { *h = (cublasHandle_t)0x40; return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t CUBLASWINAPI cublasDestroy_v2(cublasHandle_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t CUBLASWINAPI cublasSetStream_v2(cublasHandle_t, cudaStream_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t CUBLASWINAPI cublasGemmStridedBatchedEx_64(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n,
    int64_t k, const void *alpha, const void *A, cudaDataType at, int64_t lda, long long sa, const void *B, cudaDataType bt, int64_t ldb,
    long long sb, const void *beta, void *C, cudaDataType ct, int64_t ldc, long long sc, int64_t batch, cublasComputeType_t ctype,
    cublasGemmAlgo_t) {
  static bool said = false;
  if (!said) { std::fprintf(stderr, "emu: cuBLAS fallback used\n"); said = true; }
  if (*(const float *)alpha != 1.0f || at != bt) return CUBLAS_STATUS_INVALID_VALUE;
  gemmRef(ta == CUBLAS_OP_T, tb == CUBLAS_OP_T, m, n, k, A, at, lda, sa, B, ldb, sb, *(const float *)beta, C, C, ct, ldc, sc, batch,
          CUBLASLT_EPILOGUE_DEFAULT, nullptr, ctype == CUBLAS_COMPUTE_32F_FAST_TF32 && at == CUDA_R_32F);
  return CUBLAS_STATUS_SUCCESS;
}
}
