//===- KvBlocksTest.cpp - the paged KV cache's block bookkeeping ----------===//
#include "runtime/kv_blocks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

namespace tfrun::rt {
namespace {

using Copies = std::vector<BlockCopy>;

TEST(KvBlocks, MemoryFollowsTheLiveTokensToTheBlock) {
  BlockAllocator a(8, 4);
  Copies c;
  auto s = a.create();
  EXPECT_EQ(a.usedBlocks(), 0u);
  ASSERT_TRUE(a.append(s, 1, c).isOk());
  EXPECT_EQ(a.usedBlocks(), 1u);
  ASSERT_TRUE(a.append(s, 3, c).isOk()); // fills the first block exactly
  EXPECT_EQ(a.usedBlocks(), 1u);
  ASSERT_TRUE(a.append(s, 5, c).isOk()); // 9 tokens: 3 blocks
  EXPECT_EQ(a.usedBlocks(), 3u);
  EXPECT_EQ(a.length(s), 9u);
  EXPECT_EQ(a.table(s)->size(), 3u);
  EXPECT_TRUE(c.empty()); // nothing shared, nothing copied
  ASSERT_TRUE(a.release(s).isOk());
  EXPECT_EQ(a.freeBlocks(), 8u);
  EXPECT_EQ(a.table(s), nullptr);
}

TEST(KvBlocks, AForkSharesEveryBlockAndCopiesOnlyTheLastOnWrite) {
  BlockAllocator a(8, 4);
  Copies c;
  auto parent = a.create();
  ASSERT_TRUE(a.append(parent, 6, c).isOk()); // blocks {b0 full, b1 half}
  const std::vector<uint32_t> before = *a.table(parent);
  BlockAllocator::SeqId beam = 0;
  ASSERT_TRUE(a.fork(parent, beam).isOk());
  EXPECT_EQ(*a.table(beam), before);
  EXPECT_EQ(a.length(beam), 6u);
  EXPECT_EQ(a.usedBlocks(), 2u); // no rows copied
  EXPECT_EQ(a.refs(before[0]), 2u);
  // The beam writes position 6, in the shared half block: that block is
  // copied, the full one stays shared.
  ASSERT_TRUE(a.append(beam, 1, c).isOk());
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].from, before[1]);
  EXPECT_EQ((*a.table(beam))[0], before[0]);
  EXPECT_EQ((*a.table(beam))[1], c[0].to);
  EXPECT_EQ(a.refs(before[1]), 1u);
  // The parent now owns its half block alone: it writes in place.
  c.clear();
  ASSERT_TRUE(a.append(parent, 1, c).isOk());
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(*a.table(parent), before);
  // Finishing the parent frees only what the beam does not share.
  ASSERT_TRUE(a.release(parent).isOk());
  EXPECT_EQ(a.refs(before[0]), 1u);
  EXPECT_EQ(a.refs(before[1]), 0u);
  EXPECT_EQ(a.usedBlocks(), 2u);
  ASSERT_TRUE(a.release(beam).isOk());
  EXPECT_EQ(a.usedBlocks(), 0u);
}

TEST(KvBlocks, AForkOfAFullLastBlockCopiesNothing) {
  BlockAllocator a(4, 4);
  Copies c;
  auto s = a.create();
  ASSERT_TRUE(a.append(s, 4, c).isOk());
  BlockAllocator::SeqId t = 0;
  ASSERT_TRUE(a.fork(s, t).isOk());
  ASSERT_TRUE(a.append(t, 1, c).isOk());
  EXPECT_TRUE(c.empty()); // position 4 starts a new block
  EXPECT_EQ(a.usedBlocks(), 2u);
}

TEST(KvBlocks, AFullPoolRefusesAndChangesNothing) {
  BlockAllocator a(3, 2);
  Copies c;
  auto s = a.create();
  ASSERT_TRUE(a.append(s, 5, c).isOk()); // 3 blocks
  const std::vector<uint32_t> table = *a.table(s);
  Status st = a.append(s, 2, c);
  EXPECT_EQ(st.code(), tfc::Code::OutOfMemory);
  EXPECT_EQ(st.message(), "KV cache: 1 more blocks of 2 positions needed, 0 free");
  EXPECT_EQ(a.length(s), 5u);
  EXPECT_EQ(*a.table(s), table);
  // One more token still fits the last block's free slot.
  ASSERT_TRUE(a.append(s, 1, c).isOk());
  EXPECT_EQ(a.length(s), 6u);
  // A shared half block needs one for its copy: refused whole when none is free.
  BlockAllocator b(2, 4);
  auto p = b.create();
  ASSERT_TRUE(b.append(p, 2, c).isOk());
  BlockAllocator::SeqId q = 0;
  ASSERT_TRUE(b.fork(p, q).isOk());
  ASSERT_TRUE(b.append(p, 1, c).isOk()); // takes the last free block for its copy
  c.clear();
  EXPECT_TRUE(b.append(q, 2, c).isOk()); // q owns the old block alone: fills it in place
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(b.append(q, 1, c).code(), tfc::Code::OutOfMemory); // a third block: none left
  EXPECT_EQ(b.length(q), 4u);
}

