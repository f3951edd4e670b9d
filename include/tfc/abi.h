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
 * generation record. Version 6 added the weight descriptor: a weight's record
 * names its quantization scales (and zero points) and group size, so an int8
 * weight's scales are no longer one more input of each instruction that reads
 * it; the loader moves a version 3-5 file's trailing scales into the
 * descriptor. Version 7 added more end-of-sequence ids and sampling
 * defaults to the generation record. Version 8 added int4 weights
 * (TFC_DTYPE_I4), which carry the weight descriptor. Version 9 added a
 * quantized weight's activation bits to its descriptor (`tfc compile
 * --activation-bits 8`). Other versions are rejected. The metadata's
 * records are described once, in format/metadata.cc. */
#define TFC_FORMAT_VERSION 9u
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
  /* Signed 4-bit integers, two's complement (-8..7), two per byte: element e
   * of a tensor (row-major) is the low nibble of byte e / 2 when e is even,
   * the high nibble when it is odd. Linear weights only, with group-wise
   * scales (docs/precision.md, "int4"). */
  TFC_DTYPE_I4 = 7,
} tfc_dtype_t;

/* Dtype sets, as the kernel schema (tfc/kernels.def) gives each operand's
 * allowed dtypes: bit d is set for tfc_dtype_t d. */
#define TFC_DTS(d) (1u << TFC_DTYPE_##d)
#define TFC_DTS_F32 TFC_DTS(F32)
#define TFC_DTS_I64 TFC_DTS(I64)
#define TFC_DTS_BOOL TFC_DTS(BOOL)
#define TFC_DTS_FB (TFC_DTS(F32) | TFC_DTS(BF16))
#define TFC_DTS_FLOAT (TFC_DTS(F32) | TFC_DTS(F16) | TFC_DTS(BF16))
#define TFC_DTS_WEIGHT (TFC_DTS_FB | TFC_DTS(I8))
#define TFC_DTS_WEIGHT_CUDA (TFC_DTS_FLOAT | TFC_DTS(I8))
/* A linear layer's weight: int4 too (group-wise scales). CUDA's set names
 * every plan dtype, as the kernel table requires; its session refuses int8
 * and int4 linear weights with one error when it binds the model. */
#define TFC_DTS_LINEAR_WEIGHT (TFC_DTS_WEIGHT | TFC_DTS(I4))
#define TFC_DTS_LINEAR_WEIGHT_CUDA (TFC_DTS_WEIGHT_CUDA | TFC_DTS(I4))
#define TFC_DTS_IDS (TFC_DTS(I64) | TFC_DTS(I32))
#define TFC_DTS_SCALAR (TFC_DTS(F32) | TFC_DTS_IDS | TFC_DTS(BOOL))
#define TFC_DTS_SCALAR_CUDA (TFC_DTS_SCALAR | TFC_DTS(F16) | TFC_DTS(BF16))
#define TFC_DTS_ANY (TFC_DTS_SCALAR_CUDA | TFC_DTS(I8))

/* Kernel flags (tfc/kernels.def). */
enum {
  TFC_KF_VIEW = 1,          /* aliases its input: no data moves */
  TFC_KF_POSITION_WISE = 2, /* output position i reads only position i of its inputs */
  TFC_KF_BROADCAST = 4,     /* elementwise, numpy broadcasting */
  TFC_KF_UNARY = 8,         /* a tfc/unary.def formula */
};
/* Operand flags (tfc/kernels.def). */
enum {
  TFC_AF_TIED = 1,   /* has the dtype of the kernel's first operand */
  TFC_AF_WEIGHT = 2, /* a weight: must be stored in model.bin when not f32 */
};

/* The enums that kernel attributes hold (tfc/enums.def; append-only), and
 * how many cases each has. */
typedef enum tfc_mask_t {
#define TFC_MASK(ENUM, ods, value) TFC_MASK_##ENUM = value,
#include "enums.def"
  TFC_MASK_COUNT
} tfc_mask_t;
typedef enum tfc_norm_t {
#define TFC_NORM(ENUM, ods, value) TFC_NORM_##ENUM = value,
#include "enums.def"
  TFC_NORM_COUNT
} tfc_norm_t;
typedef enum tfc_cmp_t {
#define TFC_CMP(ENUM, ods, value) TFC_CMP_##ENUM = value,
#include "enums.def"
  TFC_CMP_COUNT
} tfc_cmp_t;
typedef enum tfc_gelu_t {
#define TFC_GELU(ENUM, ods, value) TFC_GELU_##ENUM = value,
#include "enums.def"
  TFC_GELU_COUNT
} tfc_gelu_t;
typedef enum tfc_act_t {
#define TFC_ACTIVATION(ENUM, ods, value, UNARY, mode) TFC_ACT_##ENUM = value,
#include "enums.def"
  TFC_ACT_COUNT
} tfc_act_t;

/* Kernel ids of plan instructions: the rows of tfc/kernels.def, the one
 * schema of kernels (append-only: ids are stored in model.bin). Each
 * corresponds to one tfc op (docs/dialect.md). Its attributes, operands and
 * dtypes are that row's; tfc/kernel_schema.h decodes and checks them. */
typedef enum tfc_kernel_t {
#define TFC_KERNEL(ENUM, name, Camel, id, ...) TFC_KERNEL_##ENUM = id,
#include "kernels.def"
#undef TFC_KERNEL
} tfc_kernel_t;

/* How many kernels there are: ids are 0 .. TFC_KERNEL_COUNT - 1. */
enum {
  TFC_KERNEL_COUNT = 0
#define TFC_KERNEL(ENUM, name, Camel, id, ...) +1
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

/* Bits per element of a tfc_dtype_t; 0 for an unknown value. Sub-byte dtypes
 * (int4) pack several elements per byte, so sizes come from
 * tfc_dtype_bytes, never from numel * a per-element size. */
static inline uint32_t tfc_dtype_bits(uint32_t dtype) {
  switch (dtype) {
  case TFC_DTYPE_F32:
  case TFC_DTYPE_I32:
    return 32;
  case TFC_DTYPE_I64:
    return 64;
  case TFC_DTYPE_BOOL:
  case TFC_DTYPE_I8:
    return 8;
  case TFC_DTYPE_F16:
  case TFC_DTYPE_BF16:
    return 16;
  case TFC_DTYPE_I4:
    return 4;
  default:
    return 0;
  }
}

/* Whether |dtype| is a known tfc_dtype_t. */
static inline int tfc_dtype_known(uint32_t dtype) { return tfc_dtype_bits(dtype) != 0; }

/* The bytes that |numel| elements of |dtype| occupy (rounded up to a whole
 * byte for sub-byte dtypes); 0 for an unknown dtype. The caller bounds numel
 * (the loader keeps every tensor under 2^48 elements). */
static inline uint64_t tfc_dtype_bytes(uint32_t dtype, uint64_t numel) {
  return (numel * tfc_dtype_bits(dtype) + 7) / 8;
}

/* The kernel's name as the dialect spells the op ("fused_linear"); "?" if unknown. */
static inline const char *tfc_kernel_name(uint32_t kernel) {
  switch (kernel) {
#define TFC_KERNEL(ENUM, name, Camel, id, ...)                                           \
  case id:                                                                               \
    return #name;
#include "kernels.def"
#undef TFC_KERNEL
  default:
    return "?";
  }
}

/* tfc_dtype_bytes with overflow checking: 1 with *bytes set, or 0 when |numel|
 * elements would not have a 64-bit byte count. */
static inline int tfc_dtype_bytes_checked(uint32_t dtype, uint64_t numel, uint64_t *bytes) {
  if (numel > (UINT64_MAX - 7) / 64)
    return 0;
  *bytes = tfc_dtype_bytes(dtype, numel);
  return 1;
}

/* A dtype's short name ("f32", "bf16", "i8"); "?" if unknown. */
static inline const char *tfc_dtype_name(uint32_t dtype) {
  static const char *const names[] = {"f32", "i64", "i32", "bool", "f16", "bf16", "i8", "i4"};
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
