//===- gemm_s8_avx2.cc - exact u8 x s8 GEMM for CPUs without VNNI ---------===//
#include "backends/cpu/gemm_s8_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace tfc::cpu {

namespace {
constexpr int64_t kPanel = 16; // columns per panel: two 8-lane s32 vectors
constexpr int kRows = 4;       // rows per register tile: 4 x 2 accumulators
constexpr int64_t kRowBlock = 64; // rows per cache block (a multiple of kRows)

/// a_i * w_i summed over 4 consecutive k, for 8 columns: |a| * (w sign a).
inline __m256i dot4(__m256i absA, __m256i a, __m256i w, __m256i ones) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(absA, _mm256_sign_epi8(w, a)), ones);
}

/// Rows [r0, r0 + R) of one panel: R x 16 outputs.
template <int R>
void tile(const PackedS8 &w, const int8_t *a, int64_t r0, int64_t panel, int32_t *c,
          int64_t ldc) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i acc[R][2];
  for (int r = 0; r < R; ++r)
    acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  const int8_t *wp = w.panels8() + panel * w.kPad * kPanel;
  // a (recentred) and |a| side by side, so that |a| is a broadcast from
  // memory (a load) rather than a vpabsb per tile step: the loop is bound by
  // the vector ALUs, 8 sign + 8 maddubs + 8 madd + 8 add per 256 products.
  const int8_t *ar = a + r0 * 2 * w.kPad;
  for (int64_t kk = 0; kk < w.kPad; kk += 4) {
    const __m256i w0 = _mm256_load_si256(reinterpret_cast<const __m256i *>(wp + kk * kPanel));
    const __m256i w1 =
        _mm256_load_si256(reinterpret_cast<const __m256i *>(wp + kk * kPanel + 32));
    for (int r = 0; r < R; ++r) {
      int32_t four, fourAbs;
      std::memcpy(&four, ar + r * 2 * w.kPad + kk, 4);
      std::memcpy(&fourAbs, ar + (r * 2 + 1) * w.kPad + kk, 4);
      const __m256i av = _mm256_set1_epi32(four);
      const __m256i aa = _mm256_set1_epi32(fourAbs);
      acc[r][0] = _mm256_add_epi32(acc[r][0], dot4(aa, av, w0, ones));
      acc[r][1] = _mm256_add_epi32(acc[r][1], dot4(aa, av, w1, ones));
    }
  }
  // sum_k q w = sum_k (q - 128) w + 128 * sum_k w.
  const int64_t n0 = panel * kPanel, cols = w.n - n0 < kPanel ? w.n - n0 : kPanel;
  alignas(32) int32_t out[2 * 8];
  for (int r = 0; r < R; ++r) {
    _mm256_store_si256(reinterpret_cast<__m256i *>(out), acc[r][0]);
    _mm256_store_si256(reinterpret_cast<__m256i *>(out + 8), acc[r][1]);
    int32_t *cr = c + (r0 + r) * ldc + n0;
    for (int64_t j = 0; j < cols; ++j)
      cr[j] = out[j] + 128 * w.wsum[n0 + j];
  }
}
} // namespace

std::unique_ptr<PackedS8> packS8(const int8_t *w, int64_t n, int64_t k) {
  auto p = std::make_unique<PackedS8>();
  p->n = n;
  p->k = k;
  p->kPad = (k + 3) / 4 * 4;
  p->panels = (n + kPanel - 1) / kPanel;
  const size_t bytes = (size_t)(p->panels * kPanel * p->kPad);
  p->data = allocWeightMemory(bytes);
  p->wsum.reset(new (std::nothrow) int32_t[n]);
  if (!p->data || !p->wsum)
    return nullptr;
  auto *base = static_cast<int8_t *>(p->data.get());
  std::memset(base, 0, bytes);
  for (int64_t j = 0; j < n; ++j) {
    int32_t sum = 0;
    int8_t *panel = base + (j / kPanel) * p->kPad * kPanel;
    const int64_t col = j % kPanel;
    for (int64_t i = 0; i < k; ++i) {
      const int8_t v = w[j * k + i] == -128 ? -127 : w[j * k + i];
      // k group i / 4, column col, byte i % 4.
      panel[(i / 4) * 4 * kPanel + col * 4 + i % 4] = v;
      sum += v;
    }
    p->wsum[j] = sum;
  }
  return p;
}

void gemmU8S8(const PackedS8 &w, const uint8_t *a, int64_t m, int32_t *c, int8_t *scratch) {
  // Per row: recentred to s8 (q - 128 flips the top bit), then its absolute
  // value as u8 (|-128| = 128), each padded with zeros to kPad.
#pragma omp parallel for schedule(static) if (m * w.k > (1 << 16))
  for (int64_t r = 0; r < m; ++r) {
    int8_t *dst = scratch + r * 2 * w.kPad;
    uint8_t *abs = reinterpret_cast<uint8_t *>(dst + w.kPad);
    const uint8_t *src = a + r * w.k;
    // Two simple loops (vpxor, vpabsb), each vectorized.
    for (int64_t i = 0; i < w.k; ++i)
      dst[i] = (int8_t)(src[i] ^ 0x80);
    for (int64_t i = 0; i < w.k; ++i)
      abs[i] = (uint8_t)(src[i] >= 128 ? src[i] - 128 : 128 - src[i]);
    for (int64_t i = w.k; i < w.kPad; ++i)
      dst[i] = 0, abs[i] = 0;
  }
  // Row blocks of kRowBlock rows x 16-column panels: a block's recentred rows
  // (2 x 64 x K bytes, 256 KB at K 2048) stay in L2 while the panels stream
  // past them; consecutive iterations (one block, neighbouring panels) go to
  // the same thread.
  const int64_t blocks = (m + kRowBlock - 1) / kRowBlock;
#pragma omp parallel for collapse(2) schedule(static) if (m * w.n * w.k > (1 << 18))
  for (int64_t blk = 0; blk < blocks; ++blk)
    for (int64_t panel = 0; panel < w.panels; ++panel) {
      const int64_t r0 = blk * kRowBlock, r1 = std::min(m, r0 + kRowBlock);
      const int64_t full = r0 + (r1 - r0) / kRows * kRows;
      for (int64_t r = r0; r < full; r += kRows)
        tile<kRows>(w, scratch, r, panel, c, w.n);
      switch (r1 - full) {
      case 3:
        tile<3>(w, scratch, full, panel, c, w.n);
        break;
      case 2:
        tile<2>(w, scratch, full, panel, c, w.n);
        break;
      case 1:
        tile<1>(w, scratch, full, panel, c, w.n);
        break;
      default:
        break;
      }
    }
}

} // namespace tfc::cpu
