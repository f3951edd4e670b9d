//===- AttentionCpuTest.cpp - Tests for the fused CPU attention kernel ----===//
//
// tfc::cpu::attention() must compute what the unfused tutorial code computes:
// scores = scale * Q K^T in f32, masked_fill(mask, mask_value) or + additive,
// softmax over the keys, times V. The reference (the shared one of
// tests/reference/Reference.h) does exactly that, naively: it materializes
// every score (rounded to f32 like PyTorch's), and does the softmax and the
// weighted sum in double. Inputs are uniform in
// [-1, 1], so outputs are O(1) and the bound is an absolute 1e-5.
//
// Besides the numbers, the cases pin what a fused kernel most easily gets
// wrong: block edges (lengths 1..300 around the 64-row blocks), skipped
// blocks (causal and all-padding key blocks, including mask values that make
// them count), rows whose keys are all masked (uniform average with a finite
// fill, NaN with -inf, as PyTorch), strides (packed QKV, gaps filled with NaN
// so that reading them shows), out-of-bounds writes (sentinels around and
// between the output rows), and thread-count independence.
//
// Incremental decoding: a query offset (q_pos_offset) under the causal masks,
// K and V read from a KV cache [batch, max_len, D] through the batch strides
// with the rows past kv_len NaN, query and output batches with gaps between
// them, and S decode steps against one full causal pass over S positions.
//
//===----------------------------------------------------------------------===//

#include "backends/cpu/attention_cpu.h"
#include "tests/reference/Reference.h"

#include <gtest/gtest.h>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace tfc::cpu {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kSentinel = 12345.0f;
constexpr int64_t kGuard = 64;
constexpr double kTol = 1e-5;

/// How the key-padding tokens of each batch element are laid out.
enum class PadPattern { None, Trailing, Random, All, Leading, Mixed };

/// One attention call: shapes, mask and layout.
struct Case {
  int64_t B = 1, Sq = 1, Sk = 1, H = 1, dk = 8, dv = 0;
  MaskKind mask = TFC_MASK_NONE;
  float maskValue = -1e9f;
  float scale = 0.0f; // 0: 1/sqrt(dk)
  int64_t padId = 0;
  PadPattern pad = PadPattern::Mixed;
  bool addFullB = true, addFullH = true, addFullQ = true;
  bool addInfRows = false; // make some additive rows entirely -inf
  bool packed = false;     // one [B, S, 3D] buffer (needs Sq == Sk, dv == dk)
  int64_t extraStride = 0; // unused floats (NaN) at the end of every input row
  int64_t outExtra = 0;    // unused floats (sentinel) at the end of every output row
  int64_t qPosOffset = 0;  // AttentionParams::q_pos_offset
  // > Sk: K, V and the key tokens are read from a cache of kvMaxLen rows per
  // batch (K and V rows Sk .. kvMaxLen-1 are NaN) through the batch strides.
  int64_t kvMaxLen = 0;
  // Rows between the batches of the query (NaN) and of the output (sentinel),
  // through the batch strides.
  int64_t batchGapRows = 0;
  float inputMagnitude = 1.0f;
  uint32_t seed = 1;

  std::string str() const {
    std::ostringstream os;
    os << "B=" << B << " Sq=" << Sq << " Sk=" << Sk << " H=" << H << " dk=" << dk
       << " dv=" << (dv ? dv : dk) << " mask=" << static_cast<int>(mask) << " fill=" << maskValue
       << " scale=" << scale << " pad=" << static_cast<int>(pad) << " add=" << addFullB
       << addFullH << addFullQ << " packed=" << packed << " extra=" << extraStride
       << " outExtra=" << outExtra << " qPosOffset=" << qPosOffset << " kvMaxLen=" << kvMaxLen
       << " batchGapRows=" << batchGapRows << " seed=" << seed;
    return os.str();
  }
};

/// Inputs, output and reference of a case.
struct AttnRun {
  Case c;
  int64_t dv = 0, D = 0, Dv = 0;
  std::vector<float> qBuf, kBuf, vBuf; // kBuf/vBuf unused when packed
  const float *q = nullptr, *k = nullptr, *v = nullptr;
  int64_t qs = 0, ks = 0, vs = 0, os = 0;
  // Batch strides: of q and out, of k and v, of the key tokens.
  int64_t qbs = 0, kbs = 0, vbs = 0, obs = 0, tbs = 0;
  std::vector<int64_t> tokens;
  std::vector<float> add;
  int64_t asb = 0, ash = 0, asq = 0;
  std::vector<float> outBuf; // kGuard + B*obs + kGuard
  float scale = 0;

