//===- kv_blocks.cc - the paged KV cache's block bookkeeping --------------===//
#include "runtime/kv_blocks.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <string>

#include <xxhash.h>

namespace tfrun::rt {

BlockAllocator::BlockAllocator(uint32_t numBlocks, uint32_t blockSize)
    : blockSize_(std::max<uint32_t>(blockSize, 1)), refs_(numBlocks, 0), keyOf_(numBlocks),
      published_(numBlocks, 0), idleAt_(numBlocks) {
  free_.reserve(numBlocks);
  for (uint32_t b = numBlocks; b-- > 0;) // block 0 is taken first
    free_.push_back(b);
}

uint32_t BlockAllocator::take() {
  uint32_t b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else { // the published block let go longest ago: its prefix is forgotten
    b = idle_.front();
    idle_.pop_front();
    byKey_.erase(keyOf_[b]);
    published_[b] = 0;
  }
  refs_[b] = 1;
  return b;
}

void BlockAllocator::drop(uint32_t b) {
  if (published_[b]) {
    idle_.push_back(b);
    idleAt_[b] = std::prev(idle_.end());
  } else {
    free_.push_back(b);
  }
}

BlockAllocator::Key BlockAllocator::chain(const Key &prev, const int64_t *tokens) const {
  // XXH3 (libxxhash, the checksum model.bin already uses): fast on a block's
  // few tokens, and 128 bits, so two different prefixes share a key with
  // negligible probability (vLLM hashes its blocks the same way).
  scratch_.resize(2 + blockSize_);
  std::memcpy(scratch_.data(), &prev, sizeof prev);
  std::memcpy(scratch_.data() + 2, tokens, blockSize_ * sizeof(int64_t));
  const XXH128_hash_t h = XXH3_128bits(scratch_.data(), scratch_.size() * sizeof(int64_t));
  return Key{h.low64, h.high64};
}

uint32_t BlockAllocator::publish(SeqId seq, const int64_t *tokens, uint64_t n) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end() || !tokens)
    return 0;
  Seq &s = it->second;
  const size_t full = static_cast<size_t>(std::min(n, s.length) / blockSize_);
  uint32_t added = 0;
  for (size_t i = s.keys.size(); i < full; ++i) {
    const Key k = chain(i ? s.keys[i - 1] : s.root, tokens + i * blockSize_);
    s.keys.push_back(k);
    const uint32_t b = s.blocks[i];
    if (!published_[b] && byKey_.emplace(k, b).second) {
      published_[b] = 1;
      keyOf_[b] = k;
      ++added;
    }
  }
  return added;
}

template <class Found>
uint64_t BlockAllocator::walkPrefix(const int64_t *tokens, uint64_t n, const Key &root,
                                    Found found) const {
  Key k = root;
  uint64_t at = 0;
  for (; tokens && at + blockSize_ <= n; at += blockSize_) {
    k = chain(k, tokens + at);
    auto f = byKey_.find(k);
    if (f == byKey_.end())
      break;
    found(f->second, k);
  }
  return at;
}

uint64_t BlockAllocator::cachedPrefix(const int64_t *tokens, uint64_t n, uint64_t salt) const {
  return walkPrefix(tokens, n, rootOf(salt), [](uint32_t, const Key &) {});
}

uint32_t BlockAllocator::heldPrefixBlocks(const int64_t *tokens, uint64_t n,
                                          uint64_t salt) const {
  uint32_t held = 0;
  walkPrefix(tokens, n, rootOf(salt), [&](uint32_t b, const Key &) { held += refs_[b] > 0; });
  return held;
}

BlockAllocator::SeqId BlockAllocator::createFromPrefix(const int64_t *tokens, uint64_t n,
                                                       uint64_t &matched, uint64_t salt) {
  const SeqId id = create(salt);
  Seq &s = seqs_[id];
  s.length = matched = walkPrefix(tokens, n, s.root, [&](uint32_t b, const Key &k) {
    if (refs_[b]++ == 0)
      idle_.erase(idleAt_[b]);
    s.blocks.push_back(b);
    s.keys.push_back(k);
  });
  return id;
}

BlockAllocator::SeqId BlockAllocator::create(uint64_t salt) {
  const SeqId id = next_++;
  Seq s;
  s.root = rootOf(salt);
  seqs_.emplace(id, std::move(s));
  return id;
}

