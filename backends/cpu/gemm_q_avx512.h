//===- gemm_q_avx512.h - group-wise int8 and int4 GEMMs, AVX-512 VNNI -*- C++ -*-===//
//
// The AVX-512 VNNI forms of the group-wise kernels (gemmQ8S16 in
// gemm_s8_avx2.h, gemmQ4 in gemm_q4_avx2.h), on the same packed weights and
// quantized activations, chosen at run time where the CPU has AVX512F/BW/VL/DQ
// and AVX512_VNNI within the TFC_CPU_ISA cap (CpuPaths::avx512Vnni).
//
// One instruction does what the AVX2 kernels do in four:
// - int8 (s16 activations): vpdpwssd adds 16 columns x 2 inputs of s16 x s16
//   products into s32, where AVX2 takes vpmaddwd and vpaddd per 8 columns;
// - int4 (s8 activations): vpdpbusd adds 16 columns x 4 inputs of u8 (the
//   weights' u = q + 8) x s8 products into s32, where AVX2 takes vpmaddubsw,
//   an s16 add and, per block, vpmaddwd per 8 columns.
// - int8 at 8 activation bits (`tfc compile --activation-bits 8`): vpdpbusd
//   on the weights made unsigned (q + 128) as they are loaded, 64 products per
//   instruction, where the s16 form does 32; the AVX2 form is the s16 kernel
//   on the same codes.
// Neither saturates, and a block's s32 sums are the AVX2 kernels' sums
// exactly; they are then scaled with the same f32 operations in the same
// order, so both forms give the same bits (GemmQ4Test checks it). The tiles
// are 16 columns (one zmm) by up to 8 rows, with each row's f32 sums in
// registers.
//
//===----------------------------------------------------------------------===//
#ifndef TFC_BACKENDS_CPU_GEMM_Q_AVX512_H
#define TFC_BACKENDS_CPU_GEMM_Q_AVX512_H

#include <cstdint>

namespace tfc::cpu {
struct PackedQ8;
struct PackedQ4;

namespace avx512 {
/// gemmQ8S16 (gemm_s8_avx2.h) with vpdpwssd. Only where CpuPaths::avx512Vnni.
void gemmQ8S16(const PackedQ8 &w, const int16_t *q, const float *d, int64_t m, float *y);
/// Group-wise int8 weights against 8-bit activation blocks
/// (quantizeS8Blocks, gemm_s8_avx2.h) with vpdpbusd: the weights made
/// unsigned (q + 128) as they are loaded, and 128 * sum(x codes) taken out of
/// each block's s32 sums, which leaves gemmQ8S16's sums of the same codes
/// widened; so the same bits as gemmQ8S16 after quantizeS16Blocks with 127
/// levels. Only where CpuPaths::avx512Vnni.
void gemmQ8S8(const PackedQ8 &w, const int8_t *q, const float *d, const int32_t *qsum, int64_t m,
              float *y);
/// gemmQ4 (gemm_q4_avx2.h) with vpdpbusd. Only where CpuPaths::avx512Vnni.
void gemmQ4(const PackedQ4 &w, const int8_t *q, const float *d, const float *dsum8, int64_t rows,
            float *y);
} // namespace avx512
} // namespace tfc::cpu

#endif
