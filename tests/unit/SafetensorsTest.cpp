//===- SafetensorsTest.cpp - Tests for the safetensors reader/writer ------===//
//
// The reader is the first thing to touch user-supplied weight files, so most
// of these tests feed it deliberately broken files and pin the exact error
// message: those messages are what a user sees, and a silent change in which
// check fires (or a crash instead of an error) is a regression. The round-trip
// tests double as the only tests of the writer.
//
//===----------------------------------------------------------------------===//

#include "frontend/Safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace tfc {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

/// Builds a file image: 8-byte little-endian |declaredHeaderSize|, the header
/// text, then |dataBytes| bytes of a recognisable pattern.
std::vector<uint8_t> makeImage(uint64_t declaredHeaderSize,
                               const std::string &header, size_t dataBytes) {
  std::vector<uint8_t> out;
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<uint8_t>(declaredHeaderSize >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  for (size_t i = 0; i < dataBytes; ++i)
    out.push_back(static_cast<uint8_t>(i * 7 + 1));
  return out;
}

/// Same, with the header size prefix matching the header text.
std::vector<uint8_t> makeImage(const std::string &header, size_t dataBytes) {
  return makeImage(header.size(), header, dataBytes);
}

/// Opens |image| with fromBuffer, expects failure and returns the message.
std::string bufferError(const std::vector<uint8_t> &image) {
  std::string error;
  auto file = SafetensorsFile::fromBuffer(image.data(), image.size(), &error);
  EXPECT_EQ(file, nullptr);
  EXPECT_FALSE(error.empty());
  return error;
}

/// Error for a header |h| followed by |dataBytes| bytes of data.
std::string headerError(const std::string &h, size_t dataBytes = 64) {
  return bufferError(makeImage(h, dataBytes));
}

std::vector<uint8_t> readAll(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void writeAll(const std::string &path, const std::vector<uint8_t> &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char *>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good());
}

template <typename T> std::vector<uint8_t> bytesOf(const std::vector<T> &v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  if (!b.empty())
    std::memcpy(b.data(), v.data(), b.size());
  return b;
}

/// Gives each test its own fresh directory under testing::TempDir().
class SafetensorsTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string tmpl = (fs::path(::testing::TempDir()) / "st-test-XXXXXX");
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    ASSERT_NE(::mkdtemp(buf.data()), nullptr);
    dir = buf.data();
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string path(const std::string &name) const {
    return (fs::path(dir) / name).string();
  }
  std::vector<std::string> listDir() const {
    std::vector<std::string> names;
    for (const auto &e : fs::directory_iterator(dir))
      names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
  /// Writes a small valid file and returns its path.
  std::string writeSample() {
    static const std::vector<float> w = {1, 2, 3, 4, 5, 6};
    static const std::vector<int32_t> b = {7, 8};
    std::string p = path("sample.safetensors");
    std::string error;
    EXPECT_TRUE(writeSafetensors(
        p,
        {{"weight", StDType::F32, {2, 3}, w.data(), w.size() * 4},
         {"bias", StDType::I32, {2}, b.data(), b.size() * 4}},
        {{"format", "pt"}}, &error))
        << error;
    return p;
  }

  std::string dir;
};

//===----------------------------------------------------------------------===//
// dtypes
//===----------------------------------------------------------------------===//

TEST(SafetensorsDTypeTest, NamesAndSizesRoundTrip) {
  struct Case {
    const char *name;
    StDType dtype;
    size_t size;
  } cases[] = {{"F64", StDType::F64, 8},   {"F32", StDType::F32, 4},
               {"F16", StDType::F16, 2},   {"BF16", StDType::BF16, 2},
               {"I64", StDType::I64, 8},   {"I32", StDType::I32, 4},
               {"I16", StDType::I16, 2},   {"I8", StDType::I8, 1},
               {"U8", StDType::U8, 1},     {"BOOL", StDType::Bool, 1}};
  for (const Case &c : cases) {
    StDType parsed = StDType::U8;
    ASSERT_TRUE(parseStDType(c.name, parsed)) << c.name;
    EXPECT_EQ(parsed, c.dtype) << c.name;
    EXPECT_STREQ(stDTypeName(c.dtype), c.name);
    EXPECT_EQ(stDTypeSize(c.dtype), c.size) << c.name;
  }
}

TEST(SafetensorsDTypeTest, RejectsUnknownSpellingsAndLeavesOutputAlone) {
  for (const char *bad :
       {"", "f32", "Bool", "bool", "F32 ", "FLOAT", "F8_E4M3", "U16", "U32"}) {
    StDType out = StDType::I16;
    EXPECT_FALSE(parseStDType(bad, out)) << "'" << bad << "'";
    EXPECT_EQ(out, StDType::I16) << "'" << bad << "'";
  }
}

TEST(SafetensorsDTypeTest, NumElements) {
  StTensor scalar{"s", StDType::F32, {}, nullptr, 4};
  StTensor empty{"e", StDType::F32, {3, 0, 2}, nullptr, 0};
  StTensor matrix{"m", StDType::F32, {2, 3, 4}, nullptr, 96};
  EXPECT_EQ(scalar.numElements(), 1);
  EXPECT_EQ(empty.numElements(), 0);
  EXPECT_EQ(matrix.numElements(), 24);
}

//===----------------------------------------------------------------------===//
// Round trips
//===----------------------------------------------------------------------===//

TEST_F(SafetensorsTest, RoundTripSeveralDTypesAndShapes) {
  const std::vector<float> f32 = {1.5f, -2.0f, 3.25f, 0.0f, 1e-8f, -7.0f};
  const std::vector<double> f64 = {3.141592653589793};
  const std::vector<uint16_t> f16 = {0x3c00, 0xc000, 0x7bff, 0x0001};
  const std::vector<uint16_t> bf16 = {0x3f80, 0x4000, 0xbf80, 0x0000};
  const std::vector<int64_t> i64 = {INT64_MIN, -1, INT64_MAX};
  const std::vector<int32_t> i32 = {1, -2, 3, -4};
  const std::vector<int16_t> i16 = {-32768, 32767};
  const std::vector<int8_t> i8 = {-128, 0, 127, 5, 6};
  const std::vector<uint8_t> u8 = {0, 128, 255};
  const std::vector<uint8_t> boolean = {1, 0};

  struct Expected {
    std::string name;
    StDType dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
  };
  // Deliberately not in name order, to check that tensors() sorts.
  std::vector<Expected> expected = {
      {"w_f32", StDType::F32, {2, 3}, bytesOf(f32)},
      {"scalar_f64", StDType::F64, {}, bytesOf(f64)},
      {"h_f16", StDType::F16, {4}, bytesOf(f16)},
      {"b_bf16", StDType::BF16, {2, 2}, bytesOf(bf16)},
      {"empty_f32", StDType::F32, {0, 4}, {}},
      {"i64", StDType::I64, {3}, bytesOf(i64)},
      {"i32", StDType::I32, {1, 2, 2}, bytesOf(i32)},
      {"i16", StDType::I16, {2, 1}, bytesOf(i16)},
      {"i8", StDType::I8, {5}, bytesOf(i8)},
      {"u8", StDType::U8, {3}, bytesOf(u8)},
      {"bool", StDType::Bool, {2}, bytesOf(boolean)},
  };
  std::vector<StTensorView> views;
  for (const Expected &e : expected)
    views.push_back({e.name, e.dtype, e.shape,
                     e.bytes.empty() ? nullptr : e.bytes.data(),
                     e.bytes.size()});

  std::string p = path("model.safetensors");
  std::string error;
  ASSERT_TRUE(writeSafetensors(p, views, {}, &error)) << error;

  // The writer pads the header so the data section starts 8-byte aligned.
  std::vector<uint8_t> image = readAll(p);
  ASSERT_GE(image.size(), 8u);
  uint64_t headerSize = 0;
  for (int i = 7; i >= 0; --i)
    headerSize = (headerSize << 8) | image[i];
  EXPECT_EQ(headerSize % 8, 0u);

  auto file = SafetensorsFile::open(p, &error);
  ASSERT_NE(file, nullptr) << error;
  ASSERT_EQ(file->tensors().size(), expected.size());
  for (size_t i = 1; i < file->tensors().size(); ++i)
    EXPECT_LT(file->tensors()[i - 1].name, file->tensors()[i].name);
  EXPECT_TRUE(file->metadata().empty());

  for (const Expected &e : expected) {
    SCOPED_TRACE(e.name);
    const StTensor *t = file->find(e.name);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->name, e.name);
    EXPECT_EQ(t->dtype, e.dtype);
    EXPECT_EQ(t->shape, e.shape);
    EXPECT_EQ(t->nbytes, e.bytes.size());
    EXPECT_EQ(static_cast<size_t>(t->numElements()) * stDTypeSize(t->dtype),
              e.bytes.size());
    std::vector<uint8_t> got(t->data, t->data + t->nbytes);
    EXPECT_EQ(got, e.bytes);
  }
  EXPECT_EQ(file->find("scalar_f64")->numElements(), 1);
  EXPECT_EQ(file->find("empty_f32")->numElements(), 0);
  double pi;
  std::memcpy(&pi, file->find("scalar_f64")->data, sizeof(pi));
  EXPECT_EQ(pi, 3.141592653589793);
}

