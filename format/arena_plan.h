//===- arena_plan.h - offsets for values with lifetimes in one arena -*- C++ -*-===//
//
// The memory planner of the compiler (PlanWriter, at the declared maxima) and of
// the runtime (each run, at the actual dims): one place, so both plan alike.
// No MLIR: the runtime links it.
//
//===----------------------------------------------------------------------===//
#ifndef TFC_FORMAT_ARENA_PLAN_H
#define TFC_FORMAT_ARENA_PLAN_H

#include <cstdint>
#include <vector>

namespace tfc::format {

/// A value to place: |bytes| live from instruction |from| to |to| (inclusive).
struct ArenaItem {
  uint64_t bytes = 0;
  int64_t from = 0, to = 0;
};

/// Gives every item an offset, 64-byte aligned, such that items whose
/// lifetimes overlap never share bytes. Greedy by size, as TensorFlow Lite's
/// arena planner: the largest item first, each at the lowest offset free for
/// its whole lifetime. The placed items are indexed by blocks of instructions,
/// so a plan costs about n log n plus the overlaps, not n^2: a model of 20,000
/// layers plans in well under a second. Returns false if a size or offset
/// would overflow 64 bits. |size| is the arena's size.
bool planArena(const std::vector<ArenaItem> &items, std::vector<uint64_t> &offsets,
               uint64_t &size);

/// The largest total of the |items| live at one instruction, and that
/// instruction (the first such); |steps| instructions, 0 .. steps.
uint64_t peakLiveBytes(const std::vector<ArenaItem> &items, int64_t steps, int64_t &at);

} // namespace tfc::format

#endif
