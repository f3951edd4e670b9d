//===- engine_memory.cc - the engine's pool of encoder memory -------------===//
//
// An encoder-decoder request's encoder memory (the cross-attentions' K and
// V, @encode's outputs) lives in the engine's memory pool: blocks of memLen
// source positions, one sequence of blocks per batch item, which the item's
// rows (its beams) read through step.memory_blocks. Memory use follows the
// live requests' sources to the block, and beams share one copy
// (docs/generation.md, "The engine").
//
//===----------------------------------------------------------------------===//
#include "runtime/engine_internal.h"

#include <algorithm>
#include <cstring>

namespace tfrun::rt {

Status Engine::Impl::initMemory() {
  const Function &dec = m.functions[decIdx];
  int64_t srcMax = 0;
  uint64_t maxRows = 0;
  for (RowInputDesc &d : rowInputs) {
    if (!d.perItem)
      continue;
    const ValueDesc &v = dec.values[dec.inputs[d.input].value];
    if (v.dims.size() != 3 || v.dims[2] < 0)
      return Status::invalidModel("decode_step input '" + dec.inputs[d.input].name +
                                  "' is not [memory_rows, memory_len, width] encoder memory");
    d.width = v.dims[2];
    srcMax = std::max(srcMax, m.maxDim(v.dims[1]));
    maxRows = static_cast<uint64_t>(m.maxDim(v.dims[0]));
  }
  if (srcMax <= 0)
    return Status::ok(); // no per-item memory
  memLen = memoryBlockLen(srcMax);
  const uint64_t perItem = static_cast<uint64_t>((srcMax + memLen - 1) / memLen);
  const uint64_t blocks = 1 + static_cast<uint64_t>(o.rows) * perItem;
  if (blocks > maxRows || blocks > INT32_MAX)
    return Status::invalidModel("an encoder memory pool of " + std::to_string(blocks) +
                                " blocks exceeds the model's memory_rows " +
                                std::to_string(maxRows));
  memPool = std::make_unique<BlockAllocator>(static_cast<uint32_t>(blocks),
                                             static_cast<uint32_t>(memLen));
  memBuf.resize(rowInputs.size());
  for (size_t k = 0; k < rowInputs.size(); ++k) {
    if (!rowInputs[k].perItem)
      continue;
    const uint64_t floats = blocks * static_cast<uint64_t>(memLen * rowInputs[k].width);
    // calloc: the zero block reads zeros, and the pages of blocks never used
    // are never touched (the pool is sized for every row at the longest source).
    memBuf[k].reset(static_cast<float *>(std::calloc(floats, sizeof(float))));
    if (!memBuf[k])
      return Status::outOfMemory("cannot allocate an encoder memory pool of " +
                                 std::to_string(floats * sizeof(float)) + " bytes");
  }
  std::vector<BlockCopy> none;
  const BlockAllocator::SeqId zero = memPool->create();
  TFC_RETURN_IF_ERROR(memPool->append(zero, static_cast<uint64_t>(memLen), none));
  zeroBlock = memPool->table(zero)->front();
  memHigh = zeroBlock + 1;
  counters.memBlockPositions = memLen;
  for (const RowInputDesc &d : rowInputs)
    if (d.perItem)
      counters.memBlockBytes += memLen * d.width * static_cast<int64_t>(sizeof(float));
  return Status::ok();
}

Status Engine::Impl::storeMemory(Req &r) {
  const int64_t batch = r.plan.batch;
  // Every per-item input has the source's length: the first one's.
  int64_t S = -1;
  for (size_t k = 0; k < rowInputs.size() && S < 0; ++k)
    if (rowInputs[k].perItem) {
      const std::vector<int64_t> &shape = s->fns[encIdx].tensors[rowInputs[k].encOutput].shape;
      if (shape.size() != 3)
        return Status::invalidModel("encoder memory for decode_step input " +
                                    std::to_string(rowInputs[k].input) +
                                    " is not [batch, length, width]");
      S = shape[1];
    }
  if (S < 0)
    return Status::ok();
  {
    std::lock_guard<std::mutex> lk(mu);
    std::vector<BlockCopy> none;
    for (int64_t i = 0; i < batch; ++i) {
      r.itemSeq.push_back(memPool->create());
      TFC_RETURN_IF_ERROR(memPool->append(r.itemSeq.back(), static_cast<uint64_t>(S), none));
      r.itemBlocks.push_back(*memPool->table(r.itemSeq.back()));
      for (uint32_t b : r.itemBlocks.back())
        memHigh = std::max(memHigh, b + 1);
    }
  }
  for (size_t k = 0; k < rowInputs.size(); ++k) {
    const RowInputDesc &d = rowInputs[k];
    if (!d.perItem)
      continue;
    const std::vector<int64_t> &shape = s->fns[encIdx].tensors[d.encOutput].shape;
    const float *src = s->hostOutput(encIdx, d.encOutput); // widened to f32
    if (!src || shape.size() != 3 || shape[0] != batch || shape[1] != S || shape[2] != d.width)
      return Status::invalidModel("encoder memory for decode_step input " +
                                  std::to_string(d.input) + " is not [" + std::to_string(batch) +
                                  ", " + std::to_string(S) + ", " + std::to_string(d.width) +
                                  "]");
    const int64_t w = d.width;
    for (int64_t i = 0; i < batch; ++i)
      for (size_t j = 0; j < r.itemBlocks[i].size(); ++j) {
        const int64_t first = static_cast<int64_t>(j) * memLen;
        const int64_t n = std::min(memLen, S - first);
        float *dst = memBuf[k].get() + static_cast<int64_t>(r.itemBlocks[i][j]) * memLen * w;
        std::memcpy(dst, src + (i * S + first) * w, sizeof(float) * n * w);
        // The last block's other positions: zeros, as the padding of a
        // longer source reads (masked, but finite).
        std::fill(dst + n * w, dst + memLen * w, 0.0f);
      }
  }
  return Status::ok();
}

void Engine::Impl::releaseMemory(Req &r) {
  for (BlockAllocator::SeqId q : r.itemSeq)
    (void)memPool->release(q);
  r.itemSeq.clear();
}

Status Engine::Impl::memoryTables(const std::vector<Req *> &group, int64_t padded,
                                  int64_t &nb) {
  nb = std::max<int64_t>(1, (padded + memLen - 1) / memLen);
  memTables.clear();
  for (const Req *r : group)
    for (int64_t i = 0; i < r->rows; ++i) {
      const int64_t item = r->rowItem[i];
      if (item < 0 || item >= static_cast<int64_t>(r->itemBlocks.size()))
        return Status::internal("request " + std::to_string(r->id) + " has no encoder memory " +
                                "for batch item " + std::to_string(item));
      const std::vector<uint32_t> &t = r->itemBlocks[item];
      for (int64_t j = 0; j < nb; ++j)
        memTables.push_back(j < static_cast<int64_t>(t.size()) ? t[j] : zeroBlock);
    }
  return Status::ok();
}

} // namespace tfrun::rt