TEST_F(SafetensorsTest, MetadataRoundTrip) {
  std::string p = path("meta.safetensors");
  std::string error;
  std::map<std::string, std::string> meta = {
      {"format", "pt"}, {"note", "quotes \" and \\ and \n newline"}, {"", ""}};
  const std::vector<float> x = {1};
  ASSERT_TRUE(
      writeSafetensors(p, {{"x", StDType::F32, {1}, x.data(), 4}}, meta, &error))
      << error;
  auto file = SafetensorsFile::open(p, &error);
  ASSERT_NE(file, nullptr) << error;
  EXPECT_EQ(file->metadata(), meta);
  // "__metadata__" is not a tensor.
  EXPECT_EQ(file->tensors().size(), 1u);
  EXPECT_EQ(file->find("__metadata__"), nullptr);
}

TEST_F(SafetensorsTest, EmptyFileWithNoTensors) {
  std::string p = path("none.safetensors");
  std::string error;
  ASSERT_TRUE(writeSafetensors(p, {}, {}, &error)) << error;
  auto file = SafetensorsFile::open(p, &error);
  ASSERT_NE(file, nullptr) << error;
  EXPECT_TRUE(file->tensors().empty());
  EXPECT_EQ(file->find(""), nullptr);
}

TEST_F(SafetensorsTest, FindHitAndMiss) {
  std::string error;
  auto file = SafetensorsFile::open(writeSample(), &error);
  ASSERT_NE(file, nullptr) << error;
  ASSERT_EQ(file->tensors().size(), 2u);
  EXPECT_EQ(file->find("bias"), &file->tensors()[0]);
  EXPECT_EQ(file->find("weight"), &file->tensors()[1]);
  EXPECT_EQ(file->find("weigh"), nullptr);
  EXPECT_EQ(file->find("weights"), nullptr);
  EXPECT_EQ(file->find("Weight"), nullptr);
  EXPECT_EQ(file->find("a"), nullptr);
  EXPECT_EQ(file->find("z"), nullptr);
  EXPECT_EQ(file->find(""), nullptr);
  EXPECT_EQ(file->metadata().at("format"), "pt");
}