TEST(KvBlocks, UnknownSequencesAreErrors) {
  BlockAllocator a(2, 4);
  Copies c;
  EXPECT_EQ(a.append(42, 1, c).code(), tfc::Code::InvalidArgument);
  EXPECT_EQ(a.append(42, 1, c).message(), "KV cache: sequence 42 is unknown");
  BlockAllocator::SeqId t = 0;
  EXPECT_EQ(a.fork(42, t).code(), tfc::Code::InvalidArgument);
  auto s = a.create();
  ASSERT_TRUE(a.release(s).isOk());
  EXPECT_EQ(a.release(s).code(), tfc::Code::InvalidArgument); // twice
  EXPECT_EQ(a.length(s), 0u);
}

TEST(KvBlocks, ManyBeamsKeepTheRefcountsExact) {
  // A beam-search-like churn: fork, append, release, with the block count
  // always equal to the distinct blocks the live sequences hold.
  BlockAllocator a(64, 4);
  Copies c;
  std::vector<BlockAllocator::SeqId> live{a.create()};
  ASSERT_TRUE(a.append(live[0], 7, c).isOk());
  for (int step = 0; step < 40; ++step) {
    BlockAllocator::SeqId child = 0;
    ASSERT_TRUE(a.fork(live[step % live.size()], child).isOk());
    live.push_back(child);
    for (auto s : live)
      ASSERT_TRUE(a.append(s, 1, c).isOk());
    if (live.size() > 4) {
      ASSERT_TRUE(a.release(live.front()).isOk());
      live.erase(live.begin());
    }
    std::vector<uint32_t> held(a.numBlocks(), 0);
    for (auto s : live)
      for (uint32_t b : *a.table(s))
        ++held[b];
    uint32_t distinct = 0;
    for (uint32_t b = 0; b < a.numBlocks(); ++b) {
      ASSERT_EQ(held[b], a.refs(b)) << "block " << b << " at step " << step;
      distinct += held[b] > 0;
    }
    ASSERT_EQ(distinct, a.usedBlocks());
  }
  for (auto s : live)
    ASSERT_TRUE(a.release(s).isOk());
  EXPECT_EQ(a.freeBlocks(), 64u);
}

/// Applies |m|'s plan to rows holding their own index, as a cache would
/// (one saved row per ring), and returns the rows.
std::vector<int64_t> applyMoves(const RowMoves &m, const std::vector<int64_t> &from,
                                int64_t rows) {
  std::vector<int64_t> data(std::max<size_t>(from.size(), rows), -1);
  std::iota(data.begin(), data.begin() + rows, 0);
  for (int64_t r : m.waves)
    data[r] = data[from[r]];
  for (size_t i = 0, b = 0; i < m.cycleEnd.size(); b = m.cycleEnd[i++]) {
    const int64_t keep = data[m.cycles[b]];
    for (size_t j = b; j + 1 < m.cycleEnd[i]; ++j) {
      EXPECT_EQ(from[m.cycles[j]], m.cycles[j + 1]);
      data[m.cycles[j]] = data[m.cycles[j + 1]];
    }
    EXPECT_EQ(from[m.cycles[m.cycleEnd[i] - 1]], m.cycles[b]);
    data[m.cycles[m.cycleEnd[i] - 1]] = keep;
  }
  data.resize(from.size());
  return data;
}

/// Tokens 0, 1, ... |n| - 1 plus |offset|.
std::vector<int64_t> tokens(int64_t n, int64_t offset = 0) {
  std::vector<int64_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), offset);
  return t;
}

