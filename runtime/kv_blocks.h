//===- kv_blocks.h - the paged KV cache's block bookkeeping ---------------===//
//
// The first piece of issue 23's runtime KV cache: which fixed-size blocks of
// token positions each sequence owns. It is the block manager of vLLM's
// PagedAttention, on the CPU side of the runtime, with no tensors: the cache's
// memory is numBlocks blocks of blockSize positions (per layer, K and V), and
// a sequence's block table maps its position p to block table[p / blockSize],
// slot p % blockSize.
//
// - append() reserves room for new tokens, a block at a time, so the memory
//   follows the live tokens to the block.
// - fork() makes a beam: the child shares every block of its parent (a
//   reference count per block); no row is copied.
// - Writing into a shared, partly filled last block copies that one block
//   first (copy-on-write): append() returns the copies the device must make.
// - release() returns a finished or cancelled sequence's blocks to the pool
//   when no other sequence shares them.
// - Prefix caching (vLLM's automatic prefix caching): publish() names each
//   full block of a sequence by a hash of every token from position 0 to its
//   end, and createFromPrefix() starts a new sequence from the published
//   blocks of its tokens' longest published prefix, sharing them. A published
//   block that no sequence holds stays published and counts as free: it is
//   taken (least recently let go first, and unpublished then) only when no
//   unpublished free block is left.
//
//===----------------------------------------------------------------------===//
#ifndef TFC_RUNTIME_KV_BLOCKS_H
#define TFC_RUNTIME_KV_BLOCKS_H

#include "tfc/status.h"

#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

namespace tfrun::rt {

using tfc::Status;

/// A block the device must copy before a sequence writes into it.
struct BlockCopy {
  uint32_t from, to;
};

/// Source positions per block of encoder memory (decode_step's
/// step.memory_blocks) for a source of |srcLen|: 16, or the whole source when
/// shorter. Sessions and the engine lay memory out alike, so that a request's
/// cross-attention adds its keys up in the same blocks on both (the CPU's sums
/// follow the blocks) and its tokens are the same.
inline int64_t memoryBlockLen(int64_t srcLen) { return srcLen > 16 ? 16 : srcLen; }

class BlockAllocator {
public:
  using SeqId = uint64_t;

  /// |numBlocks| blocks of |blockSize| token positions each (both >= 1).
  BlockAllocator(uint32_t numBlocks, uint32_t blockSize);

  uint32_t blockSize() const { return blockSize_; }
  uint32_t numBlocks() const { return (uint32_t)refs_.size(); }
  /// Blocks no sequence holds, published ones included.
  uint32_t freeBlocks() const { return (uint32_t)(free_.size() + idle_.size()); }
  /// Of those, the published ones (a later prompt may still start from them).
  uint32_t cachedBlocks() const { return (uint32_t)idle_.size(); }
  uint32_t usedBlocks() const { return numBlocks() - freeBlocks(); }
  /// Blocks that |tokens| positions take.
  uint32_t blocksFor(uint64_t tokens) const {
    return (uint32_t)((tokens + blockSize_ - 1) / blockSize_);
  }

  /// A new sequence with no tokens. |salt| (prefix caching): the sequence
  /// publishes its blocks, and finds published ones, only among sequences of
  /// the same salt (0: the unsalted prefixes).
  SeqId create(uint64_t salt = 0);
  /// Room for |n| more tokens of |seq|: blocks appended as needed, and a
  /// shared last block that the new tokens would write into copied first (the
  /// copy is added to |copies|). OutOfMemory, with nothing changed, when the
  /// pool lacks the blocks; InvalidArgument for an unknown sequence.
  Status append(SeqId seq, uint64_t n, std::vector<BlockCopy> &copies);
  /// A new sequence sharing all of |parent|'s blocks and its length.
  Status fork(SeqId parent, SeqId &child);
  /// Drops |seq|; its blocks that no other sequence shares return to the pool.
  Status release(SeqId seq);

