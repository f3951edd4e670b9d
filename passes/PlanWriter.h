//===- PlanWriter.h - fused tfc IR to model.bin ----------------------------===//
//
// The last compiler stage: evaluates compile-time weight expressions, infers every
// value's shape in terms of the symbolic dims, plans the arena by liveness at the
// declared maximums, and serializes signature, plan and weights as model.bin
// (docs/model-bin.md, constants in include/tfc/abi.h).
//
//===----------------------------------------------------------------------------===//
#ifndef TFC_PASSES_PLANWRITER_H
#define TFC_PASSES_PLANWRITER_H

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <map>
#include <string>

namespace tfc {
class WeightStore;

/// The precision of the plan's weights and activations (tfc compile --precision).
/// The IR stays f32; this is a lowering decision, like the kernel choice.
enum class Precision {
  F32,  ///< everything f32
  BF16, ///< linear weights and token-embedding tables bf16; activations between
        ///< the linear, attention and norm kernels bf16; f32 accumulation, norms
        ///< and softmax statistics, residual stream and outputs
  Int8, ///< as BF16, but linear weights and embedding tables int8 with a
        ///< symmetric f32 scale per row (per output channel; linear inputs
        ///< quantized per row at run time) or, with PlanOptions::int8Group, per
        ///< group of that many inputs (llama.cpp's Q8_0; inputs per block of 32)
  Int4, ///< as Int8, but linear weights int4 with one f32 scale per group of
        ///< PlanOptions::groupSize inputs (the weights of 16 levels, as
        ///< llama.cpp's Q4_0); the lm_head (a linear whose result is returned,
        ///< or that shares the embedding table) and embedding tables stay int8
};

struct PlanOptions {
  Precision precision = Precision::F32;
  /// Int4: the inputs per scale along a weight's row, a multiple of 32.
  int64_t groupSize = 32;
  /// Int8: the same, or 0 for one scale per row.
  int64_t int8Group = 0;
  /// Int8 with groups: the bits the runtime quantizes the activation blocks
  /// to, 0 for its default (16) or 8 (llama.cpp Q8_0's arithmetic: faster
  /// prefill on VNNI CPUs; docs/precision.md). Recorded in each such
  /// weight's descriptor.
  int64_t int8ActBits = 0;
};

/// Figures `tfc compile --report` prints about the plan.
struct PlanStats {
  uint64_t weightBytes = 0;
  uint64_t arenaBytes = 0;
  uint64_t kernels = 0;
  /// @forward's arena as a polynomial in the symbolic dims: the values live at
  /// its busiest instruction (at the declared maxima), e.g.
  /// "27.6 KB × batch × tgt_len + 96 B × batch × tgt_len^2".
  std::string arenaFormula;
  /// Session state (the KV caches of decode_step) at the declared maximums.
  uint64_t stateBytes = 0;
  /// The KV caches' bytes per row and position (all buffers together).
  uint64_t stateBytesPerRowPosition = 0;
  std::string cacheDescription;
  std::map<std::string, uint64_t> kernelCounts;
  /// @forward's instructions per "kernel precision" (tfc_instr_precision),
  /// e.g. "fused_linear bf16" -> 12.
  std::map<std::string, uint64_t> precisionCounts;
  /// @forward's float activations (arena values), and how many of them are bf16.
  uint64_t floatActivations = 0, bf16Activations = 0;
};

/// Lowers |module| (after the pass pipeline) to the bytes of a model.bin. Emits a
/// located error and fails on anything the plan cannot express.
mlir::FailureOr<std::string> writeModelBin(mlir::ModuleOp module,
                                           const WeightStore &weights,
                                           PlanStats *stats = nullptr,
                                           const PlanOptions &options = {});

} // namespace tfc

#endif // TFC_PASSES_PLANWRITER_H