TEST(KvBlocks, APublishedPrefixIsSharedByTheNextSequence) {
  BlockAllocator a(8, 4);
  Copies c;
  const std::vector<int64_t> t = tokens(11);
  auto s = a.create();
  ASSERT_TRUE(a.append(s, 11, c).isOk()); // blocks: 4 + 4 + 3
  EXPECT_EQ(a.publish(s, t.data(), 11), 2u); // the two full blocks only
  EXPECT_EQ(a.publish(s, t.data(), 11), 0u); // once
  EXPECT_EQ(a.cachedPrefix(t.data(), 11), 8u);
  EXPECT_EQ(a.cachedPrefix(t.data(), 7), 4u); // whole blocks within the tokens asked
  EXPECT_EQ(a.heldPrefixBlocks(t.data(), 11), 2u); // s holds both
  EXPECT_EQ(a.heldPrefixBlocks(t.data(), 7), 1u);
  uint64_t got = 0;
  auto s2 = a.createFromPrefix(t.data(), 10, got);
  EXPECT_EQ(got, 8u);
  EXPECT_EQ(a.length(s2), 8u);
  const std::vector<uint32_t> &t1 = *a.table(s), &t2 = *a.table(s2);
  ASSERT_EQ(t2.size(), 2u);
  EXPECT_EQ(t2[0], t1[0]);
  EXPECT_EQ(t2[1], t1[1]);
  EXPECT_EQ(a.refs(t1[0]), 2u);
  EXPECT_EQ(a.usedBlocks(), 3u); // nothing new taken
  // The sequence goes on in a block of its own: nothing is copied.
  ASSERT_TRUE(a.append(s2, 3, c).isOk());
  EXPECT_TRUE(c.empty());
  EXPECT_NE((*a.table(s2))[2], t1[2]);
  // Another first block shares nothing, and a later block of the same tokens
  // after another prefix is another prefix.
  std::vector<int64_t> other = t;
  other[0] = 99;
  EXPECT_EQ(a.cachedPrefix(other.data(), 11), 0u);
  auto s3 = a.createFromPrefix(other.data(), 11, got);
  EXPECT_EQ(got, 0u);
  EXPECT_EQ(a.length(s3), 0u);
  EXPECT_TRUE(a.table(s3)->empty());
  for (auto q : {s, s2, s3})
    ASSERT_TRUE(a.release(q).isOk());
  EXPECT_EQ(a.freeBlocks(), 8u);
  EXPECT_EQ(a.cachedBlocks(), 2u); // free, and still holding the prefix
  EXPECT_EQ(a.cachedPrefix(t.data(), 11), 8u);
  EXPECT_EQ(a.heldPrefixBlocks(t.data(), 11), 0u); // idle: a sharer would take them
}

TEST(KvBlocks, ASaltedPrefixIsSharedWithinItsSaltOnly) {
  BlockAllocator a(8, 4);
  Copies c;
  const std::vector<int64_t> t = tokens(9);
  auto s = a.create(/*salt=*/7);
  ASSERT_TRUE(a.append(s, 9, c).isOk());
  EXPECT_EQ(a.publish(s, t.data(), 9), 2u);
  EXPECT_EQ(a.cachedPrefix(t.data(), 9, 7), 8u);
  EXPECT_EQ(a.cachedPrefix(t.data(), 9), 0u);    // not unsalted
  EXPECT_EQ(a.cachedPrefix(t.data(), 9, 8), 0u); // nor of another salt
  uint64_t got = 0;
  auto same = a.createFromPrefix(t.data(), 9, got, 7);
  EXPECT_EQ(got, 8u);
  // Its fork and its later blocks keep the salt.
  BlockAllocator::SeqId beam = 0;
  ASSERT_TRUE(a.fork(same, beam).isOk());
  std::vector<int64_t> longer = tokens(13);
  ASSERT_TRUE(a.append(beam, 4, c).isOk());
  EXPECT_EQ(a.publish(beam, longer.data(), 12), 1u);
  EXPECT_EQ(a.cachedPrefix(longer.data(), 13, 7), 12u);
  EXPECT_EQ(a.cachedPrefix(longer.data(), 13), 0u);
  auto other = a.createFromPrefix(t.data(), 9, got);
  EXPECT_EQ(got, 0u);
  for (auto q : {s, same, beam, other})
    ASSERT_TRUE(a.release(q).isOk());
  EXPECT_EQ(a.freeBlocks(), 8u);
}

TEST(KvBlocks, CachedBlocksAreTakenLastAndLeastRecentlyUsedFirst) {
  BlockAllocator a(4, 2);
  Copies c;
  const std::vector<int64_t> x = tokens(4), y = tokens(4, 100);
  for (const auto *t : {&x, &y}) {
    auto s = a.create();
    ASSERT_TRUE(a.append(s, 4, c).isOk());
    EXPECT_EQ(a.publish(s, t->data(), 4), 2u);
    ASSERT_TRUE(a.release(s).isOk());
  }
  EXPECT_EQ(a.cachedBlocks(), 4u);
  EXPECT_EQ(a.freeBlocks(), 4u);
  // x is used again (it becomes the most recently let go), then a sequence
  // that needs 2 blocks takes y's, which were let go longer ago.
  uint64_t got = 0;
  auto sx = a.createFromPrefix(x.data(), 4, got);
  EXPECT_EQ(got, 4u);
  EXPECT_EQ(a.cachedBlocks(), 2u);
  EXPECT_EQ(a.freeBlocks(), 2u);
  ASSERT_TRUE(a.release(sx).isOk());
  auto s = a.create();
  ASSERT_TRUE(a.append(s, 4, c).isOk());
  EXPECT_EQ(a.cachedPrefix(y.data(), 4), 0u); // forgotten
  EXPECT_EQ(a.cachedPrefix(x.data(), 4), 4u); // kept
  EXPECT_EQ(a.cachedBlocks(), 2u);
  // Out of blocks: the cached ones go too, and then none is left.
  auto s2 = a.create();
  ASSERT_TRUE(a.append(s2, 4, c).isOk());
  EXPECT_EQ(a.cachedPrefix(x.data(), 4), 0u);
  EXPECT_EQ(a.freeBlocks(), 0u);
  EXPECT_FALSE(a.append(s2, 1, c).isOk());
  ASSERT_TRUE(a.release(s).isOk());
  ASSERT_TRUE(a.release(s2).isOk());
  EXPECT_EQ(a.freeBlocks(), 4u);
  EXPECT_EQ(a.cachedBlocks(), 0u); // never published again
}