  float *out() { return outBuf.data() + kGuard; }
  /// Output row i of batch b.
  float *outRow(int64_t b, int64_t i) { return out() + b * obs + i * os; }
  const float *qRow(int64_t b, int64_t i) const { return q + b * qbs + i * qs; }
  const float *kRow(int64_t b, int64_t j) const { return k + b * kbs + j * ks; }
  const float *vRow(int64_t b, int64_t j) const { return v + b * vbs + j * vs; }
  int64_t token(int64_t b, int64_t j) const { return tokens[b * tbs + j]; }
  AttentionParams params() const {
    AttentionParams p;
    p.batch = c.B;
    p.q_len = c.Sq;
    p.kv_len = c.Sk;
    p.heads = c.H;
    p.head_dim = c.dk;
    p.v_head_dim = c.dv;
    p.q_row_stride = qs;
    p.k_row_stride = ks;
    p.v_row_stride = vs;
    p.out_row_stride = os;
    p.scale = scale;
    p.mask = c.mask;
    p.mask_value = c.maskValue;
    p.pad_id = c.padId;
    p.key_tokens = tokens.empty() ? nullptr : tokens.data();
    p.additive = add.empty() ? nullptr : add.data();
    p.add_stride_b = asb;
    p.add_stride_h = ash;
    p.add_stride_q = asq;
    p.q_pos_offset = c.qPosOffset;
    // The defaults (0) where the layout is the default one, so that they are
    // tested too.
    if (c.kvMaxLen > 0) {
      p.k_batch_stride = kbs;
      p.v_batch_stride = vbs;
      p.key_tokens_batch_stride = tbs;
    }
    if (c.batchGapRows > 0) {
      p.q_batch_stride = qbs;
      p.out_batch_stride = obs;
    }
    return p;
  }
};

bool usesTokens(MaskKind m) { return m == TFC_MASK_KEY_PADDING || m == TFC_MASK_PADDING_CAUSAL; }

AttnRun makeRun(const Case &c) {
  AttnRun r;
  r.c = c;
  r.dv = c.dv ? c.dv : c.dk;
  r.D = c.H * c.dk;
  r.Dv = c.H * r.dv;
  r.scale = c.scale != 0.0f ? c.scale : 1.0f / std::sqrt(static_cast<float>(c.dk));
  std::mt19937 gen(c.seed);
  std::uniform_real_distribution<float> uni(-c.inputMagnitude, c.inputMagnitude);
  // Fills the first `used` floats of the first `valid` rows of each of the
  // `batches` batches of `rows` rows with random values, everything else with
  // NaN: a kernel that reads past its columns or its rows produces NaN.
  auto fillRows = [&](std::vector<float> &buf, int64_t batches, int64_t rows, int64_t valid,
                      int64_t stride, int64_t used) {
    buf.assign(batches * rows * stride, kNaN);
    for (int64_t b = 0; b < batches; ++b)
      for (int64_t i = 0; i < valid; ++i)
        for (int64_t j = 0; j < used; ++j)
          buf[(b * rows + i) * stride + j] = uni(gen);
  };
  const int64_t kvRows = std::max(c.Sk, c.kvMaxLen); // per batch
  const int64_t qRows = c.Sq + c.batchGapRows;        // per batch, q and out
  if (c.packed) {
    EXPECT_TRUE(c.kvMaxLen == 0 && c.batchGapRows == 0) << "not with packed";
    r.qs = r.ks = r.vs = 3 * r.D + c.extraStride;
    fillRows(r.qBuf, c.B, c.Sq, c.Sq, r.qs, 3 * r.D);
    r.q = r.qBuf.data();
    r.k = r.qBuf.data() + r.D;
    r.v = r.qBuf.data() + 2 * r.D;
    r.qbs = r.kbs = r.vbs = c.Sq * r.qs;
  } else {
    r.qs = r.D + c.extraStride;
    r.ks = r.D + c.extraStride;
    r.vs = r.Dv + c.extraStride;
    fillRows(r.qBuf, c.B, qRows, c.Sq, r.qs, r.D);
    fillRows(r.kBuf, c.B, kvRows, c.Sk, r.ks, r.D);
    fillRows(r.vBuf, c.B, kvRows, c.Sk, r.vs, r.Dv);
    r.q = r.qBuf.data();
    r.k = r.kBuf.data();
    r.v = r.vBuf.data();
    r.qbs = qRows * r.qs;
    r.kbs = kvRows * r.ks;
    r.vbs = kvRows * r.vs;
  }
  r.os = r.Dv + c.outExtra;
  r.obs = qRows * r.os;
  r.tbs = kvRows;
  r.outBuf.assign(2 * kGuard + c.B * r.obs, kSentinel);

  if (usesTokens(c.mask)) {
    std::uniform_int_distribution<int64_t> tok(1, 40);
    // Past Sk (a cache's unused rows): the pad id. The kernel must not look.
    r.tokens.assign(c.B * r.tbs, c.padId);
    for (int64_t b = 0; b < c.B; ++b) {
      PadPattern pat = c.pad;
      if (pat == PadPattern::Mixed) // a different pattern per batch element
        pat = static_cast<PadPattern>((b + c.seed) % 5);
      std::uniform_int_distribution<int64_t> len(0, c.Sk);
      const int64_t n = len(gen);
      for (int64_t j = 0; j < c.Sk; ++j) {
        bool isPad = false;
        switch (pat) {
        case PadPattern::None:
        case PadPattern::Mixed:
          break;
        case PadPattern::Trailing:
          isPad = j >= c.Sk - n;
          break;
        case PadPattern::Random:
          isPad = tok(gen) <= 10;
          break;
        case PadPattern::All:
          isPad = true;
          break;
        case PadPattern::Leading:
          isPad = j < n;
          break;
        }
        int64_t t = tok(gen) + c.padId; // never the pad id
        r.tokens[b * r.tbs + j] = isPad ? c.padId : t;
      }
    }
  }

  if (c.mask == TFC_MASK_ADDITIVE) {
    const int64_t nb = c.addFullB ? c.B : 1, nh = c.addFullH ? c.H : 1,
                  nq = c.addFullQ ? c.Sq : 1;
    r.asq = c.addFullQ ? c.Sk : 0;
    r.ash = c.addFullH ? nq * c.Sk : 0;
    r.asb = c.addFullB ? nh * nq * c.Sk : 0;
    r.add.resize(nb * nh * nq * c.Sk);
    std::uniform_real_distribution<float> am(-3.0f, 0.0f);
    std::uniform_int_distribution<int> pick(0, 19);
    for (float &a : r.add) {
      const int x = pick(gen);
      a = x == 0 ? -kInf : x == 1 ? -1e9f : am(gen);
    }
    if (c.addInfRows) {
      // Some (b, h, i) rows of the tensor are all -inf, some all -1e9, and
      // some -inf over their first 100 keys only (a row whose first key
      // block has nothing but -inf must still pick up the later keys).
      for (int64_t row = 0; row < nb * nh * nq; ++row) {
        auto first = r.add.begin() + row * c.Sk;
        if (row % 5 == 2)
          std::fill(first, first + c.Sk, -kInf);
        else if (row % 7 == 3)
          std::fill(first, first + c.Sk, -1e9f);
        else if (row % 3 == 1)
          std::fill(first, first + std::min<int64_t>(100, c.Sk), -kInf);
      }
    }
  }
  return r;
}