TEST_F(SafetensorsTest, FromBufferPointsIntoCallerBuffer) {
  std::vector<uint8_t> image = readAll(writeSample());
  std::string error;
  auto file = SafetensorsFile::fromBuffer(image.data(), image.size(), &error);
  ASSERT_NE(file, nullptr) << error;
  const StTensor *w = file->find("weight");
  ASSERT_NE(w, nullptr);
  EXPECT_GE(w->data, image.data());
  EXPECT_LE(w->data + w->nbytes, image.data() + image.size());
  std::vector<float> got(6);
  std::memcpy(got.data(), w->data, 24);
  EXPECT_EQ(got, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  const StTensor *b = file->find("bias");
  ASSERT_NE(b, nullptr);
  int32_t b1;
  std::memcpy(&b1, b->data + 4, 4);
  EXPECT_EQ(b1, 8);
}

TEST_F(SafetensorsTest, HandWrittenHeaderWithPaddingAndUnorderedOffsets) {
  // Tensors stored in the reverse order of their names, with trailing-space
  // padding, a scalar, a zero-size tensor and a null "__metadata__".
  std::string h = R"({"a":{"dtype":"I16","shape":[2],"data_offsets":[4,8]},)"
                  R"("b":{"dtype":"F32","shape":[],"data_offsets":[0,4]},)"
                  R"("c":{"dtype":"U8","shape":[0],"data_offsets":[8,8]},)"
                  R"("__metadata__":null})";
  h.append(13, ' ');
  std::vector<uint8_t> image = makeImage(h, 8);
  std::string error;
  auto file = SafetensorsFile::fromBuffer(image.data(), image.size(), &error);
  ASSERT_NE(file, nullptr) << error;
  const uint8_t *dataSection = image.data() + 8 + h.size();
  ASSERT_EQ(file->tensors().size(), 3u);
  EXPECT_EQ(file->find("a")->data, dataSection + 4);
  EXPECT_EQ(file->find("b")->data, dataSection);
  EXPECT_EQ(file->find("b")->shape, std::vector<int64_t>{});
  EXPECT_EQ(file->find("c")->nbytes, 0u);
  EXPECT_TRUE(file->metadata().empty());
}

TEST_F(SafetensorsTest, OpenToleratesNullErrorPointer) {
  EXPECT_EQ(SafetensorsFile::open(path("missing"), nullptr), nullptr);
  std::vector<uint8_t> junk = {1, 2, 3};
  EXPECT_EQ(SafetensorsFile::fromBuffer(junk.data(), junk.size(), nullptr),
            nullptr);
  EXPECT_FALSE(writeSafetensors(path("no/such/dir"), {}, {}, nullptr));
}

//===----------------------------------------------------------------------===//
// Truncation and file-level errors
//===----------------------------------------------------------------------===//

TEST_F(SafetensorsTest, EmptyFileOnDisk) {
  std::string p = path("empty.safetensors");
  writeAll(p, {});
  std::string error;
  EXPECT_EQ(SafetensorsFile::open(p, &error), nullptr);
  EXPECT_EQ(error, "file is truncated: 0 bytes, expected at least 8");
}

TEST_F(SafetensorsTest, FourByteFileOnDisk) {
  std::string p = path("four.safetensors");
  writeAll(p, {0x10, 0, 0, 0});
  std::string error;
  EXPECT_EQ(SafetensorsFile::open(p, &error), nullptr);
  EXPECT_EQ(error, "file is truncated: 4 bytes, expected at least 8");
}

TEST_F(SafetensorsTest, EmptyBuffer) {
  std::string error;
  EXPECT_EQ(SafetensorsFile::fromBuffer(nullptr, 0, &error), nullptr);
  EXPECT_EQ(error, "file is truncated: 0 bytes, expected at least 8");
}

TEST_F(SafetensorsTest, NullBufferWithSize) {
  std::string error;
  EXPECT_EQ(SafetensorsFile::fromBuffer(nullptr, 16, &error), nullptr);
  EXPECT_EQ(error, "null buffer of non-zero size");
}

TEST_F(SafetensorsTest, TruncatedInHeader) {
  std::vector<uint8_t> image = readAll(writeSample());
  uint64_t headerSize = image[0] | (uint64_t(image[1]) << 8);
  std::string p = path("cut.safetensors");
  image.resize(8 + 10);
  writeAll(p, image);
  std::string error;
  EXPECT_EQ(SafetensorsFile::open(p, &error), nullptr);
  EXPECT_EQ(error, "header size " + std::to_string(headerSize) +
                       " exceeds the 10 bytes after the 8-byte length: file "
                       "is truncated");
}

TEST_F(SafetensorsTest, TruncatedInData) {
  std::vector<uint8_t> image = readAll(writeSample());
  // Layout from the writer: weight (24 bytes) first, then bias (8 bytes).
  image.resize(image.size() - 3);
  std::string p = path("cut.safetensors");
  writeAll(p, image);
  std::string error;
  EXPECT_EQ(SafetensorsFile::open(p, &error), nullptr);
  EXPECT_EQ(error, "tensor 'bias' data [24, 32) lies beyond the end of the "
                   "data section (29 bytes): file is truncated");
}

TEST_F(SafetensorsTest, EveryProperPrefixIsRejected) {
  std::vector<uint8_t> image = readAll(writeSample());
  for (size_t n = 0; n < image.size(); ++n) {
    std::vector<uint8_t> prefix(image.begin(), image.begin() + n);
    std::string error;
    EXPECT_EQ(SafetensorsFile::fromBuffer(prefix.data(), n, &error), nullptr)
        << "prefix of " << n << " bytes";
    EXPECT_THAT(error, HasSubstr("truncated")) << "prefix of " << n;
  }
  std::string error;
  EXPECT_NE(SafetensorsFile::fromBuffer(image.data(), image.size(), &error),
            nullptr)
      << error;
}

TEST_F(SafetensorsTest, AbsurdHeaderSize) {
  EXPECT_EQ(bufferError(makeImage((100ull << 20) + 1, "{}", 0)),
            "header size 104857601 is larger than the 100 MiB limit: not a "
            "safetensors file, or the file is corrupt");
  EXPECT_EQ(bufferError(makeImage(UINT64_MAX, "{}", 0)),
            "header size 18446744073709551615 is larger than the 100 MiB "
            "limit: not a safetensors file, or the file is corrupt");
  // Exactly at the limit is not absurd, merely larger than this file.
  EXPECT_EQ(bufferError(makeImage(100ull << 20, "{}", 0)),
            "header size 104857600 exceeds the 2 bytes after the 8-byte "
            "length: file is truncated");
}

TEST_F(SafetensorsTest, OpenMissingFile) {
  std::string error;
  EXPECT_EQ(SafetensorsFile::open(path("missing.safetensors"), &error),
            nullptr);
  EXPECT_EQ(error, "cannot open file: No such file or directory");
}

TEST_F(SafetensorsTest, OpenDirectory) {
  std::string error;
  EXPECT_EQ(SafetensorsFile::open(dir, &error), nullptr);
  EXPECT_EQ(error, "not a regular file");
}

//===----------------------------------------------------------------------===//
// Header errors
//===----------------------------------------------------------------------===//

TEST_F(SafetensorsTest, BadJson) {
  std::string error = headerError(R"({"a": {"dtype": "F32", )");
  EXPECT_THAT(error, HasSubstr("header is not valid JSON: parse error at line "
                               "1, column 24: syntax error"));
  // nlohmann's exception tag and raw excerpt are stripped.
  EXPECT_THAT(error, Not(HasSubstr("json.exception")));
  EXPECT_THAT(error, Not(HasSubstr("last read")));

  EXPECT_THAT(headerError(R"({"a" 1})"),
              HasSubstr("header is not valid JSON: parse error"));
  EXPECT_THAT(headerError(""), HasSubstr("header is not valid JSON: "));
  EXPECT_THAT(headerError("{} trailing"),
              HasSubstr("header is not valid JSON: "));
  EXPECT_EQ(headerError(R"({"a": 1.5e999999})"),
            "header is not valid JSON: number overflow parsing '1.5e999999'");
}

TEST_F(SafetensorsTest, BinaryGarbageHeaderGivesPrintableMessage) {
  std::string garbage = "\x80\x01\xff\"\n\t\x7f{";
  std::string error = headerError(garbage);
  EXPECT_THAT(error, HasSubstr("header is not valid JSON: "));
  for (char c : error)
    EXPECT_TRUE(c >= 0x20 && c < 0x7f) << "byte " << int(c) << " in " << error;
}

TEST_F(SafetensorsTest, DeeplyNestedHeaderDoesNotCrash) {
  EXPECT_EQ(headerError(std::string(100000, '[') + std::string(100000, ']')),
            "header is not a JSON object");
  EXPECT_THAT(headerError(std::string(100000, '{')),
              HasSubstr("header is not valid JSON: "));
}

TEST_F(SafetensorsTest, HeaderNotAnObject) {
  EXPECT_EQ(headerError("[1, 2]"), "header is not a JSON object");
  EXPECT_EQ(headerError("\"x\""), "header is not a JSON object");
  EXPECT_EQ(headerError("null   "), "header is not a JSON object");
}

TEST_F(SafetensorsTest, EntryNotAnObject) {
  EXPECT_EQ(headerError(R"({"a": 5})"), "tensor 'a' is not a JSON object");
  EXPECT_EQ(headerError(R"({"a": [1, 2]})"), "tensor 'a' is not a JSON object");
}

TEST_F(SafetensorsTest, MissingFields) {
  EXPECT_EQ(headerError(R"({"a": {"shape": [1], "data_offsets": [0, 4]}})"),
            "tensor 'a' has no \"dtype\"");
  EXPECT_EQ(
      headerError(R"({"a": {"dtype": "F32", "data_offsets": [0, 4]}})"),
      "tensor 'a' has no \"shape\"");
  EXPECT_EQ(headerError(R"({"a": {"dtype": "F32", "shape": [1]}})"),
            "tensor 'a' has no \"data_offsets\"");
  EXPECT_EQ(headerError(R"({"a": {}})"), "tensor 'a' has no \"dtype\"");
}

TEST_F(SafetensorsTest, BadDType) {
  EXPECT_EQ(headerError(
                R"({"a":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}})"),
            "tensor 'a' has unknown dtype 'F8_E4M3'");
  EXPECT_EQ(
      headerError(R"({"a":{"dtype":"f32","shape":[1],"data_offsets":[0,4]}})"),
      "tensor 'a' has unknown dtype 'f32'");
  EXPECT_EQ(
      headerError(R"({"a":{"dtype":4,"shape":[1],"data_offsets":[0,4]}})"),
      "tensor 'a' has a dtype that is not a string");
}

TEST_F(SafetensorsTest, BadShape) {
  auto entry = [](const std::string &shape, const std::string &dtype = "F32") {
    return R"({"t":{"dtype":")" + dtype + R"(","shape":)" + shape +
           R"(,"data_offsets":[0,4]}})";
  };
  const std::string notInts =
      "tensor 't' has a shape that is not an array of integers";
  EXPECT_EQ(headerError(entry("3")), notInts);
  EXPECT_EQ(headerError(entry("{}")), notInts);
  EXPECT_EQ(headerError(entry("[1.0]")), notInts);
  EXPECT_EQ(headerError(entry("[\"1\"]")), notInts);
  EXPECT_EQ(headerError(entry("[[1]]")), notInts);
  EXPECT_EQ(headerError(entry("[1e30]")), notInts);
  EXPECT_EQ(headerError(entry("[2, -1]")),
            "tensor 't' has negative dimension -1 in shape [2, -1]");
  EXPECT_EQ(headerError(entry("[4294967296, 4294967296]")),
            "tensor 't' has shape [4294967296, 4294967296] whose element "
            "count overflows");
  EXPECT_EQ(headerError(entry("[18446744073709551615]")),
            "tensor 't' has shape [18446744073709551615] whose element count "
            "overflows");
  // The element count fits in int64_t but the byte count does not.
  EXPECT_EQ(headerError(entry("[4611686018427387904]", "F64")),
            "tensor 't' has shape [4611686018427387904] whose element count "
            "overflows");
}

TEST_F(SafetensorsTest, BadOffsets) {
  auto entry = [](const std::string &offsets) {
    return R"({"t":{"dtype":"U8","shape":[4],"data_offsets":)" + offsets +
           "}}";
  };
  const std::string notTwo =
      "tensor 't' has data_offsets that are not two non-negative integers";
  EXPECT_EQ(headerError(entry("4")), notTwo);
  EXPECT_EQ(headerError(entry("[4]")), notTwo);
  EXPECT_EQ(headerError(entry("[0, 4, 8]")), notTwo);
  EXPECT_EQ(headerError(entry("[-4, 0]")), notTwo);
  EXPECT_EQ(headerError(entry("[0, 4.0]")), notTwo);
  EXPECT_EQ(headerError(entry("[\"0\", 4]")), notTwo);
  EXPECT_EQ(headerError(entry("[0, null]")), notTwo);
  EXPECT_EQ(headerError(entry("[8, 4]")),
            "tensor 't' has data_offsets [8, 4] with begin > end");
  // "-0" is parsed as a signed integer but is still non-negative.
  std::vector<uint8_t> image = makeImage(entry("[-0, 4]"), 4);
  std::string error;
  EXPECT_NE(SafetensorsFile::fromBuffer(image.data(), image.size(), &error),
            nullptr)
      << error;
}

TEST_F(SafetensorsTest, OffsetsBeyondDataSection) {
  EXPECT_EQ(
      headerError(R"({"t":{"dtype":"U8","shape":[4],"data_offsets":[62,66]}})",
                  64),
      "tensor 't' data [62, 66) lies beyond the end of the data section (64 "
      "bytes): file is truncated");
  // Even an empty tensor must not point past the end.
  EXPECT_EQ(
      headerError(R"({"t":{"dtype":"U8","shape":[0],"data_offsets":[9,9]}})",
                  8),
      "tensor 't' data [9, 9) lies beyond the end of the data section (8 "
      "bytes): file is truncated");
  EXPECT_EQ(headerError(R"({"t":{"dtype":"U8","shape":[4],)"
                        R"("data_offsets":[18446744073709551612,)"
                        R"(18446744073709551615]}})",
                        8),
            "tensor 't' data [18446744073709551612, 18446744073709551615) "
            "lies beyond the end of the data section (8 bytes): file is "
            "truncated");
}

TEST_F(SafetensorsTest, SizeMismatch) {
  EXPECT_EQ(
      headerError(R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})"),
      "tensor 'w' has 20 bytes, but shape [2, 3] of F32 needs 24");
  EXPECT_EQ(
      headerError(R"({"s":{"dtype":"BF16","shape":[],"data_offsets":[0,0]}})"),
      "tensor 's' has 0 bytes, but shape [] of BF16 needs 2");
  EXPECT_EQ(
      headerError(R"({"e":{"dtype":"I64","shape":[3,0],"data_offsets":[0,8]}})"),
      "tensor 'e' has 8 bytes, but shape [3, 0] of I64 needs 0");
}

