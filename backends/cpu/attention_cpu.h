//===- attention_cpu.h - Fused multi-head attention on the CPU ---*- C++ -*-===//
//
// The CPU kernel behind `tfc.attention`: per head, softmax(scale * Q K^T,
// masked) V, with the heads merged back into the row layout the surrounding
// linears use. It is FlashAttention-style (query blocks against key blocks with
// an online softmax), so it never materializes the [B, H, Sq, Sk] score matrix:
// memory is O(block) per thread and the masks are applied from their compact
// forms (key token ids, a causal rule, or a broadcast additive tensor).
//
// The result equals the unfused tutorial computation
//   scores = scale * Q K^T; masked_fill(mask, mask_value) or += additive;
//   softmax(scores, -1) @ V
// up to float rounding, including its edge cases: a query row whose keys are
// all masked with a finite fill gets the uniform average of all values, and one
// whose scores are all -inf gets NaN, as in PyTorch.
//
// This header is plain C++17 with no MLIR/LLVM dependency: the runtime links it.
// f32 only.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_BACKENDS_CPU_ATTENTION_CPU_H
#define TFC_BACKENDS_CPU_ATTENTION_CPU_H

#include "tfc/abi.h"

#include <cstdint>

namespace tfc::cpu {

/// How the attention scores are masked: tfc/enums.def's TFC_MASK_* (key
/// padding masks key j where key_tokens[b, j] == pad_id; causal masks key j
/// for query i where j > i + q_pos_offset; additive adds the `additive`
/// tensor to the scaled scores).
using MaskKind = tfc_mask_t;

/// Shapes, layouts and mask of one attention call. All strides count floats
/// (or, for nothing else, elements); row r of batch b of a tensor X is at
/// X + b * x_batch_stride + r * x_row_stride, where an x_batch_stride of 0
/// means len * x_row_stride (len = q_len for q and out, kv_len for k and v:
/// the batches follow each other), and head h occupies the columns
/// [h * head_dim, (h + 1) * head_dim) of that row. Separate strides let the
/// kernel read a packed QKV buffer [B, S, 3D] in place (q = base,
/// k = base + D, v = base + 2D, all three row strides 3D) and write into a
/// wider buffer; the batch strides let it read K and V from a KV cache laid
/// out [batch, max_len, D] while kv_len < max_len (k_batch_stride =
/// v_batch_stride = max_len * D): only rows 0 .. kv_len-1 of each batch are
/// read.
struct AttentionParams {
  int64_t batch = 0, q_len = 0, kv_len = 0, heads = 0, head_dim = 0;
  /// Key/value heads (grouped-query attention): query head h reads key and
  /// value head h / (heads / kv_heads). 0 means heads.
  int64_t kv_heads = 0;
  int64_t q_row_stride = 0, k_row_stride = 0, v_row_stride = 0, out_row_stride = 0;
  /// Where batch b starts, in floats: batch b of X starts at
  /// X + b * x_batch_stride. 0 means the default, len * x_row_stride.
  int64_t q_batch_stride = 0, k_batch_stride = 0, v_batch_stride = 0, out_batch_stride = 0;
  /// Query row i sits at absolute position i + q_pos_offset, key j at
  /// position j. For Causal and PaddingCausal, key j is masked for query i
  /// where j > i + q_pos_offset. 0 (the default) aligns query and key rows at
  /// the start of the sequence, as in a full-sequence forward; an incremental
  /// decoding step over a KV cache holding positions 0 .. kv_len-1 passes
  /// q_pos_offset = kv_len - q_len. It may be negative. It changes nothing
  /// else: the other masks, and the additive tensor's rows, are indexed by i.
  int64_t q_pos_offset = 0;
  /// A sliding window (Causal and PaddingCausal only; 0: none): key j is also
  /// masked for query i where j <= i + q_pos_offset - window.
  int64_t window = 0;
  /// Multiplies Q K^T (typically 1/sqrt(head_dim)).
  float scale = 1.0f;
  /// Soft-capping of the scaled scores (0: none): s = softcap * tanh(s /
  /// softcap), before the mask and any bias (Gemma 2).
  float softcap = 0.0f;
  MaskKind mask = TFC_MASK_NONE;
  /// The score given to masked positions (masked_fill semantics: it replaces
  /// the score, it is not added). Typically -1e9 or -inf. Unused for None and
  /// Additive.
  float mask_value = -1e9f;
  /// The padding token id, for KeyPadding and PaddingCausal.
  int64_t pad_id = 0;
  /// Key-side token ids for KeyPadding and PaddingCausal, null otherwise:
  /// the id of key j of batch b is key_tokens[b * key_tokens_batch_stride + j]
  /// (j < kv_len).
  const int64_t *key_tokens = nullptr;
  /// 0 means kv_len: a contiguous [batch, kv_len] array.
  int64_t key_tokens_batch_stride = 0;
  /// The additive mask for Additive, null otherwise: an [B|1, H|1, Sq|1, Sk]
  /// tensor whose element (b, h, i, j) is at
  /// additive[b * add_stride_b + h * add_stride_h + i * add_stride_q + j];
  /// a broadcast dimension has stride 0. It may hold -inf.
  const float *additive = nullptr;
  int64_t add_stride_b = 0, add_stride_h = 0, add_stride_q = 0;
  /// Per-head width of V and of the output, when it differs from head_dim
  /// (the dialect allows value [B, Sk, Dv]); 0 means head_dim.
  int64_t v_head_dim = 0;
  /// T5's relative position bias, null otherwise: a [rel_buckets, heads]
  /// table; query i (at position i + q_pos_offset) and key j get
  /// rel_bias[bucket(j - i - q_pos_offset) * heads + h] added to their scaled
  /// score before the mask (tfc/relative_bucket.h). Not with Additive. The
  /// kernel expands it per call into heads x (q_len + kv_len - 1) floats, one
  /// per head and distance, so no [Sq, Sk] bias exists.
  const float *rel_bias = nullptr;
  int64_t rel_buckets = 0, rel_max_distance = 128;
  bool rel_bidirectional = false;
  /// Per-batch key counts (a batch of sequences at their own positions, the
  /// engine's decoding rows), null otherwise: batch b has kv_lens[b] keys and
  /// its query row i sits at position i + kv_lens[b] - q_len (q_pos_offset and
  /// kv_len are then unused). Not with rel_bias.
  const int64_t *kv_lens = nullptr;
  /// A paged K and V (a KV cache read through a block table), null
  /// otherwise: key j of batch b is row
  ///   kv_blocks[b * kv_blocks_stride + j / kv_block_len] * kv_block_len
  ///     + j % kv_block_len
  /// of k and v (at k_row_stride and v_row_stride; the batch strides are
  /// unused). The kernel's key blocks must not cross a cache block:
  /// kv_block_len passes pagedBlockLenOk() (a power of two up to 64, or a
  /// multiple of 64), or no batch has more than kv_block_len keys.
  const int64_t *kv_blocks = nullptr;
  int64_t kv_blocks_stride = 0, kv_block_len = 0;
};

/// Whether attention() can read a cache paged in blocks of |len| positions
/// in place (AttentionParams::kv_blocks).
bool pagedBlockLenOk(int64_t len);

/// Computes, for every batch b, head h and query row i,
///   out[b, i, h*dv:(h+1)*dv] = sum_j softmax_j(s_ij) v[b, j, h*dv:(h+1)*dv]
/// with s_ij = scale * q_i . k_j, then masked as `p.mask` says. Query i is at
/// position i + p.q_pos_offset and key j at position j, so Causal masks
/// exactly j > i + q_pos_offset whatever q_len and kv_len are (with the
/// default offset 0: j > i, a full-sequence forward).
///
/// Edge cases, matching PyTorch's softmax in f32:
/// - a row where every score is -inf (all keys masked with mask_value = -inf,
///   or an all -inf additive row) produces NaN in every output element;
/// - a row where every key is masked with a finite mask_value gets the
///   uniform average of all kv_len value rows (the softmax of equal scores);
/// - kv_len == 0 produces zeros (an empty sum), q_len == 0 writes nothing;
/// - a NaN score (a NaN in the row's query or in any unmasked key, a NaN in
///   the additive mask) makes every output element of the row NaN, and so
///   does a +inf score (exp(inf - inf)); no NaN weighs 0 (issue 21).
///
/// Only the q_len rows of each batch of `out` (at out_row_stride and
/// out_batch_stride), in the heads*dv columns, are written; `out` must not
/// overlap q, k or v. Parallel over batch x heads x query blocks with OpenMP
/// (a small call runs on the calling thread); the result is bitwise the same
/// for any thread count. Query blocks of a few rows (a decoding step) take a
/// path that vectorizes over head_dim instead of over query rows, so their
/// results agree with those of a longer query to float rounding, not bitwise.
/// Thread-safe: no global state.
void attention(const AttentionParams &p, const float *q, const float *k, const float *v,
               float *out);

} // namespace tfc::cpu

#endif // TFC_BACKENDS_CPU_ATTENTION_CPU_H
