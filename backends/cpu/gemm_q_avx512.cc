//===- gemm_q_avx512.cc - group-wise int8 and int4 GEMMs, AVX-512 VNNI ----===//
//
// Compiled with AVX-512 (F, BW, VL, DQ) and AVX512_VNNI; called only where
// cpu_isa.cc found them (CpuPaths::avx512Vnni).
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/gemm_q_avx512.h"

#include "backends/cpu/gemm_q4_avx2.h"
#include "backends/cpu/gemm_s8_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

namespace tfc::cpu::avx512 {
namespace {
constexpr int64_t kPanel = 16;    // columns per panel: one zmm of s32 or f32
constexpr int kRows = 8;          // rows per tile: 8 s32 + 8 f32 accumulators
constexpr int64_t kRowBlock = 64; // prefill rows per cache block (a multiple of kRows)
// Every tile starts a row tile of quantizeS8Blocks' layout.
static_assert(kRows == kTileRows && kRowBlock % kRows == 0, "tiles must start row tiles");

inline int32_t load4(const void *p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

/// Independent s32 accumulators per row: a vpdpwssd or vpdpbusd waits about
/// 4 cycles for the previous one into the same register, so a tile of 1 or 2
/// rows (decoding) spreads its inputs over several (their sum is the same).
template <int R> constexpr int kChains = R == 1 ? 4 : R == 2 ? 2 : 1;

/// One tile row's 16 f32 results into y[0, cols).
inline void storeRow(float *y, __m512 v, int64_t cols) {
  _mm512_mask_storeu_ps(y, (__mmask16)((1u << cols) - 1u), v);
}

/// Rows [r0, r0 + R) of one panel of group-wise int8 weights against s16
/// activations in quantizeS16Blocks' row-tile layout (r0 starts a tile; one
/// base pointer reaches the tile's rows: with a pointer per row the 8-row
/// tile spilled general registers every block, 1.08x-1.15x slower). Per 2
/// inputs: one widening of 16 columns' weights to s16, shared by the rows,
/// and per row one broadcast and one vpdpwssd. Per block: y += s32 sum *
/// (scale_w * d), as tileQ8S16 in gemm_s8_avx2.cc.
template <int R>
void tileQ8(const PackedQ8 &w, const int16_t *a, const float *d, int64_t r0, int64_t panel,
            int64_t T, float *y) {
  const int64_t kPad = w.kPad, blocks = w.blocks;
  const int8_t *wp = w.panels8() + panel * kPad * kPanel;
  const float *ws = static_cast<const float *>(w.scales.get()) + panel * blocks * kPanel;
  const int16_t *at = a + r0 * blocks * 32;
  const float *dt = d + r0 * blocks;
  __m512 f[R];
  for (int r = 0; r < R; ++r)
    f[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    constexpr int C = kChains<R>;
    __m512i acc[R][C];
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c)
        acc[r][c] = _mm512_setzero_si512();
    const int16_t *ab = at + b * 32 * T;
    for (int step = 0; step < 16; step += C) { // 2 inputs a step
      for (int c = 0; c < C; ++c) {
        const __m512i wv = _mm512_cvtepi8_epi16(_mm256_loadu_si256(
            reinterpret_cast<const __m256i *>(wp + (b * 32 + 2 * (step + c)) * kPanel)));
        for (int r = 0; r < R; ++r)
          acc[r][c] = _mm512_dpwssd_epi32(
              acc[r][c], wv, _mm512_set1_epi32(load4(ab + (step + c) * 2 * T + r * 2)));
      }
    }
    const __m512 s = _mm512_loadu_ps(ws + b * kPanel);
    for (int r = 0; r < R; ++r) {
      for (int c = 1; c < C; ++c)
        acc[r][0] = _mm512_add_epi32(acc[r][0], acc[r][c]);
      f[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[r][0]),
                             _mm512_mul_ps(s, _mm512_set1_ps(dt[b * T + r])), f[r]);
    }
  }
  const int64_t n0 = panel * kPanel, cols = std::min(kPanel, w.n - n0);
  for (int r = 0; r < R; ++r)
    storeRow(y + (r0 + r) * w.n + n0, f[r], cols);
}

/// Rows [r0, r0 + R) of one panel of group-wise int8 weights against s8
/// activation blocks (8 activation bits) in quantizeS8Blocks' row-tile
/// layout (r0 starts a tile). Per 4 inputs: one 64-byte load of the
/// pair-ordered panel (16 columns x inputs 0-1, then x inputs 2-3), one vpermw
/// into quads (dword lane j: column j's 4 inputs) and one xor making them
/// unsigned (u = q + 128), shared by the rows; per row one broadcast and one
/// vpdpbusd. Per block the s32 sums lose 128 * sum(x codes), which leaves
/// exactly tileQ8's sums of the same codes, then the same f32 scaling: the
/// same bits as gemmQ8S16 on the codes widened.
template <int R>
void tileQ8S8(const PackedQ8 &w, const int8_t *a, const float *d, const int32_t *qsum, int64_t r0,
              int64_t panel, int64_t T, float *y) {
  const int64_t kPad = w.kPad, blocks = w.blocks;
  const int8_t *wp = w.panels8() + panel * kPad * kPanel;
  const float *ws = static_cast<const float *>(w.scales.get()) + panel * blocks * kPanel;
  const int8_t *at = a + r0 * blocks * 32;
  const float *dt = d + r0 * blocks;
  const int32_t *qt = qsum + r0 * blocks;
  // Word 2 j + p of the quads is word 16 p + j of the pairs.
  const __m512i quads = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9,
                                         24, 8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1,
                                         16, 0);
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512 f[R];
  for (int r = 0; r < R; ++r)
    f[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    constexpr int C = kChains<R>;
    __m512i acc[R][C];
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c)
        acc[r][c] = _mm512_setzero_si512();
    const int8_t *ab = at + b * 32 * T;
    for (int step = 0; step < 8; step += C) {
      for (int c = 0; c < C; ++c) {
        const __m512i wv = _mm512_xor_si512(
            _mm512_permutexvar_epi16(
                quads, _mm512_loadu_si512(wp + (b * 32 + (step + c) * 4) * kPanel)),
            bias);
        for (int r = 0; r < R; ++r)
          acc[r][c] = _mm512_dpbusd_epi32(
              acc[r][c], wv, _mm512_set1_epi32(load4(ab + (step + c) * 4 * T + r * 4)));
      }
    }
    const __m512 s = _mm512_loadu_ps(ws + b * kPanel);
    for (int r = 0; r < R; ++r) {
      for (int c = 1; c < C; ++c)
        acc[r][0] = _mm512_add_epi32(acc[r][0], acc[r][c]);
      acc[r][0] = _mm512_sub_epi32(acc[r][0], _mm512_set1_epi32(128 * qt[b * T + r]));
      f[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[r][0]),
                             _mm512_mul_ps(s, _mm512_set1_ps(dt[b * T + r])), f[r]);
    }
  }
  const int64_t n0 = panel * kPanel, cols = std::min(kPanel, w.n - n0);
  for (int r = 0; r < R; ++r)
    storeRow(y + (r0 + r) * w.n + n0, f[r], cols);
}