TEST_F(SafetensorsTest, Overlap) {
  EXPECT_EQ(headerError(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                        R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})"),
            "tensors 'a' [0, 8) and 'b' [4, 12) overlap");
  // Containment, reported against the enclosing tensor even though a
  // tensor in between does not overlap the contained one.
  EXPECT_EQ(headerError(R"({"big":{"dtype":"U8","shape":[32],"data_offsets":[0,32]},)"
                        R"("mid":{"dtype":"U8","shape":[4],"data_offsets":[2,6]},)"
                        R"("small":{"dtype":"U8","shape":[2],"data_offsets":[20,22]}})"),
            "tensors 'big' [0, 32) and 'mid' [2, 6) overlap");
  EXPECT_EQ(headerError(R"({"x":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                        R"("y":{"dtype":"U8","shape":[2],"data_offsets":[8,10]},)"
                        R"("z":{"dtype":"I8","shape":[4],"data_offsets":[0,4]}})"),
            "tensors 'x' [0, 4) and 'z' [0, 4) overlap");
}

TEST_F(SafetensorsTest, AdjacentAndEmptyTensorsDoNotOverlap) {
  std::string h = R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                  R"("b":{"dtype":"U8","shape":[4],"data_offsets":[4,8]},)"
                  R"("c":{"dtype":"U8","shape":[0],"data_offsets":[2,2]}})";
  std::vector<uint8_t> image = makeImage(h, 8);
  std::string error;
  auto file = SafetensorsFile::fromBuffer(image.data(), image.size(), &error);
  ASSERT_NE(file, nullptr) << error;
  EXPECT_EQ(file->tensors().size(), 3u);
}

