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
//
// Nothing here is wired into the attention kernels yet (issue 23).
//
//===----------------------------------------------------------------------===//
#ifndef TFC_RUNTIME_KV_BLOCKS_H
#define TFC_RUNTIME_KV_BLOCKS_H

#include "tfc/status.h"

#include <cstdint>
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
  uint32_t freeBlocks() const { return (uint32_t)free_.size(); }
  uint32_t usedBlocks() const { return numBlocks() - freeBlocks(); }
  /// Blocks that |tokens| positions take.
  uint32_t blocksFor(uint64_t tokens) const {
    return (uint32_t)((tokens + blockSize_ - 1) / blockSize_);
  }

  /// A new sequence with no tokens.
  SeqId create();
  /// Room for |n| more tokens of |seq|: blocks appended as needed, and a
  /// shared last block that the new tokens would write into copied first (the
  /// copy is added to |copies|). OutOfMemory, with nothing changed, when the
  /// pool lacks the blocks; InvalidArgument for an unknown sequence.
  Status append(SeqId seq, uint64_t n, std::vector<BlockCopy> &copies);
  /// A new sequence sharing all of |parent|'s blocks and its length.
  Status fork(SeqId parent, SeqId &child);
  /// Drops |seq|; its blocks that no other sequence shares return to the pool.
  Status release(SeqId seq);

  /// |seq|'s block table (block of position p: table[p / blockSize]) and its
  /// length in tokens; null / 0 for an unknown sequence.
  const std::vector<uint32_t> *table(SeqId seq) const;
  uint64_t length(SeqId seq) const;
  /// How many sequences hold |block| (0: free).
  uint32_t refs(uint32_t block) const { return block < refs_.size() ? refs_[block] : 0; }

private:
  struct Seq {
    std::vector<uint32_t> blocks;
    uint64_t length = 0;
  };
  uint32_t take();

  uint32_t blockSize_;
  std::vector<uint32_t> refs_;
  std::vector<uint32_t> free_; ///< a stack: the most recently freed block is reused first
  std::unordered_map<SeqId, Seq> seqs_;
  SeqId next_ = 1;
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
