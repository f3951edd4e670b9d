//===- ModelBinFormatTest.cpp - format/model_bin: the container alone -----===//
#include "format/model_bin.h"
#include "format/arena_plan.h"

#include "tfc/abi.h"

#include <algorithm>
#include <cstdio>
#include <random>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

namespace tfc::format {
namespace {

TEST(ModelBinFormat, AssembledFileReadsBack) {
  Writer m;
  m.str(producer());
  Instr in;
  in.kernel = TFC_KERNEL_ATTENTION;
  in.inputs = {3, 4, 5};
  in.output = 6;
  in.ints = {1, 8, -1};
  in.floats = {0.125, -1e9};
  m.instr(in);
  const std::string weights(100, '\x7f');
  const std::string file = assemble(m.buf, weights);
  const auto *data = reinterpret_cast<const uint8_t *>(file.data());
  Header h;
  bool unsupported = true;
  ASSERT_EQ(readHeader(data, file.size(), h, unsupported), "");
  EXPECT_FALSE(unsupported);
  EXPECT_EQ(h.version, TFC_FORMAT_VERSION);
  EXPECT_EQ(h.metaOffset, kHeaderSize);
  EXPECT_EQ(h.weightsOffset % TFC_WEIGHT_ALIGN, 0u);
  EXPECT_EQ(h.fileSize, file.size());
  EXPECT_EQ(file.substr(h.weightsOffset), weights);
  Reader r(data + h.metaOffset, h.metaSize);
  EXPECT_EQ(r.str(), std::string("tfc ") + TFC_VERSION_STRING);
  Instr back = r.instr();
  EXPECT_TRUE(r.ok());
  EXPECT_TRUE(r.atEnd());
  EXPECT_EQ(back.kernel, in.kernel);
  EXPECT_EQ(back.inputs, in.inputs);
  EXPECT_EQ(back.output, in.output);
  EXPECT_EQ(back.ints, in.ints);
  EXPECT_EQ(back.floats, in.floats);
}

TEST(ModelBinFormat, HeaderErrors) {
  std::string file = assemble("meta", "");
  auto *data = reinterpret_cast<uint8_t *>(file.data());
  Header h;
  bool unsupported = false;
  EXPECT_EQ(readHeader(data, 10, h, unsupported),
            "model.bin is truncated: 10 bytes, the header alone is 64");
  EXPECT_EQ(readHeader(data, file.size() - 1, h, unsupported),
            "model.bin is truncated or padded: header says " + std::to_string(file.size()) +
                " bytes, got " + std::to_string(file.size() - 1));
  file[kHeaderSize] ^= 1;
  EXPECT_EQ(readHeader(data, file.size(), h, unsupported),
            "model.bin checksum mismatch: the file is corrupt");
  file[8] = 99; // version
  EXPECT_NE(readHeader(data, file.size(), h, unsupported), "");
  EXPECT_TRUE(unsupported);
}

/// FNV-1a 64 of the bytes after the header: the checksum of versions 2 and 3.
TEST(ModelBinFormat, VersionThreeFilesKeepTheirChecksum) {
  std::string file = assemble("meta", std::string(200, '\x11'));
  auto *data = reinterpret_cast<uint8_t *>(file.data());
  Header h;
  bool unsupported = false;
  ASSERT_EQ(readHeader(data, file.size(), h, unsupported), "");
  EXPECT_EQ(h.version, TFC_FORMAT_VERSION);
  EXPECT_NE(h.checksum, tfc_fnv1a64(data + kHeaderSize, file.size() - kHeaderSize));
  file[8] = 3; // the same bytes as a version-3 file: the XXH3 checksum is wrong for it
  EXPECT_EQ(readHeader(data, file.size(), h, unsupported),
            "model.bin checksum mismatch: the file is corrupt");
  fixChecksum(data, file.size());
  ASSERT_EQ(readHeader(data, file.size(), h, unsupported), "");
  EXPECT_EQ(h.checksum, tfc_fnv1a64(data + kHeaderSize, file.size() - kHeaderSize));
}

/// Checking a mapped file chunk by chunk, dropping its pages: the same answer
/// as the one-shot checksum, the bytes still readable after, and a flipped bit
/// past the first chunk is found.
TEST(ModelBinFormat, MappedChecksumDropsPagesAndStillChecks) {
  std::string file = assemble("meta", std::string(size_t(20) << 20, '\0'));
  for (size_t i = 4093; i < file.size(); i += 4093)
    file[i] = (char)(i * 31);
  fixChecksum(reinterpret_cast<uint8_t *>(file.data()), file.size());
  char path[] = "/tmp/tfc-format-test-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, file.data(), file.size()), (ssize_t)file.size());
  auto check = [&](std::string &why) {
    void *p = mmap(nullptr, file.size(), PROT_READ, MAP_PRIVATE, fd, 0);
    ASSERT_NE(p, MAP_FAILED);
    Header h;
    bool unsupported = false;
    why = readHeader(static_cast<uint8_t *>(p), file.size(), h, unsupported, /*dropPages=*/true);
    EXPECT_EQ(std::memcmp(p, file.data(), file.size()), 0); // the pages fault back in
    munmap(p, file.size());
  };
  std::string why;
  check(why);
  EXPECT_EQ(why, "");
  // The same bytes as a version-3 file, with its FNV-1a checksum.
  std::string v3 = file;
  v3[8] = 3;
  fixChecksum(reinterpret_cast<uint8_t *>(v3.data()), v3.size());
  ASSERT_EQ(pwrite(fd, v3.data(), 64, 0), 64);
  std::swap(file, v3);
  check(why);
  EXPECT_EQ(why, "");
  std::swap(file, v3);
  ASSERT_EQ(pwrite(fd, file.data(), 64, 0), 64);
  const off_t at = (off_t)(13 << 20) + 5; // in the second 8 MB chunk
  char c = (char)(file[at] ^ 4);
  ASSERT_EQ(pwrite(fd, &c, 1, at), 1);
  file[at] = c;
  check(why);
  EXPECT_EQ(why, "model.bin checksum mismatch: the file is corrupt");
  close(fd);
  unlink(path);
}

/// planArena against the plain n^2 greedy it speeds up: the same offsets,
/// no two items that live at once share a byte, 64-byte alignment.
TEST(ArenaPlan, MatchesTheNaiveGreedyAndNeverOverlaps) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<ArenaItem> items(1 + rng() % 300);
    const int64_t steps = 1 + (int64_t)(rng() % 400);
    for (ArenaItem &it : items) {
      it.from = (int64_t)(rng() % steps);
      it.to = std::min<int64_t>(steps, it.from + (int64_t)(rng() % (rng() % 4 ? 8 : steps)));
      it.bytes = rng() % 5 ? 64 * (1 + rng() % 50) : rng() % 100000;
    }
    std::vector<uint64_t> got;
    uint64_t size = 0;
    ASSERT_TRUE(planArena(items, got, size));
    // The naive greedy: largest first (stable), lowest gap among all placed.
    auto round = [](uint64_t b) { return (b + 63) / 64 * 64; };
    std::vector<uint32_t> order(items.size());
    for (uint32_t i = 0; i < order.size(); ++i)
      order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
      return round(items[a].bytes) > round(items[b].bytes);
    });
    std::vector<uint64_t> want(items.size());
    std::vector<uint32_t> placed;
    for (uint32_t v : order) {
      std::vector<std::pair<uint64_t, uint64_t>> busy;
      for (uint32_t p : placed)
        if (items[p].from <= items[v].to && items[v].from <= items[p].to)
          busy.push_back({want[p], want[p] + round(items[p].bytes)});
      std::sort(busy.begin(), busy.end());
      uint64_t at = 0;
      for (auto [lo, hi] : busy) {
        if (at + round(items[v].bytes) <= lo)
          break;
        at = std::max(at, hi);
      }
      want[v] = at;
      placed.push_back(v);
    }
    ASSERT_EQ(got, want) << "trial " << trial;
    uint64_t end = 0;
    for (size_t a = 0; a < items.size(); ++a) {
      EXPECT_EQ(got[a] % 64, 0u);
      end = std::max(end, got[a] + round(items[a].bytes));
      for (size_t b = a + 1; b < items.size(); ++b)
        if (items[a].from <= items[b].to && items[b].from <= items[a].to && items[a].bytes &&
            items[b].bytes)
          EXPECT_TRUE(got[a] + items[a].bytes <= got[b] || got[b] + items[b].bytes <= got[a]);
    }
    EXPECT_EQ(size, end);
  }
}

TEST(ArenaPlan, PeakAndOverflow) {
  int64_t at = -1;
  EXPECT_EQ(peakLiveBytes({{100, 0, 2}, {50, 2, 3}, {70, 3, 3}}, 3, at), 150u);
  EXPECT_EQ(at, 2);
  std::vector<uint64_t> off;
  uint64_t size = 0;
  EXPECT_FALSE(planArena({{UINT64_MAX - 10, 0, 1}}, off, size));
  EXPECT_FALSE(planArena({{UINT64_MAX / 2 + 64, 0, 1}, {UINT64_MAX / 2 + 64, 0, 1}}, off, size));
}

TEST(ModelBinFormat, ReaderStopsAtTheEnd) {
  const uint8_t bytes[6] = {2, 0, 0, 0, 'a', 'b'};
  Reader r(bytes, sizeof bytes);
  EXPECT_EQ(r.str(), "ab");
  EXPECT_EQ(r.u64(), 0u);
  EXPECT_FALSE(r.ok());
  Reader c(bytes, 4);
  EXPECT_EQ(c.count(8), 0u); // 2 items of 8 bytes cannot fit in 0 bytes
  EXPECT_FALSE(c.ok());
}

} // namespace
} // namespace tfc::format