  /// Publishes |seq|'s full blocks within its first |n| positions, whose
  /// tokens |tokens| holds (from position 0) and whose K and V are written.
  /// A block is published under the hash (XXH3, 128 bits) of its tokens and
  /// of the hash of the blocks before it, so it stands for the whole prefix
  /// up to its end. A prefix another block already stands for is left to
  /// that block. Returns the blocks newly published.
  uint32_t publish(SeqId seq, const int64_t *tokens, uint64_t n);
  /// Whole blocks of |tokens| (at most |n| tokens) that published blocks
  /// hold, in tokens: a multiple of blockSize().
  uint64_t cachedPrefix(const int64_t *tokens, uint64_t n, uint64_t salt = 0) const;
  /// Of the published blocks cachedPrefix() finds, those some sequence holds:
  /// a new sequence sharing them takes them from no one, where an idle one
  /// leaves the free blocks (an admission's count of the blocks it takes).
  uint32_t heldPrefixBlocks(const int64_t *tokens, uint64_t n, uint64_t salt = 0) const;
  /// A new sequence holding the published blocks of the longest published
  /// prefix of |tokens| (whole blocks, at most |n| tokens): its length,
  /// |matched|, is the tokens it starts with. It takes no free block.
  SeqId createFromPrefix(const int64_t *tokens, uint64_t n, uint64_t &matched,
                         uint64_t salt = 0);

  /// |seq|'s block table (block of position p: table[p / blockSize]) and its
  /// length in tokens; null / 0 for an unknown sequence.
  const std::vector<uint32_t> *table(SeqId seq) const;
  uint64_t length(SeqId seq) const;
  /// How many sequences hold |block| (0: free).
  uint32_t refs(uint32_t block) const { return block < refs_.size() ? refs_[block] : 0; }

private:
  /// A prefix's hash: XXH3-128 of the previous block's key and a block's tokens.
  struct Key {
    uint64_t lo = 0, hi = 0;
    bool operator==(const Key &o) const { return lo == o.lo && hi == o.hi; }
  };
  struct KeyHash {
    size_t operator()(const Key &k) const { return static_cast<size_t>(k.lo); }
  };
  struct Seq {
    std::vector<uint32_t> blocks;
    uint64_t length = 0;
    std::vector<Key> keys; ///< the keys of its first keys.size() full blocks
    Key root;              ///< the key its first block chains from (its salt's)
  };
  uint32_t take();
  /// A block whose last holder let go: idle while published, else free.
  void drop(uint32_t b);
  Key chain(const Key &prev, const int64_t *tokens) const;
  /// Follows the published blocks of |tokens|' whole blocks (at most |n|
  /// tokens) from |root|, calling found(block, key) for each; returns the
  /// tokens they hold.
  template <class Found>
  uint64_t walkPrefix(const int64_t *tokens, uint64_t n, const Key &root, Found found) const;
  /// The key a prefix of |salt| starts from: zero unsalted, else its hash.
  static Key rootOf(uint64_t salt);

  uint32_t blockSize_;
  std::vector<uint32_t> refs_;
  std::vector<uint32_t> free_; ///< a stack: the most recently freed block is reused first
  /// Published blocks: by key, and each one's key (published[b] says which are).
  std::unordered_map<Key, uint32_t, KeyHash> byKey_;
  std::vector<Key> keyOf_;
  std::vector<char> published_;
  /// Published blocks no sequence holds, least recently let go first, and
  /// each one's place in it.
  std::list<uint32_t> idle_;
  std::vector<std::list<uint32_t>::iterator> idleAt_;
  std::unordered_map<SeqId, Seq> seqs_;
  SeqId next_ = 1;
  mutable std::vector<int64_t> scratch_; ///< chain()'s input: a key and a block's tokens
};

/// A contiguous cache's row moves, in place (a session's beam search: new row
/// r takes old row from[r]): an order in which no row is overwritten before
/// every row that reads it has read it. First |waves| of rows, split by
/// |waveEnd|, each row of a wave read by no row still to be written, so a
/// wave's copies can run at once; then |cycles|, split by |cycleEnd|, rings
/// of rows that read each other (two beams that swap): each is started by
/// saving its first row, each row then takes the next one's data, and the
/// last the saved copy. So the scratch memory is one row per ring, which beam
/// search seldom makes, where saving every overwritten source first held up
/// to a whole cache's used rows.
struct RowMoves {
  std::vector<int64_t> waves, cycles;
  std::vector<size_t> waveEnd, cycleEnd;
  /// Plans the moves of |n| new rows out of |rows| old ones (from[r] in [0,
  /// rows), checked by the caller). False when no row changes.
  bool plan(const int64_t *from, int64_t n, int64_t rows);

private:
  std::vector<int64_t> readers_;
  std::vector<char> state_;
};

} // namespace tfrun::rt

#endif // TFC_RUNTIME_KV_BLOCKS_H