BlockAllocator::Key BlockAllocator::rootOf(uint64_t salt) {
  if (salt == 0)
    return Key{};
  const XXH128_hash_t h = XXH3_128bits(&salt, sizeof salt);
  return Key{h.low64, h.high64};
}

Status BlockAllocator::append(SeqId seq, uint64_t n, std::vector<BlockCopy> &copies) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end())
    return Status::invalidArgument("KV cache: sequence " + std::to_string(seq) + " is unknown");
  Seq &s = it->second;
  if (n == 0)
    return Status::ok();
  // The last block takes new tokens when it has room; written while shared, it
  // is copied first.
  const bool partial = s.length % blockSize_ != 0;
  const bool cow = partial && refs_[s.blocks.back()] > 1;
  const uint64_t room = partial ? blockSize_ - s.length % blockSize_ : 0;
  const uint64_t fresh = n > room ? blocksFor(n - room) : 0;
  const uint64_t need = fresh + (cow ? 1 : 0);
  if (need > freeBlocks())
    return Status::outOfMemory("KV cache: " + std::to_string(need) + " more blocks of " +
                               std::to_string(blockSize_) + " positions needed, " +
                               std::to_string(freeBlocks()) + " free");
  if (cow) {
    const uint32_t from = s.blocks.back(), to = take();
    --refs_[from];
    s.blocks.back() = to;
    copies.push_back({from, to});
  }
  for (uint64_t i = 0; i < fresh; ++i)
    s.blocks.push_back(take());
  s.length += n;
  return Status::ok();
}

Status BlockAllocator::fork(SeqId parent, SeqId &child) {
  auto it = seqs_.find(parent);
  if (it == seqs_.end())
    return Status::invalidArgument("KV cache: sequence " + std::to_string(parent) +
                                   " is unknown");
  for (uint32_t b : it->second.blocks)
    ++refs_[b];
  child = next_++;
  Seq copy = it->second; // |it| may move when the map grows
  seqs_.emplace(child, std::move(copy));
  return Status::ok();
}

Status BlockAllocator::release(SeqId seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end())
    return Status::invalidArgument("KV cache: sequence " + std::to_string(seq) + " is unknown");
  for (uint32_t b : it->second.blocks)
    if (--refs_[b] == 0)
      drop(b);
  seqs_.erase(it);
  return Status::ok();
}

const std::vector<uint32_t> *BlockAllocator::table(SeqId seq) const {
  auto it = seqs_.find(seq);
  return it == seqs_.end() ? nullptr : &it->second.blocks;
}

uint64_t BlockAllocator::length(SeqId seq) const {
  auto it = seqs_.find(seq);
  return it == seqs_.end() ? 0 : it->second.length;
}

bool RowMoves::plan(const int64_t *from, int64_t n, int64_t rows) {
  waves.clear();
  waveEnd.clear();
  cycles.clear();
  cycleEnd.clear();
  const size_t all = static_cast<size_t>(std::max(n, rows));
  readers_.assign(all, 0); // rows still to be written that read this one
  state_.assign(all, 0);   // 1: to write, 2: written
  bool any = false;
  for (int64_t r = 0; r < n; ++r)
    if (from[r] != r) {
      state_[r] = 1;
      ++readers_[from[r]];
      any = true;
    }
  if (!any)
    return false;
  for (int64_t r = 0; r < n; ++r)
    if (state_[r] == 1 && readers_[r] == 0)
      waves.push_back(r);
  for (size_t begin = 0; begin < waves.size();) {
    const size_t end = waves.size();
    waveEnd.push_back(end);
    for (size_t i = begin; i < end; ++i) {
      state_[waves[i]] = 2;
      const int64_t f = from[waves[i]];
      if (--readers_[f] == 0 && state_[f] == 1)
        waves.push_back(f);
    }
    begin = end;
  }
  // What is left to write is rings: each row read only by the one before it
  // (every row left has a reader left and reads one row, so each has exactly
  // one, and reads a row that is left).
  for (int64_t r = 0; r < n; ++r) {
    if (state_[r] != 1)
      continue;
    for (int64_t at = r; state_[at] == 1; at = from[at]) {
      state_[at] = 2;
      cycles.push_back(at);
    }
    cycleEnd.push_back(cycles.size());
  }
  return true;
}

} // namespace tfrun::rt