/// Rows [r0, r0 + R) of one panel of int4 weights against s8 activation
/// blocks in the row-tile layout (r0 starts a tile). Per 8 inputs: one
/// 64-byte load unpacked into the low and high nibbles (16 columns x 4 inputs
/// each), shared by the rows, and per row two broadcasts and two vpdpbusd.
/// Per block: y += scale_w * (S d - 8 d sum q), as gemm_q4_avx2.cc's tile.
template <int R>
void tileQ4(const PackedQ4 &w, const int8_t *q, const float *d, const float *dsum8, int64_t r0,
            int64_t panel, int64_t T, float *y) {
  const int64_t blocks = w.blocks;
  const __m512i low = _mm512_set1_epi8(0x0F);
  const uint8_t *wp = w.panel(panel);
  const float *ws = w.panelScales(panel);
  const int8_t *at8 = q + r0 * blocks * 32;
  const float *dt = d + r0 * blocks;
  const float *st = dsum8 + r0 * blocks;
  __m512 f[R];
  for (int r = 0; r < R; ++r)
    f[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const int8_t *ab = at8 + b * 32 * T;
    // Chains: the low nibbles into acc[r][2c], the high into acc[r][2c + 1]
    // (2 chains for 1 pair of 8 inputs at a time, 4 for 2 pairs...).
    constexpr int C = kChains<R>, P = C >= 2 ? C / 2 : 1;
    __m512i acc[R][2 * P];
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < 2 * P; ++c)
        acc[r][c] = _mm512_setzero_si512();
    for (int64_t kk = b * 32; kk < b * 32 + 32; kk += 8 * P) {
      for (int c = 0; c < P; ++c) {
        // Bytes 32 h + 4 c + t: column 8 h + c, inputs t (low nibble) and 4 +
        // t (high): dword lane j of the load is column j.
        const int64_t at = kk + 8 * c;
        const __m512i v = _mm512_loadu_si512(wp + at * 8);
        const __m512i lo = _mm512_and_si512(v, low);
        const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
        // Inputs at and at + 4 of each row: steps (at % 32) / 4 and the next.
        const int8_t *as = ab + (at % 32) / 4 * 4 * T;
        for (int r = 0; r < R; ++r) {
          acc[r][2 * c] =
              _mm512_dpbusd_epi32(acc[r][2 * c], lo, _mm512_set1_epi32(load4(as + r * 4)));
          acc[r][2 * c + 1] = _mm512_dpbusd_epi32(acc[r][2 * c + 1], hi,
                                                  _mm512_set1_epi32(load4(as + 4 * T + r * 4)));
        }
      }
    }
    const __m512 s = _mm512_loadu_ps(ws + b * kPanel);
    for (int r = 0; r < R; ++r) {
      for (int c = 1; c < 2 * P; ++c)
        acc[r][0] = _mm512_add_epi32(acc[r][0], acc[r][c]);
      f[r] = _mm512_fmadd_ps(s,
                             _mm512_fmsub_ps(_mm512_cvtepi32_ps(acc[r][0]),
                                             _mm512_set1_ps(dt[b * T + r]),
                                             _mm512_set1_ps(st[b * T + r])),
                             f[r]);
    }
  }
  const int64_t n0 = panel * kPanel, cols = std::min(kPanel, w.n - n0);
  for (int r = 0; r < R; ++r)
    storeRow(y + (r0 + r) * w.n + n0, f[r], cols);
}