/// The unfused computation (the shared reference, tests/reference/Reference.h):
/// [Sq, Sk] scores rounded to f32 per (b, h), then a double softmax and
/// weighted sum. Returns [B, Sq, Dv].
std::vector<double> reference(const AttnRun &r) {
  const Case &c = r.c;
  // The buffers in double, with their layout (and NaN gaps) unchanged.
  const std::vector<double> qd(r.qBuf.begin(), r.qBuf.end());
  const std::vector<double> kd(r.kBuf.begin(), r.kBuf.end());
  const std::vector<double> vd(r.vBuf.begin(), r.vBuf.end());
  auto inQ = [&](const float *p) { return qd.data() + (p - r.qBuf.data()); };
  ref::Attention a;
  a.batch = c.B;
  a.qLen = c.Sq;
  a.kvLen = c.Sk;
  a.heads = c.H;
  a.headDim = c.dk;
  a.vHeadDim = r.dv;
  a.q = inQ(r.q);
  a.k = c.packed ? inQ(r.k) : kd.data() + (r.k - r.kBuf.data());
  a.v = c.packed ? inQ(r.v) : vd.data() + (r.v - r.vBuf.data());
  a.qRowStride = r.qs;
  a.kRowStride = r.ks;
  a.vRowStride = r.vs;
  a.qBatchStride = r.qbs;
  a.kBatchStride = r.kbs;
  a.vBatchStride = r.vbs;
  a.scale = r.scale;
  a.mask = static_cast<ref::Mask>(c.mask);
  a.maskValue = c.maskValue;
  a.keyToken = [&](int64_t b, int64_t j) { return r.token(b, j); };
  a.padId = c.padId;
  a.additive = [&](int64_t b, int64_t h, int64_t i, int64_t j) {
    return static_cast<double>(r.add[b * r.asb + h * r.ash + i * r.asq + j]);
  };
  a.qPosOffset = c.qPosOffset;
  a.f32Scores = true;
  return ref::attention(a);
}

/// Checks the sentinels before, after and between the output rows.
void expectGuardsIntact(AttnRun &r) {
  const Case &c = r.c;
  const float *buf = r.outBuf.data();
  for (int64_t g = 0; g < kGuard; ++g) {
    ASSERT_EQ(buf[g], kSentinel) << "write before the output, " << c.str();
    ASSERT_EQ(buf[kGuard + c.B * r.obs + g], kSentinel) << "write after the output, "
                                                          << c.str();
  }
  for (int64_t b = 0; b < c.B; ++b) {
    for (int64_t i = 0; i < c.Sq; ++i)
      for (int64_t j = r.Dv; j < r.os; ++j)
        ASSERT_EQ(r.outRow(b, i)[j], kSentinel) << "write into a row gap, " << c.str();
    for (int64_t i = c.Sq; i < c.Sq + c.batchGapRows; ++i)
      for (int64_t j = 0; j < r.os; ++j)
        ASSERT_EQ(r.outRow(b, i)[j], kSentinel) << "write between batches, " << c.str();
  }
}