TEST_F(SafetensorsTest, BadMetadata) {
  EXPECT_EQ(headerError(R"({"__metadata__": [1]})"),
            "\"__metadata__\" is not a JSON object");
  EXPECT_EQ(headerError(R"({"__metadata__": {"k": 1}})"),
            "\"__metadata__\" entry 'k' is not a string");
}

//===----------------------------------------------------------------------===//
// Writer errors
//===----------------------------------------------------------------------===//

TEST_F(SafetensorsTest, WriteIntoMissingDirectoryFails) {
  std::string p = path("no-such-dir/out.safetensors");
  const std::vector<float> x = {1, 2};
  std::string error;
  EXPECT_FALSE(
      writeSafetensors(p, {{"x", StDType::F32, {2}, x.data(), 8}}, {}, &error));
  EXPECT_EQ(error, "cannot create temporary file: No such file or directory");
  EXPECT_FALSE(fs::exists(p));
  EXPECT_FALSE(fs::exists(path("no-such-dir")));
  EXPECT_TRUE(listDir().empty());
}

TEST_F(SafetensorsTest, FailedRenameLeavesNoTempFile) {
  // A directory in the way makes rename() fail after the data was written.
  std::string p = path("target");
  ASSERT_TRUE(fs::create_directory(p));
  const std::vector<float> x = {1, 2};
  std::string error;
  EXPECT_FALSE(
      writeSafetensors(p, {{"x", StDType::F32, {2}, x.data(), 8}}, {}, &error));
  EXPECT_THAT(error, HasSubstr("cannot rename temporary file into place: "));
  EXPECT_EQ(listDir(), std::vector<std::string>{"target"});
  EXPECT_TRUE(fs::is_empty(p));
}

