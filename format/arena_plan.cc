//===- arena_plan.cc - offsets for values with lifetimes in one arena -----===//
#include "format/arena_plan.h"

#include <algorithm>
#include <numeric>

namespace tfc::format {

bool planArena(const std::vector<ArenaItem> &items, std::vector<uint64_t> &offsets,
               uint64_t &size) {
  constexpr uint64_t kAlign = 64;
  constexpr int64_t kBlock = 32; // instructions per index block
  const size_t n = items.size();
  offsets.assign(n, 0);
  size = 0;
  std::vector<uint64_t> rounded(n);
  int64_t lastStep = 0;
  for (size_t i = 0; i < n; ++i) {
    if (items[i].bytes > UINT64_MAX - (kAlign - 1) || items[i].from < 0 ||
        items[i].to < items[i].from)
      return false;
    rounded[i] = (items[i].bytes + kAlign - 1) / kAlign * kAlign;
    lastStep = std::max(lastStep, items[i].to);
  }
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return rounded[a] > rounded[b]; });
  // blocks[b]: the placed items whose lifetime meets instructions
  // [b * kBlock, (b + 1) * kBlock).
  std::vector<std::vector<uint32_t>> blocks((size_t)(lastStep / kBlock) + 1);
  std::vector<uint32_t> seen(n, UINT32_MAX); // the query that last saw an item
  std::vector<std::pair<uint64_t, uint64_t>> busy;
  for (uint32_t q = 0; q < n; ++q) {
    const uint32_t v = order[q];
    const ArenaItem &it = items[v];
    busy.clear();
    for (int64_t b = it.from / kBlock; b <= it.to / kBlock; ++b)
      for (uint32_t p : blocks[(size_t)b]) {
        if (seen[p] == q)
          continue;
        seen[p] = q;
        if (items[p].from <= it.to && it.from <= items[p].to)
          busy.push_back({offsets[p], offsets[p] + rounded[p]});
      }
    std::sort(busy.begin(), busy.end());
    uint64_t at = 0;
    for (const auto &[lo, hi] : busy) {
      if (at + rounded[v] <= lo)
        break;
      at = std::max(at, hi);
    }
    uint64_t end = 0;
    if (__builtin_add_overflow(at, rounded[v], &end))
      return false;
    offsets[v] = at;
    size = std::max(size, end);
    for (int64_t b = it.from / kBlock; b <= it.to / kBlock; ++b)
      blocks[(size_t)b].push_back(v);
  }
  return true;
}

uint64_t peakLiveBytes(const std::vector<ArenaItem> &items, int64_t steps, int64_t &at) {
  // +bytes where a lifetime starts, -bytes after it ends; saturating sums.
  std::vector<long double> delta((size_t)std::max<int64_t>(steps, 0) + 2, 0);
  for (const ArenaItem &it : items) {
    if (it.from < 0 || it.from > steps || it.to < it.from)
      continue;
    delta[(size_t)it.from] += (long double)it.bytes;
    delta[(size_t)std::min(it.to, steps) + 1] -= (long double)it.bytes;
  }
  long double live = 0, most = 0;
  at = 0;
  for (int64_t i = 0; i <= steps; ++i) {
    live += delta[(size_t)i];
    if (live > most) {
      most = live;
      at = i;
    }
  }
  return most >= (long double)UINT64_MAX ? UINT64_MAX : (uint64_t)most;
}

} // namespace tfc::format