/// Runs the kernel on a case and compares with the reference; returns the
/// largest absolute error.
double check(const Case &c, double tol = kTol) {
  AttnRun r = makeRun(c);
  attention(r.params(), r.q, r.k, r.v, r.out());
  expectGuardsIntact(r);
  const std::vector<double> ref = reference(r);
  double maxErr = 0;
  int reported = 0;
  for (int64_t row = 0; row < c.B * c.Sq; ++row)
    for (int64_t j = 0; j < r.Dv; ++j) {
      const double want = ref[row * r.Dv + j];
      const float got = r.outRow(row / c.Sq, row % c.Sq)[j];
      if (std::isnan(want)) {
        if (!std::isnan(got) && reported++ < 5)
          ADD_FAILURE() << "expected NaN at row " << row << " col " << j << ", got " << got
                        << "; " << c.str();
        continue;
      }
      if (!std::isfinite(got)) {
        if (reported++ < 5)
          ADD_FAILURE() << "non-finite " << got << " at row " << row << " col " << j
                        << " (want " << want << "); " << c.str();
        continue;
      }
      const double err = std::fabs(got - want);
      maxErr = std::max(maxErr, err);
      if (err > tol && reported++ < 5)
        ADD_FAILURE() << "row " << row << " col " << j << ": got " << got << ", want " << want
                      << " (err " << err << "); " << c.str();
    }
  return maxErr;
}

/// Query lengths around the 64-row blocks.
const int64_t kLens[] = {1, 2, 7, 31, 32, 33, 63, 64, 65, 100, 127, 128, 129, 191, 300};

TEST(AttentionCpu, NoMaskShapes) {
  uint32_t seed = 1;
  for (int64_t dk : {8, 16, 64, 80})
    for (int64_t sq : kLens) {
      Case c;
      c.B = 1 + seed % 3;
      c.H = dk >= 64 ? 1 + seed % 3 : 1 + seed % 8;
      c.dk = dk;
      c.Sq = sq;
      c.Sk = kLens[(seed * 7) % std::size(kLens)]; // != Sq mostly
      c.seed = seed++;
      check(c);
    }
}

TEST(AttentionCpu, KeyLengthsAroundBlocks) {
  uint32_t seed = 100;
  for (int64_t sk : kLens) {
    Case c;
    c.B = 2;
    c.H = 3;
    c.dk = 16;
    c.Sq = 5;
    c.Sk = sk;
    c.seed = seed++;
    check(c);
  }
}

TEST(AttentionCpu, KeyPadding) {
  uint32_t seed = 200;
  for (PadPattern pat : {PadPattern::None, PadPattern::Trailing, PadPattern::Random,
                         PadPattern::Leading, PadPattern::Mixed})
    for (float fill : {-1e9f, -kInf})
      for (int64_t sk : {1, 33, 64, 130, 300}) {
        Case c;
        c.mask = TFC_MASK_KEY_PADDING;
        c.pad = pat;
        c.maskValue = fill;
        c.B = 3;
        c.H = 2;
        c.dk = 16;
        c.Sq = 70;
        c.Sk = sk;
        c.padId = seed % 2 ? 0 : -7;
        c.seed = seed++;
        check(c);
      }
}

TEST(AttentionCpu, Causal) {
  uint32_t seed = 300;
  for (float fill : {-1e9f, -kInf})
    for (int64_t s : kLens) {
      Case c;
      c.mask = TFC_MASK_CAUSAL;
      c.maskValue = fill;
      c.B = 1 + seed % 2;
      c.H = 1 + seed % 4;
      c.dk = seed % 3 ? 16 : 64;
      c.Sq = c.Sk = s;
      c.seed = seed++;
      check(c);
    }
}

TEST(AttentionCpu, PaddingCausal) {
  uint32_t seed = 400;
  for (PadPattern pat : {PadPattern::Trailing, PadPattern::Leading, PadPattern::Random,
                         PadPattern::Mixed})
    for (float fill : {-1e9f, -kInf})
      for (int64_t s : {1, 17, 64, 100, 200}) {
        Case c;
        c.mask = TFC_MASK_PADDING_CAUSAL;
        c.pad = pat;
        c.maskValue = fill;
        c.B = 3;
        c.H = 2;
        c.dk = 8;
        c.Sq = c.Sk = s;
        c.seed = seed++;
        check(c);
      }
}

TEST(AttentionCpu, AdditiveBroadcasts) {
  uint32_t seed = 500;
  for (int bits = 0; bits < 8; ++bits)
    for (int64_t sq : {1, 45, 130}) {
      Case c;
      c.mask = TFC_MASK_ADDITIVE;
      c.addFullB = bits & 1;
      c.addFullH = bits & 2;
      c.addFullQ = bits & 4;
      c.B = 2;
      c.H = 3;
      c.dk = 16;
      c.Sq = sq;
      c.Sk = 77 + sq % 100;
      c.seed = seed++;
      check(c);
    }
}