TEST_F(SafetensorsTest, WriteReplacesExistingFile) {
  std::string p = writeSample();
  const std::vector<uint8_t> u = {9};
  std::string error;
  ASSERT_TRUE(writeSafetensors(p, {{"u", StDType::U8, {1}, u.data(), 1}}, {},
                               &error))
      << error;
  auto file = SafetensorsFile::open(p, &error);
  ASSERT_NE(file, nullptr) << error;
  ASSERT_EQ(file->tensors().size(), 1u);
  EXPECT_EQ(file->tensors()[0].name, "u");
  EXPECT_EQ(listDir(), std::vector<std::string>{"sample.safetensors"});
}

TEST_F(SafetensorsTest, WriterRejectsInconsistentInput) {
  std::string p = writeSample();
  const std::vector<uint8_t> before = readAll(p);
  const std::vector<float> x = {1, 2, 3, 4, 5, 6};
  auto reject = [&](const std::vector<StTensorView> &tensors) {
    std::string error;
    EXPECT_FALSE(writeSafetensors(p, tensors, {}, &error));
    return error;
  };
  EXPECT_EQ(reject({{"x", StDType::F32, {2, 3}, x.data(), 20}}),
            "tensor 'x' has 20 bytes, but shape [2, 3] of F32 needs 24");
  EXPECT_EQ(reject({{"x", StDType::F32, {-2, 3}, x.data(), 24}}),
            "tensor 'x' has negative dimension -2 in shape [-2, 3]");
  EXPECT_EQ(reject({{"x", StDType::F32, {INT64_MAX, 2}, x.data(), 24}}),
            "tensor 'x' has shape [9223372036854775807, 2] whose element "
            "count overflows");
  EXPECT_EQ(reject({{"x", StDType::F32, {6}, x.data(), 24},
                    {"x", StDType::F32, {6}, x.data(), 24}}),
            "duplicate tensor name 'x'");
  EXPECT_EQ(reject({{"__metadata__", StDType::F32, {6}, x.data(), 24}}),
            "tensor name \"__metadata__\" is reserved");
  EXPECT_EQ(reject({{"x", StDType::F32, {6}, nullptr, 24}}),
            "tensor 'x' has no data");
  EXPECT_THAT(reject({{"bad\xff", StDType::F32, {6}, x.data(), 24}}),
              HasSubstr("cannot encode header as JSON: "));
  // None of the rejected writes touched the existing file or left debris.
  EXPECT_EQ(readAll(p), before);
  EXPECT_EQ(listDir(), std::vector<std::string>{"sample.safetensors"});
}

} // namespace
} // namespace tfc
