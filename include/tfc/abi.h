/*===- tfc/abi.h - the contract between the compiler and the runtime ------===*
 *
 * Kernel ids, dtypes and the model.bin layout constants, defined once and shared
 * by the compiler (which writes model.bin) and the runtime (which reads it). Plain
 * C so the runtime's C API and any C consumer can include it.
 *
 * The enums are APPEND-ONLY: their values are stored in model.bin. Never renumber
 * or reuse a value; add new entries at the end and bump TFC_FORMAT_VERSION only
 * when the layout itself changes. See docs/model-bin.md.
 *
 *===----------------------------------------------------------------------===*/
#ifndef TFC_ABI_H
#define TFC_ABI_H

#include <stdint.h>

/* "TFCMODEL" as the first 8 bytes of every model.bin. */
#define TFC_MAGIC "TFCMODEL"
/* Layout version the compiler writes. Version 3 added reduced-precision plans
 * (bf16 values, int8 weights with their scales as an extra input); a version-2
 * file is an all-f32 plan and still loads. Version 4 changed only the checksum,
 * from FNV-1a 64 (one byte per multiply, about 1 GB/s) to XXH3 64 (memory
 * speed), so that loading a large model is not spent hashing it. Version 5 added
 * the generation defaults of transformers' generation_config.json to the
 * generation record. Other versions are rejected. */
#define TFC_FORMAT_VERSION 5u
#define TFC_FORMAT_MIN_VERSION 2u
/* How an optional @forward input is made when the caller leaves it out
 * (format version 4; docs/model-bin.md): zeros shaped like its source input
 * (token_type_ids), or source != value as 1/0 (an attention_mask from pad_id). */
typedef enum tfc_input_default_t {
  TFC_INPUT_DEFAULT_ZEROS = 1,
  TFC_INPUT_DEFAULT_NOT_EQUAL = 2,
} tfc_input_default_t;

/* Weight data is aligned to this many bytes so it can be mmapped and used in place. */
#define TFC_WEIGHT_ALIGN 64u

/* Element types. Append-only. */
typedef enum tfc_dtype_t {
  TFC_DTYPE_F32 = 0,
  TFC_DTYPE_I64 = 1,
  TFC_DTYPE_I32 = 2,
  TFC_DTYPE_BOOL = 3, /* one byte per element, 0 or 1 */
  TFC_DTYPE_F16 = 4,
  TFC_DTYPE_BF16 = 5,
  TFC_DTYPE_I8 = 6,
} tfc_dtype_t;

/* Kernel ids of plan instructions: the rows of tfc/kernels.def, the one table
 * of kernels (append-only: ids are stored in model.bin). Each corresponds to
 * one tfc op (docs/dialect.md); attributes are stored as the op's, in order:
 * - TOKEN_EMBEDDING ints: position_axis, has_positions, has_type_ids,
 *   has_offset; floats: scale. The table is f32, bf16 or i8; an i8 table has
 *   one more input, last: its per-row f32 scales [V] (row v = scales[v] *
 *   table[v]).
 * - Linear kernels: inputs x, weight [N, K] (, bias [N] f32) (, residual f32).
 *   The weight is f32, bf16 or i8; an i8 weight has one more input, last: its
 *   per-output-channel f32 scales [N] (W[n, :] = scales[n] * weight[n, :]), and
 *   x is quantized per row at run time. x and the output are f32 or bf16 (f32
 *   only with an f32 weight). LINEAR ints: has_bias; FUSED_LINEAR ints:
 *   has_bias, has_residual, activation.
 * - MATMUL ints: transpose_b. COMPARE ints: predicate. MASKED_FILL floats:
 *   value. TRANSPOSE ints: perm. SLICE ints: axis, start, size (any dtype; out
 *   = in). REDUCE_MEAN / REDUCE_SUM ints: axis, keepdim. GELU ints: approximate
 *   (0 erf, 1 tanh). SOFTMAX / LOG_SOFTMAX / POSITIONS ints: axis. POSITIONS may add
 *   padding_idx: RoBERTa's positions of ids [B, S] (input 0), output [B, S].
 * - RESHAPE and UNSQUEEZE are views: no data movement.
 * - LAYER_NORM ints: variant (0 layer_norm, 1 std_norm, 2 rms_norm); floats:
 *   eps. Inputs x, gamma (, beta: absent for rms_norm). x and the output are
 *   f32 or bf16.
 * - ATTENTION ints: mask_kind, num_heads, pad_id (, has_bias, bidirectional,
 *   max_distance); floats: scale, mask_value. q, k and v share one dtype, f32
 *   or bf16; the output is f32 or bf16. With has_bias = 1 the last input is a
 *   relative position bias table [num_buckets, H] f32 (T5; tfc/relative_bucket.h).
 * - CACHED_ATTENTION inputs: q, k, v, k_cache, v_cache, pos (, bias table);
 *   ints: num_heads (, has_bias, bidirectional, max_distance); floats: scale.
 *   Writes k/v into the caches at pos, attends causally over rows [0, pos+T).
 * - RELATIVE_POSITION_BIAS inputs: table [num_buckets, H] f32, query ids
 *   [B, Sq], key ids [B, Sk] (their lengths only); ints: bidirectional,
 *   max_distance; output [1, H, Sq, Sk] f32. */