TEST(AttentionCpu, AdditiveAllMinusInfRowIsNaNAndAllMinus1e9RowIsUniform) {
  for (int bits : {0, 7, 5}) {
    Case c;
    c.mask = TFC_MASK_ADDITIVE;
    c.addInfRows = true;
    c.addFullB = bits & 1;
    c.addFullH = bits & 2;
    c.addFullQ = bits & 4;
    c.B = 2;
    c.H = 4;
    c.dk = 16;
    c.Sq = 40;
    c.Sk = 150;
    c.seed = 600 + bits;
    check(c); // the reference holds the NaN rows and the uniform rows
  }
}

TEST(AttentionCpu, PackedQkv) {
  uint32_t seed = 700;
  for (MaskKind m : {TFC_MASK_NONE, TFC_MASK_KEY_PADDING, TFC_MASK_CAUSAL,
                     TFC_MASK_PADDING_CAUSAL, TFC_MASK_ADDITIVE})
    for (int64_t s : {1, 65, 150}) {
      Case c;
      c.mask = m;
      c.packed = true;
      c.B = 2;
      c.H = 8;
      c.dk = 8;
      c.Sq = c.Sk = s;
      c.extraStride = seed % 2 ? 0 : 3;
      c.seed = seed++;
      check(c);
    }
  Case c;
  c.packed = true;
  c.mask = TFC_MASK_CAUSAL;
  c.B = 1;
  c.H = 2;
  c.dk = 80;
  c.Sq = c.Sk = 129;
  check(c);
}

TEST(AttentionCpu, StridedRowsAndOutputGaps) {
  uint32_t seed = 800;
  for (MaskKind m : {TFC_MASK_NONE, TFC_MASK_PADDING_CAUSAL, TFC_MASK_ADDITIVE}) {
    Case c;
    c.mask = m;
    c.B = 2;
    c.H = 3;
    c.dk = 16;
    c.Sq = c.Sk = 70;
    c.extraStride = 5;
    c.outExtra = 7;
    c.seed = seed++;
    check(c);
  }
}

TEST(AttentionCpu, HeadDims) {
  uint32_t seed = 900;
  for (int64_t dk : {1, 3, 8, 16, 17, 32, 64, 80, 96, 128}) {
    Case c;
    c.mask = TFC_MASK_CAUSAL;
    c.B = 1;
    c.H = 2;
    c.dk = dk;
    c.Sq = c.Sk = 70;
    c.seed = seed++;
    check(c);
  }
}

TEST(AttentionCpu, ValueHeadDimDiffers) {
  uint32_t seed = 1000;
  for (int64_t dv : {1, 8, 24, 64, 80}) {
    Case c;
    c.mask = TFC_MASK_KEY_PADDING;
    c.B = 2;
    c.H = 2;
    c.dk = 16;
    c.dv = dv;
    c.Sq = 33;
    c.Sk = 90;
    c.seed = seed++;
    check(c);
  }
}

TEST(AttentionCpu, ScaleValues) {
  uint32_t seed = 1100;
  for (float scale : {1.0f, 0.125f, 1.0f / std::sqrt(80.0f), 0.02f, 2.0f})
    for (MaskKind m : {TFC_MASK_NONE, TFC_MASK_CAUSAL}) {
      Case c;
      c.mask = m;
      c.scale = scale;
      c.B = 1;
      c.H = 2;
      c.dk = 80;
      c.Sq = c.Sk = 100;
      c.seed = seed++;
      check(c);
    }
}

TEST(AttentionCpu, LargeScoresRescaleTheAccumulator) {
  // Scores up to ~45: the running maximum jumps between key blocks, so the
  // online rescaling is exercised hard. Score rounding in f32 alone gives
  // errors of a few 1e-6 here.
  uint32_t seed = 1200;
  for (MaskKind m : {TFC_MASK_NONE, TFC_MASK_CAUSAL}) {
    Case c;
    c.mask = m;
    c.scale = 1.0f;
    c.inputMagnitude = 1.5f;
    c.B = 1;
    c.H = 2;
    c.dk = 64;
    c.Sq = c.Sk = 260;
    c.seed = seed++;
    // Values are O(1.5) here, so the bound scales with them.
    check(c, 1.5 * kTol);
  }
}

TEST(AttentionCpu, MaskValueNearTheScoresCountsSkippedBlocks) {
  // With a fill of 0 or -2 the masked keys keep real weight, so the key blocks
  // a causal or padding mask lets the kernel skip must be accounted for.
  uint32_t seed = 1300;
  for (float fill : {0.0f, -2.0f, 3.0f})
    for (MaskKind m : {TFC_MASK_CAUSAL, TFC_MASK_KEY_PADDING, TFC_MASK_PADDING_CAUSAL}) {
      Case c;
      c.mask = m;
      c.maskValue = fill;
      c.pad = PadPattern::Mixed;
      c.B = 5;
      c.H = 2;
      c.dk = 16;
      c.Sq = c.Sk = 200;
      c.seed = seed++;
      check(c);
    }
}

/// Sets up a KeyPadding call where batch 0 is entirely padding.
AttnRun allPaddedRun(float fill) {
  Case c;
  c.mask = TFC_MASK_KEY_PADDING;
  c.pad = PadPattern::All;
  c.maskValue = fill;
  c.B = 1;
  c.H = 3;
  c.dk = 16;
  c.Sq = 10;
  c.Sk = 300;
  return makeRun(c);
}

