//===- weight_memory.cc - memory for the packed weights -------------------===//
#include "backends/cpu/weight_memory.h"

#include <sys/mman.h>

namespace tfc::cpu {

WeightMemory allocWeightMemory(size_t bytes) {
  constexpr size_t kHuge = size_t(2) << 20;
  const size_t align = bytes >= kHuge ? kHuge : 64;
  const size_t size = (bytes + align - 1) / align * align;
  void *p = std::aligned_alloc(align, size ? size : align);
  if (p && align == kHuge)
    (void)madvise(p, size, MADV_HUGEPAGE); // a hint: without THP it changes nothing
  return WeightMemory(p, std::free);
}

} // namespace tfc::cpu