TEST(KvBlocks, ForksKeepTheirPrefixAndPublishTheirOwnBlocks) {
  BlockAllocator a(16, 2);
  Copies c;
  std::vector<int64_t> t = tokens(5);
  auto parent = a.create();
  ASSERT_TRUE(a.append(parent, 5, c).isOk());
  EXPECT_EQ(a.publish(parent, t.data(), 5), 2u);
  BlockAllocator::SeqId beam = 0;
  ASSERT_TRUE(a.fork(parent, beam).isOk());
  // Each beam writes a different token at position 5: block 2 is copied for
  // the one that writes first into the shared, partly filled block.
  ASSERT_TRUE(a.append(parent, 1, c).isOk());
  ASSERT_TRUE(a.append(beam, 1, c).isOk());
  std::vector<int64_t> tp = t, tb = t;
  tp.push_back(7);
  tb.push_back(8);
  EXPECT_EQ(a.publish(parent, tp.data(), 6), 1u);
  EXPECT_EQ(a.publish(beam, tb.data(), 6), 1u);
  EXPECT_EQ(a.cachedPrefix(tp.data(), 6), 6u);
  EXPECT_EQ(a.cachedPrefix(tb.data(), 6), 6u);
  uint64_t got = 0;
  auto s = a.createFromPrefix(tb.data(), 6, got);
  EXPECT_EQ(got, 6u);
  EXPECT_EQ(*a.table(s), *a.table(beam));
  for (auto q : {parent, beam, s})
    ASSERT_TRUE(a.release(q).isOk());
  EXPECT_EQ(a.freeBlocks(), 16u);
  EXPECT_EQ(a.cachedBlocks(), 4u); // two shared blocks, and one last block each
}

TEST(RowMoves, InPlaceOrderGivesTheGather) {
  RowMoves m;
  // Beam search's shapes: fan-outs, a drop, a swap (a ring of 2), a ring of 3.
  struct Case {
    std::vector<int64_t> from;
    int64_t rows;
    size_t rings;
  };
  for (const Case &c : {Case{{0, 0, 1, 2}, 4, 0}, Case{{1, 0, 2, 3}, 4, 1},
                        Case{{1, 2, 0, 0, 4}, 5, 1}, Case{{0, 1, 2}, 3, 0},
                        Case{{4, 5, 6, 7}, 8, 0}, Case{{3, 3, 3, 3, 0, 1, 2}, 4, 0},
                        Case{{1, 0, 3, 2, 2}, 4, 2}}) {
    const bool any = m.plan(c.from.data(), (int64_t)c.from.size(), c.rows);
    bool changes = false;
    for (size_t r = 0; r < c.from.size(); ++r)
      changes |= c.from[r] != (int64_t)r;
    EXPECT_EQ(any, changes);
    if (any) {
      EXPECT_EQ(applyMoves(m, c.from, c.rows), c.from);
      EXPECT_EQ(m.cycleEnd.size(), c.rings);
    }
  }
  // Random selections, 1 to 40 new rows out of 1 to 40 old ones.
  std::mt19937 g(5);
  for (int t = 0; t < 2000; ++t) {
    const int64_t rows = 1 + g() % 40, n = t % 2 ? rows : 1 + g() % 40;
    std::vector<int64_t> from(n);
    if (t % 2) { // a permutation: rings only
      std::iota(from.begin(), from.end(), 0);
      std::shuffle(from.begin(), from.end(), g);
    } else { // mostly in place, a third from anywhere
      for (int64_t r = 0; r < n; ++r)
        from[r] = g() % 3 == 0 ? (int64_t)(g() % rows) : std::min(r, rows - 1);
    }
    if (m.plan(from.data(), n, rows))
      ASSERT_EQ(applyMoves(m, from, rows), from) << "case " << t;
  }
}

} // namespace
} // namespace tfrun::rt