TEST(AttentionCpu, FullyMaskedFiniteFillIsUniformAverage) {
  AttnRun r = allPaddedRun(-1e9f);
  attention(r.params(), r.q, r.k, r.v, r.out());
  expectGuardsIntact(r);
  for (int64_t i = 0; i < r.c.Sq; ++i)
    for (int64_t col = 0; col < r.Dv; ++col) {
      double mean = 0;
      for (int64_t j = 0; j < r.c.Sk; ++j)
        mean += r.v[j * r.vs + col];
      mean /= r.c.Sk;
      EXPECT_NEAR(r.out()[i * r.os + col], mean, kTol) << "row " << i << " col " << col;
    }

  // PaddingCausal: a row whose visible keys (j <= i) are all padding averages
  // over all keys, including the causally hidden ones, as masked_fill does.
  Case c;
  c.mask = TFC_MASK_PADDING_CAUSAL;
  c.pad = PadPattern::None;
  c.B = 1;
  c.H = 1;
  c.dk = 8;
  c.Sq = c.Sk = 200;
  AttnRun p = makeRun(c);
  for (int64_t j = 0; j < 70; ++j) // rows 0..69 see only padding
    p.tokens[j] = c.padId;
  attention(p.params(), p.q, p.k, p.v, p.out());
  for (int64_t col = 0; col < p.Dv; ++col) {
    double mean = 0;
    for (int64_t j = 0; j < c.Sk; ++j)
      mean += p.v[j * p.vs + col];
    mean /= c.Sk;
    for (int64_t i : {0, 1, 63, 64, 69})
      EXPECT_NEAR(p.out()[i * p.os + col], mean, kTol) << "row " << i << " col " << col;
  }
  const std::vector<double> ref = reference(p);
  for (int64_t i = 70; i < c.Sq; ++i)
    for (int64_t col = 0; col < p.Dv; ++col)
      EXPECT_NEAR(p.out()[i * p.os + col], ref[i * p.Dv + col], kTol);
}

TEST(AttentionCpu, FullyMaskedMinusInfFillIsNaN) {
  AttnRun r = allPaddedRun(-kInf);
  attention(r.params(), r.q, r.k, r.v, r.out());
  expectGuardsIntact(r);
  for (int64_t i = 0; i < r.c.Sq; ++i)
    for (int64_t col = 0; col < r.Dv; ++col)
      EXPECT_TRUE(std::isnan(r.out()[i * r.os + col])) << "row " << i << " col " << col;

  // Only the fully masked rows are NaN.
  Case c;
  c.mask = TFC_MASK_PADDING_CAUSAL;
  c.maskValue = -kInf;
  c.pad = PadPattern::None;
  c.B = 1;
  c.H = 2;
  c.dk = 8;
  c.Sq = c.Sk = 100;
  AttnRun p = makeRun(c);
  for (int64_t j = 0; j < 66; ++j)
    p.tokens[j] = c.padId;
  attention(p.params(), p.q, p.k, p.v, p.out());
  for (int64_t i = 0; i < c.Sq; ++i)
    for (int64_t col = 0; col < p.Dv; ++col)
      EXPECT_EQ(std::isnan(p.out()[i * p.os + col]), i < 66) << "row " << i;
}

TEST(AttentionCpu, DecodeShapes) {
  // One query against a long key sequence (the incremental-decoding shape).
  uint32_t seed = 1400;
  for (MaskKind m : {TFC_MASK_NONE, TFC_MASK_KEY_PADDING, TFC_MASK_ADDITIVE})
    for (int64_t sk : {1, 64, 65, 300}) {
      Case c;
      c.mask = m;
      c.B = 3;
      c.H = 8;
      c.dk = 64;
      c.Sq = 1;
      c.Sk = sk;
      c.seed = seed++;
      check(c);
    }
}

TEST(AttentionCpu, EmptyKeysGiveZerosAndEmptyQueriesWriteNothing) {
  Case c;
  c.B = 2;
  c.H = 2;
  c.dk = 8;
  c.Sq = 3;
  c.Sk = 1;
  c.outExtra = 2;
  AttnRun r = makeRun(c);
  AttentionParams p = r.params();
  p.kv_len = 0;
  attention(p, r.q, r.k, r.v, r.out());
  expectGuardsIntact(r);
  for (int64_t row = 0; row < c.B * c.Sq; ++row)
    for (int64_t col = 0; col < r.Dv; ++col)
      EXPECT_EQ(r.out()[row * r.os + col], 0.0f);

  AttnRun e = makeRun(c);
  p = e.params();
  p.q_len = 0;
  attention(p, e.q, e.k, e.v, e.out());
  for (float x : e.outBuf)
    ASSERT_EQ(x, kSentinel);
}