typedef enum tfc_kernel_t {
#define TFC_KERNEL(ENUM, name, id, in, ints, floats) TFC_KERNEL_##ENUM = id,
#include "kernels.def"
#undef TFC_KERNEL
} tfc_kernel_t;

/* How many kernels there are: ids are 0 .. TFC_KERNEL_COUNT - 1. */
enum {
  TFC_KERNEL_COUNT = 0
#define TFC_KERNEL(ENUM, name, id, in, ints, floats) +1
#include "kernels.def"
#undef TFC_KERNEL
};

/* Where a value lives (model.bin value table). Append-only. */
typedef enum tfc_storage_t {
  TFC_STORAGE_INPUT = 0,  /* offset: the function's input index */
  TFC_STORAGE_WEIGHT = 1, /* offset: byte offset in the weights section */
  TFC_STORAGE_ARENA = 2,  /* offset: byte offset in the function's arena */
  TFC_STORAGE_VIEW = 3,   /* offset: the value it aliases */
  TFC_STORAGE_STATE = 4,  /* offset: byte offset in the session state (KV caches) */
} tfc_storage_t;

/* Bytes per element of a tfc_dtype_t; 0 for an unknown value. */
static inline uint64_t tfc_dtype_size(uint32_t dtype) {
  switch (dtype) {
  case TFC_DTYPE_F32:
  case TFC_DTYPE_I32:
    return 4;
  case TFC_DTYPE_I64:
    return 8;
  case TFC_DTYPE_BOOL:
  case TFC_DTYPE_I8:
    return 1;
  case TFC_DTYPE_F16:
  case TFC_DTYPE_BF16:
    return 2;
  default:
    return 0;
  }
}

/* The kernel's name as the dialect spells the op ("fused_linear"); "?" if unknown. */
static inline const char *tfc_kernel_name(uint32_t kernel) {
  switch (kernel) {
#define TFC_KERNEL(ENUM, name, id, in, ints, floats)                                     \
  case id:                                                                               \
    return #name;
#include "kernels.def"
#undef TFC_KERNEL
  default:
    return "?";
  }
}

/* The fewest inputs, int attributes and float attributes |kernel| reads (its
 * row of tfc/kernels.def). Returns 0 for an unknown kernel, else 1. */
static inline int tfc_kernel_min_arity(uint32_t kernel, uint32_t *min_inputs,
                                       uint32_t *min_ints, uint32_t *min_floats) {
  switch (kernel) {
#define TFC_KERNEL(ENUM, name, id, in, ints, floats)                                     \
  case id:                                                                               \
    *min_inputs = in;                                                                    \
    *min_ints = ints;                                                                    \
    *min_floats = floats;                                                                \
    return 1;
#include "kernels.def"
#undef TFC_KERNEL
  default:
    return 0;
  }
}

/* A dtype's short name ("f32", "bf16", "i8"); "?" if unknown. */
static inline const char *tfc_dtype_name(uint32_t dtype) {
  static const char *const names[] = {"f32", "i64", "i32", "bool", "f16", "bf16", "i8"};
  return dtype < sizeof(names) / sizeof(names[0]) ? names[dtype] : "?";
}

/* The precision a plan instruction computes in, as `tfc compile --report` and
 * `tfrun --profile` show it: a linear layer's weight dtype ("i8", "bf16") or a
 * token embedding's table dtype; otherwise "in->out" when a float input and the
 * output differ ("f32->bf16"), else the output dtype. |in0|/|in1| are the first
 * two inputs' dtypes (UINT32_MAX when absent). */
static inline const char *tfc_instr_precision(uint32_t kernel, uint32_t in0, uint32_t in1,
                                              uint32_t out, char *buf, unsigned n) {
  const char *a;
  if (kernel == TFC_KERNEL_LINEAR || kernel == TFC_KERNEL_FUSED_LINEAR ||
      kernel == TFC_KERNEL_TOKEN_EMBEDDING)
    a = tfc_dtype_name(in1);
  else if ((in0 == TFC_DTYPE_F32 || in0 == TFC_DTYPE_BF16 || in0 == TFC_DTYPE_F16) &&
           in0 != out) {
    const char *x = tfc_dtype_name(in0), *y = tfc_dtype_name(out);
    unsigned i = 0;
    for (; *x && i + 1 < n; ++x)
      buf[i++] = *x;
    for (const char *arrow = "->"; *arrow && i + 1 < n; ++arrow)
      buf[i++] = *arrow;
    for (; *y && i + 1 < n; ++y)
      buf[i++] = *y;
    if (n)
      buf[i] = 0;
    return buf;
  } else
    a = tfc_dtype_name(out);
  unsigned i = 0;
  for (; a[i] && i + 1 < n; ++i)
    buf[i] = a[i];
  if (n)
    buf[i] = 0;
  return buf;
}

/* The checksum of model.bin versions 2 and 3 (version 4 uses XXH3 64,
 * format/model_bin.h), and a cheap hash for other uses: FNV-1a 64 over |n| bytes. */
static inline uint64_t tfc_fnv1a64(const void *data, uint64_t n) {
  const unsigned char *p = (const unsigned char *)data;
  uint64_t h = 1469598103934665603ull;
  for (uint64_t i = 0; i < n; ++i)
    h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

#endif /* TFC_ABI_H */
