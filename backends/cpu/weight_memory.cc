//===- weight_memory.cc - memory for the packed weights -------------------===//
#include "backends/cpu/weight_memory.h"

#include <sys/mman.h>

namespace tfc::cpu {

WeightMemory allocWeightMemory(size_t bytes) {
  constexpr size_t kHuge = size_t(2) << 20;
  const size_t align = bytes >= kHuge ? kHuge : 64;
  void *p = nullptr;
  if (posix_memalign(&p, align, bytes ? bytes : align) != 0)
    return WeightMemory(nullptr, std::free);
  // Huge pages for the whole 2 MB pages only: a huge page over the tail would
  // be resident whole however little of it the weight uses (a 2.2 MB FFN
  // weight took 4 MB: 130 MB of a Qwen2.5-0.5B int4 model's RSS).
  if (align == kHuge)
    (void)madvise(p, bytes / kHuge * kHuge, MADV_HUGEPAGE); // a hint: without THP it changes nothing
  return WeightMemory(p, std::free);
}

} // namespace tfc::cpu