TEST(AttentionCpu, DeterministicAndThreadCountIndependent) {
  const int saved = omp_get_max_threads();
  for (MaskKind m : {TFC_MASK_NONE, TFC_MASK_PADDING_CAUSAL, TFC_MASK_ADDITIVE}) {
    Case c;
    c.mask = m;
    c.B = 3;
    c.H = 4;
    c.dk = 64;
    c.Sq = c.Sk = 200;
    c.seed = 1500 + static_cast<uint32_t>(m);
    AttnRun r = makeRun(c);
    std::vector<std::vector<float>> results;
    for (int threads : {1, 2, 2, 1, 3}) {
      omp_set_num_threads(threads);
      std::fill(r.outBuf.begin(), r.outBuf.end(), kSentinel);
      attention(r.params(), r.q, r.k, r.v, r.out());
      results.push_back(r.outBuf);
    }
    // Bitwise: the work split must not change the arithmetic at all.
    for (size_t i = 1; i < results.size(); ++i)
      EXPECT_EQ(0, std::memcmp(results[0].data(), results[i].data(),
                               results[0].size() * sizeof(float)))
          << "run " << i << " differs; " << c.str();
  }
  omp_set_num_threads(saved);
}

// --- Incremental decoding ---------------------------------------------------

TEST(AttentionCpu, CausalQueryOffsetOverKvCache) {
  // Query row i at position i + q_pos_offset against the first kv_len rows of
  // a [B, max_len, D] cache whose other rows are NaN: one decoding step
  // (q_len 1), a few new tokens at once, and a chunk of a prompt, at lengths
  // that are not multiples of the 64-key blocks or the vector width. Most
  // cases are the decoder's (offset = kv_len - q_len); some leave keys after
  // the last query (a prefix of the cache), and one offset is negative.
  uint32_t seed = 1600;
  for (MaskKind m : {TFC_MASK_CAUSAL, TFC_MASK_PADDING_CAUSAL})
    for (float fill : {-1e9f, -kInf})
      for (int64_t sq : {1, 2, 3, 4, 5, 17, 70})
        for (int64_t sk : {1, 37, 100, 131, 300})
          for (int64_t extra : {0, 29}) { // keys after the last query's position
            if (sk - sq - extra < 0 || (extra > 0 && sq != 1 && sq != 17))
              continue;
            Case c;
            c.mask = m;
            c.maskValue = fill;
            c.pad = PadPattern::Mixed;
            c.B = 2 + seed % 2;
            c.H = sq == 1 ? 8 : 2;
            c.dk = seed % 3 ? 64 : 16;
            c.Sq = sq;
            c.Sk = sk;
            c.qPosOffset = sk - sq - extra;
            c.kvMaxLen = sk + 1 + seed % 50;
            c.batchGapRows = seed % 2 ? 0 : 2;
            c.seed = seed++;
            check(c);
          }
  // Query rows before the first key (negative offset): rows i < -offset see
  // nothing, so they are NaN with -inf and the uniform average with -1e9.
  for (float fill : {-1e9f, -kInf}) {
    Case c;
    c.mask = TFC_MASK_CAUSAL;
    c.maskValue = fill;
    c.B = 2;
    c.H = 3;
    c.dk = 16;
    c.Sq = 70;
    c.Sk = 90;
    c.qPosOffset = -5;
    c.kvMaxLen = 128;
    c.seed = seed++;
    check(c);
  }
}

TEST(AttentionCpu, BatchStridesEveryMask) {
  // The same cache layout under every mask, at decode and prefill lengths,
  // with head_dim and value widths that leave partial vectors, and packed
  // key tokens [B, max_len] (key_tokens_batch_stride = max_len).
  uint32_t seed = 1700;
  for (MaskKind m : {TFC_MASK_NONE, TFC_MASK_KEY_PADDING, TFC_MASK_CAUSAL,
                     TFC_MASK_PADDING_CAUSAL, TFC_MASK_ADDITIVE})
    for (int64_t sq : {1, 3, 66})
      for (int64_t dk : {8, 20, 64}) {
        Case c;
        c.mask = m;
        c.B = 3;
        c.H = 4;
        c.dk = dk;
        c.dv = dk == 20 ? 12 : 0;
        c.Sq = sq;
        c.Sk = 65 + seed % 70;
        c.qPosOffset = c.Sk - sq;
        c.kvMaxLen = 256;
        c.batchGapRows = 1 + seed % 3;
        c.extraStride = seed % 2 ? 3 : 0;
        c.outExtra = seed % 3 ? 0 : 5;
        c.seed = seed++;
        check(c);
      }
}

TEST(AttentionCpu, DecodeStepThreadCountIndependent) {
  const int saved = omp_get_max_threads();
  for (int64_t sq : {1, 3}) {
    Case c;
    c.mask = TFC_MASK_PADDING_CAUSAL;
    c.B = 4;
    c.H = 8;
    c.dk = 64;
    c.Sq = sq;
    c.Sk = 300;
    c.qPosOffset = c.Sk - sq;
    c.kvMaxLen = 512;
    c.seed = 1800 + static_cast<uint32_t>(sq);
    AttnRun r = makeRun(c);
    std::vector<std::vector<float>> results;
    for (int threads : {1, 2, 3, 1}) {
      omp_set_num_threads(threads);
      std::fill(r.outBuf.begin(), r.outBuf.end(), kSentinel);
      attention(r.params(), r.q, r.k, r.v, r.out());
      results.push_back(r.outBuf);
    }
    for (size_t i = 1; i < results.size(); ++i)
      EXPECT_EQ(0, std::memcmp(results[0].data(), results[i].data(),
                               results[0].size() * sizeof(float)))
          << "run " << i << " differs; " << c.str();
  }
  omp_set_num_threads(saved);
}

