//===- kv_blocks.cc - the paged KV cache's block bookkeeping --------------===//
#include "runtime/kv_blocks.h"

#include <algorithm>
#include <string>

namespace tfrun::rt {

BlockAllocator::BlockAllocator(uint32_t numBlocks, uint32_t blockSize)
    : blockSize_(std::max<uint32_t>(blockSize, 1)), refs_(numBlocks, 0) {
  free_.reserve(numBlocks);
  for (uint32_t b = numBlocks; b-- > 0;) // block 0 is taken first
    free_.push_back(b);
}

uint32_t BlockAllocator::take() {
  const uint32_t b = free_.back();
  free_.pop_back();
  refs_[b] = 1;
  return b;
}

BlockAllocator::SeqId BlockAllocator::create() {
  const SeqId id = next_++;
  seqs_.emplace(id, Seq{});
  return id;
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
  if (need > free_.size())
    return Status::outOfMemory("KV cache: " + std::to_string(need) + " more blocks of " +
                               std::to_string(blockSize_) + " positions needed, " +
                               std::to_string(free_.size()) + " free");
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
      free_.push_back(b);
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
