//===- embedding_cpu.cc - lookups and position kernels on the CPU ---------===//
//
// token_embedding (table[ids] * scale + type and positional rows), embedding,
// positions, nopeak_mask, T5's relative_position_bias and rotary (RoPE).
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/broadcast_cpu.h"
#include "backends/cpu/kernels_cpu.h"
#include "backends/cpu/linear_dnnl.h"
#include "backends/cpu/rotary_cpu.h"
#include "tfc/bf16.h"
#include "tfc/relative_bucket.h"

#include <cmath>
#include <vector>

namespace tfc::cpu {
namespace {

/// out[i, :] (+)= table[ids[i], :] * scale for an f32, bf16 or i8 table (an
/// i8 row is dequantized with its |rowScales| entry). A table that is also a
/// linear's weight (tied to the lm_head) is read from the linear's packed
/// copy where its layout allows (linear_dnnl.h), the same values.
Status embeddingRows(const Tensor &table, const Tensor &ids, float scale, const float *rowScales,
                     int64_t group, float *out, bool accumulate) {
  int64_t v = table.shape[0], d = table.shape[1];
  int64_t n = ids.numel();
  for (int64_t i = 0; i < n; ++i) {
    int64_t id = (int64_t)loadAsDouble(ids, i);
    if (id < 0 || id >= v)
      return Status::invalidArgument("token id " + std::to_string(id) +
                                     " is out of range [0, " + std::to_string(v) + ")");
    float *o = out + i * d;
    if (table.packed &&
        packedRowTimes(*static_cast<const PackedLinear *>(table.packed), id, scale, o, accumulate))
      continue;
    // o[j] (+)= value(j): two plain loops, each vectorized.
    auto emit = [&](auto value) {
      if (accumulate)
        for (int64_t j = 0; j < d; ++j)
          o[j] += value(j);
      else
        for (int64_t j = 0; j < d; ++j)
          o[j] = value(j);
    };
    if (table.dtype == TFC_DTYPE_BF16) {
      const uint16_t *row = table.as<uint16_t>() + id * d;
      emit([&](int64_t j) { return tfc_bf16_to_f32(row[j]) * scale; });
    } else if (table.dtype == TFC_DTYPE_I8 && group > 0) { // a scale per group of a row
      const int8_t *row = table.as<int8_t>() + id * d;
      const float *sc = rowScales + id * ((d + group - 1) / group);
      emit([&](int64_t j) { return (float)row[j] * (scale * sc[j / group]); });
    } else if (table.dtype == TFC_DTYPE_I8) {
      const int8_t *row = table.as<int8_t>() + id * d;
      const float s = scale * rowScales[id];
      emit([&](int64_t j) { return (float)row[j] * s; });
    } else {
      const float *row = table.as<float>() + id * d;
      emit([&](int64_t j) { return row[j] * scale; });
    }
  }
  return Status();
}

} // namespace

Status run(const TokenEmbeddingCall &c) {
  // table[ids] * scale (+ type_table[type_ids]) + positions[pos(ids)]
  const Tensor &ids = *c.ids, &table = *c.table;
  const auto &a = c.attrs;
  float *o = c.out->as<float>();
  TFC_RETURN_IF_ERROR(embeddingRows(table, ids, (float)a.scale, table.scales, table.group, o,
                                    false));
  if (c.type_ids)
    TFC_RETURN_IF_ERROR(embeddingRows(*c.type_table, *c.type_ids, 1.0f, nullptr, 0, o, true));
  if (!c.positions)
    return Status();
  const int64_t b = ids.shape[0], s = ids.shape[1], d = table.shape[1];
  const int64_t rows = c.positions->shape[0];
  // decode_step: row i's new tokens sit at positions offset, offset + 1, ...,
  // with one offset for all rows or one per row ([b]).
  const bool perRow = c.offset && c.offset->numel() > 1;
  for (int64_t i = 0; i < b; ++i) {
    const int64_t offset = c.offset ? c.offset->as<int64_t>()[perRow ? i : 0] : 0;
    if (offset < 0)
      return Status::invalidArgument("negative position offset " + std::to_string(offset));
    for (int64_t j = 0; j < s; ++j) {
      const int64_t p = a.position_axis == 0 ? i : j + offset;
      if (p >= rows)
        return Status::invalidArgument("position " + std::to_string(p) + " is beyond the " +
                                       std::to_string(rows) + "-row positional table");
      const float *row = c.positions->as<float>() + p * d;
      float *dst = o + (i * s + j) * d;
      for (int64_t k = 0; k < d; ++k)
        dst[k] += row[k];
    }
  }
  return Status();
}

Status run(const RotaryCall &c) {
  // Each head's first R features rotate in pairs by position * inv_freq[i]
  // (tfc.rotary); cos and sin are computed once per token, in double and
  // rounded to f32 (transformers computes them in f32: within an ulp).
  const Tensor &x = *c.x;
  const int64_t b = x.shape[0], s = x.shape[1], d = x.shape[2];
  const int64_t hd = c.attrs.head_dim, heads = d / hd, half = c.inv_freq->shape[0];
  const float *freq = c.inv_freq->as<float>();
  const bool perRow = c.offset && c.offset->numel() > 1;
  for (int64_t i = 0; i < b; ++i) {
    const int64_t offset = c.offset ? c.offset->as<int64_t>()[perRow ? i : 0] : 0;
    if (offset < 0)
      return Status::invalidArgument("negative position offset " + std::to_string(offset));
  }
  const bool inter = c.attrs.interleaved;
  const float *in = x.as<float>();
  float *out = c.out->as<float>();
#pragma omp parallel if (b * s * d >= 65536)
  {
    std::vector<float> cs(static_cast<size_t>(2 * half));
#pragma omp for schedule(static)
    for (int64_t t = 0; t < b * s; ++t) {
      const int64_t row = t / s;
      const int64_t pos =
          t % s + (c.offset ? c.offset->as<int64_t>()[perRow ? row : 0] : 0);
      rotaryAngles(pos, freq, half, cs.data());
      rotateHeads(in + t * d, out + t * d, heads, hd, cs.data(), half, inter);
    }
  }
  return Status();
}

Status run(const EmbeddingCall &c) {
  return embeddingRows(*c.table, *c.ids, 1.0f, nullptr, 0, c.out->as<float>(), false);
}

Status run(const PositionsCall &c) {
  int64_t *o = c.out->as<int64_t>();
  if (c.attrs.padding_idx >= 0) { // RoBERTa: real tokens numbered from padding_idx + 1
    const Tensor &ids = *c.input;
    const int64_t pad = c.attrs.padding_idx, rows = ids.shape[0], seq = ids.shape[1];
    for (int64_t b = 0; b < rows; ++b) {
      int64_t count = 0;
      for (int64_t i = 0; i < seq; ++i) {
        const int64_t id = ids.dtype == TFC_DTYPE_I32 ? ids.as<int32_t>()[b * seq + i]
                                                      : ids.as<int64_t>()[b * seq + i];
        o[b * seq + i] = id != pad ? pad + ++count : pad;
      }
    }
    return Status();
  }
  for (int64_t i = 0, n = c.out->numel(); i < n; ++i)
    o[i] = i;
  return Status();
}

Status run(const NopeakMaskCall &c) {
  const int64_t s = c.out->shape[1];
  uint8_t *o = c.out->as<uint8_t>();
  for (int64_t i = 0; i < s; ++i)
    for (int64_t j = 0; j < s; ++j)
      o[i * s + j] = j <= i;
  return Status();
}

Status run(const RelativePositionBiasCall &c) {
  // out[0, h, i, j] = table[bucket(j - i), h]
  const Tensor &t = *c.table;
  const int64_t nb = t.shape[0], H = t.shape[1], sq = c.out->shape[2], sk = c.out->shape[3];
  const float *tab = t.as<float>();
  float *o = c.out->as<float>();
  for (int64_t i = 0; i < sq; ++i)
    for (int64_t j = 0; j < sk; ++j) {
      const int64_t row =
          tfc_relative_bucket(j - i, c.attrs.bidirectional ? 1 : 0, nb, c.attrs.max_distance);
      for (int64_t h = 0; h < H; ++h)
        o[(h * sq + i) * sk + j] = tab[row * H + h];
    }
  return Status();
}

} // namespace tfc::cpu