/// Full causal attention over S positions, then S decoding steps (q_len 1,
/// q_pos_offset i, kv_len i + 1) over a [B, max_len, D] cache that step i
/// extends by row i, as a generation loop does. Returns the largest
/// difference between the two, relative to the output's largest magnitude;
/// also the largest element-wise relative difference, and the number of
/// elements that differ at all.
double decodeVsFullPass(int64_t S, int64_t B, int64_t H, int64_t dk, float fill,
                        double *maxElementRel, int64_t *differing) {
  Case c;
  c.mask = TFC_MASK_CAUSAL;
  c.maskValue = fill;
  c.B = B;
  c.H = H;
  c.dk = dk;
  c.Sq = c.Sk = S;
  c.seed = 1900 + static_cast<uint32_t>(S);
  AttnRun full = makeRun(c);
  attention(full.params(), full.q, full.k, full.v, full.out());
  expectGuardsIntact(full);

  const int64_t D = full.D, maxLen = S + 7;
  std::vector<float> kCache(B * maxLen * D, kNaN), vCache(B * maxLen * D, kNaN);
  std::vector<float> dec(B * S * D, kNaN);
  for (int64_t i = 0; i < S; ++i) {
    for (int64_t b = 0; b < B; ++b) {
      std::copy(full.kRow(b, i), full.kRow(b, i) + D, kCache.begin() + (b * maxLen + i) * D);
      std::copy(full.vRow(b, i), full.vRow(b, i) + D, vCache.begin() + (b * maxLen + i) * D);
    }
    AttentionParams p;
    p.batch = B;
    p.q_len = 1;
    p.kv_len = i + 1;
    p.heads = H;
    p.head_dim = dk;
    p.q_row_stride = p.k_row_stride = p.v_row_stride = p.out_row_stride = D;
    p.q_batch_stride = full.qbs;
    p.k_batch_stride = p.v_batch_stride = maxLen * D;
    p.out_batch_stride = S * D;
    p.q_pos_offset = i;
    p.scale = full.scale;
    p.mask = TFC_MASK_CAUSAL;
    p.mask_value = fill;
    attention(p, full.q + i * full.qs, kCache.data(), vCache.data(), dec.data() + i * D);
  }

  double maxAbs = 0, maxDiff = 0;
  *maxElementRel = 0;
  *differing = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < S; ++i)
      for (int64_t col = 0; col < D; ++col) {
        const float want = full.outRow(b, i)[col];
        const float got = dec[(b * S + i) * D + col];
        EXPECT_TRUE(std::isfinite(got)) << "b " << b << " i " << i << " col " << col;
        maxAbs = std::max(maxAbs, std::fabs(static_cast<double>(want)));
        const double diff = std::fabs(static_cast<double>(got) - want);
        maxDiff = std::max(maxDiff, diff);
        if (diff > 0)
          *maxElementRel = std::max(*maxElementRel, diff / std::fabs(want));
        *differing += std::memcmp(&got, &want, sizeof got) != 0;
      }
  return maxDiff / maxAbs;
}

TEST(AttentionCpu, DecodeStepsMatchFullCausalPass) {
  // A decoding step runs on the row path (vectorized over head_dim) and the
  // full pass mostly on the tiled path (vectorized over query rows): the dot
  // products and softmax sums add in different orders, so the two agree to
  // float rounding rather than bitwise. The bound is relative to the largest
  // output magnitude (element-wise relative error is meaningless for the
  // outputs that cancel to nearly 0).
  for (int64_t S : {1, 70, 200})
    for (int64_t dk : {64, 16})
      for (float fill : {-1e9f, -kInf}) {
        const int64_t B = 2, H = dk == 64 ? 8 : 3;
        int64_t differing = 0;
        double elementRel = 0;
        const double rel = decodeVsFullPass(S, B, H, dk, fill, &elementRel, &differing);
        EXPECT_LE(rel, 1e-6) << "S=" << S << " dk=" << dk << " fill=" << fill;
        std::ostringstream os;
        os << "S=" << S << " dk=" << dk << " fill=" << fill
           << ": max |decode - full| / max |full| = " << rel
           << ", max element-wise relative difference " << elementRel << ", " << differing
           << " of " << B * S * H * dk << " elements not bitwise equal";
        RecordProperty("decode_vs_full_S" + std::to_string(S) + "_dk" + std::to_string(dk) +
                           (fill == -kInf ? "_inf" : "_1e9"),
                       os.str());
        std::cout << "[ info     ] " << os.str() << "\n";
      }
}

} // namespace
} // namespace tfc::cpu
