//===- ModelBinFormatTest.cpp - format/model_bin: the container alone -----===//
#include "format/model_bin.h"

#include "tfc/abi.h"

#include <cstdio>
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
  EXPECT_EQ(h.version, 4u);
  EXPECT_NE(h.checksum, tfc_fnv1a64(data + kHeaderSize, file.size() - kHeaderSize));
  file[8] = 3; // the same bytes as a version-3 file: the version-4 checksum is wrong for it
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