/// Every panel over every row, with tileAt(R, r0, panel) per tile of R <=
/// kRows rows. When A (rowBytes a row) fits in L2, as in decoding, the panels
/// are the outer loop: each is read from memory once and meets every row
/// while in L1. Otherwise row blocks that stay in L2 while the panels stream
/// past them. Parallel over panels (OpenMP).
template <typename TileAt>
void overTiles(int64_t panels, int64_t n, int64_t k, int64_t m, int64_t rowBytes,
               TileAt &&tileAt) {
  const bool par = m * n * k > (1 << 18);
  auto rows = [&](int64_t r0, int64_t r1, int64_t panel) {
    for (int64_t r = r0; r < r1; r += kRows)
      tileAt(std::min<int64_t>(kRows, r1 - r), r, panel);
  };
  if (m * rowBytes <= (int64_t{1} << 18)) {
#pragma omp parallel for schedule(static) if (par)
    for (int64_t panel = 0; panel < panels; ++panel)
      rows(0, m, panel);
    return;
  }
  const int64_t blocks = (m + kRowBlock - 1) / kRowBlock;
#pragma omp parallel for collapse(2) schedule(static) if (par)
  for (int64_t blk = 0; blk < blocks; ++blk)
    for (int64_t panel = 0; panel < panels; ++panel)
      rows(blk * kRowBlock, std::min(m, (blk + 1) * kRowBlock), panel);
}

using Q8Tile = void (*)(const PackedQ8 &, const int16_t *, const float *, int64_t, int64_t,
                        int64_t, float *);
constexpr Q8Tile kQ8Tiles[kRows] = {tileQ8<1>, tileQ8<2>, tileQ8<3>, tileQ8<4>,
                                    tileQ8<5>, tileQ8<6>, tileQ8<7>, tileQ8<8>};
using Q8S8Tile = void (*)(const PackedQ8 &, const int8_t *, const float *, const int32_t *,
                          int64_t, int64_t, int64_t, float *);
constexpr Q8S8Tile kQ8S8Tiles[kRows] = {tileQ8S8<1>, tileQ8S8<2>, tileQ8S8<3>, tileQ8S8<4>,
                                        tileQ8S8<5>, tileQ8S8<6>, tileQ8S8<7>, tileQ8S8<8>};
using Q4Tile = void (*)(const PackedQ4 &, const int8_t *, const float *, const float *, int64_t,
                        int64_t, int64_t, float *);
constexpr Q4Tile kQ4Tiles[kRows] = {tileQ4<1>, tileQ4<2>, tileQ4<3>, tileQ4<4>,
                                    tileQ4<5>, tileQ4<6>, tileQ4<7>, tileQ4<8>};
} // namespace

void gemmQ8S16(const PackedQ8 &w, const int16_t *q, const float *d, int64_t m, float *y) {
  overTiles(w.panels, w.n, w.k, m, w.kPad * (int64_t)sizeof(int16_t),
            [&](int64_t rows, int64_t r0, int64_t panel) {
              kQ8Tiles[rows - 1](w, q, d, r0, panel, tileHeight(m), y);
            });
}

void gemmQ8S8(const PackedQ8 &w, const int8_t *q, const float *d, const int32_t *qsum, int64_t m,
              float *y) {
  overTiles(w.panels, w.n, w.k, m, w.kPad, [&](int64_t rows, int64_t r0, int64_t panel) {
    kQ8S8Tiles[rows - 1](w, q, d, qsum, r0, panel, tileHeight(m), y);
  });
}

void gemmQ4(const PackedQ4 &w, const int8_t *q, const float *d, const float *dsum8, int64_t rows,
            float *y) {
  overTiles(w.panels, w.n, w.k, rows, w.kPad, [&](int64_t r, int64_t r0, int64_t panel) {
    kQ4Tiles[r - 1](w, q, d, dsum8, r0, panel, tileHeight(rows), y);
  });
}

} // namespace tfc::cpu::avx512
