//===- weight_memory.h - memory for the packed weights ------------*- C++ -*-===//
//
// The packed weight copies (oneDNN's layout, our int8 panels, widened bf16)
// are read whole on every token of a decode loop: a base-size decoder streams
// about 150 MB per step, far past the caches, and with 4 KB pages that is one
// TLB miss every 4 KB. Linux gives huge pages to anonymous memory only where
// asked when transparent huge pages are in "madvise" mode (Debian's default),
// so copies of 2 MB or more are 2 MB-aligned and their whole 2 MB pages are
// marked MADV_HUGEPAGE (the tail keeps 4 KB pages, resident only as used).
// Smaller ones are 64-byte aligned, as before.
//
//===----------------------------------------------------------------------===//
#ifndef TFC_BACKENDS_CPU_WEIGHT_MEMORY_H
#define TFC_BACKENDS_CPU_WEIGHT_MEMORY_H

#include <cstddef>
#include <cstdlib>
#include <memory>

namespace tfc::cpu {

using WeightMemory = std::unique_ptr<void, void (*)(void *)>;

/// |bytes| of memory for a packed weight, or null when out of memory.
WeightMemory allocWeightMemory(size_t bytes);

} // namespace tfc::cpu

#endif
