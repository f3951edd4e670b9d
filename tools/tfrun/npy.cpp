//===- npy.cpp - minimal .npy reader/writer ---------------------------------===//
#include "tools/tfrun/npy.h"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/stat.h>
#include <fstream>
#include <sstream>

namespace tfc::npy {

std::string read(const std::string &path, Array &out) {
  // A directory opens as an ifstream on Linux and then fails on the first read
  // with an exception (std::__ios_failure), so check the kind of file first.
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return "cannot open '" + path + "': " + std::strerror(errno);
  if (!S_ISREG(st.st_mode))
    return "cannot read '" + path + "': not a regular file";
  std::ifstream f(path, std::ios::binary);
  if (!f)
    return "cannot open '" + path + "'";
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad())
    return "cannot read '" + path + "'";
  return parse(bytes, path, out);
}

std::string parse(const std::string &bytes, const std::string &path, Array &out) {
  auto bad = [&](const std::string &why) { return "'" + path + "' is not a valid .npy file: " + why; };
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0)
    return bad("missing the \\x93NUMPY magic");
  uint8_t major = bytes[6];
  size_t hlen, hstart;
  if (major == 1) {
    hlen = (uint8_t)bytes[8] | ((uint8_t)bytes[9] << 8);
    hstart = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12)
      return bad("truncated header");
    uint32_t l;
    std::memcpy(&l, &bytes[8], 4);
    hlen = l;
    hstart = 12;
  } else {
    return bad("unsupported version " + std::to_string(major));
  }
  if (hlen > bytes.size() - hstart)
    return bad("truncated header");
  std::string h = bytes.substr(hstart, hlen);
  auto field = [&](const std::string &key) -> std::string {
    size_t p = h.find("'" + key + "'");
    if (p == std::string::npos)
      return "";
    p = h.find(':', p);
    if (p == std::string::npos)
      return "";
    size_t q = p + 1;
    while (q < h.size() && h[q] == ' ')
      ++q;
    if (q < h.size() && h[q] == '(') {
      size_t e = h.find(')', q);
      return e == std::string::npos ? "" : h.substr(q, e - q + 1);
    }
    size_t e = h.find_first_of(",}", q);
    return h.substr(q, e == std::string::npos ? std::string::npos : e - q);
  };
  std::string descr = field("descr"), fo = field("fortran_order"), shape = field("shape");
  if (descr.size() < 2 || shape.empty())
    return bad("header lacks 'descr' or 'shape'");
  descr = descr.substr(1, descr.size() - 2);
  if (descr == "|b1" || descr == "<i8" || descr == "<i4" || descr == "<f4" || descr == "<u1") {
  } else {
    return bad("unsupported dtype '" + descr + "' (use int64, int32 or float32)");
  }
  if (fo.find("True") != std::string::npos)
    return bad("Fortran-order arrays are not supported");
  out.shape.clear();
  std::string dims = shape.substr(1, shape.size() - 2);
  std::stringstream ss(dims);
  std::string item;
  size_t count = 1;
  while (std::getline(ss, item, ',')) {
    size_t a = item.find_first_not_of(' ');
    if (a == std::string::npos)
      continue;
    // The whole item must be a decimal number: 'abc' used to parse as 0.
    const char *begin = item.c_str() + a;
    char *end;
    errno = 0;
    long long v = std::strtoll(begin, &end, 10);
    while (*end == ' ')
      ++end;
    if (end == begin || *end != '\0' || errno == ERANGE || v < 0 || v > (1ll << 40))
      return bad("bad dim '" + item + "'");
    out.shape.push_back(v);
    // The element count must not wrap: (2^40, 2^40) used to become 0 elements.
    if (v != 0 && count > (size_t(1) << 60) / (size_t)v)
      count = SIZE_MAX;
    else if (count != SIZE_MAX)
      count *= (size_t)v;
  }
  bool anyZero = false;
  for (int64_t d : out.shape)
    anyZero |= d == 0;
  if (anyZero)
    count = 0;
  size_t es = descr == "<i8" ? 8 : (descr == "<i4" || descr == "<f4") ? 4 : 1;
  size_t dstart = hstart + hlen;
  if (count == SIZE_MAX)
    return bad("shape " + shape + " has too many elements");
  if (count > (bytes.size() - dstart) / es || bytes.size() - dstart != count * es)
    return bad("data is " + std::to_string(bytes.size() - dstart) + " bytes, shape needs " +
               std::to_string(count * es));
  out.descr = descr;
  out.data.assign(bytes.begin() + dstart, bytes.end());
  return "";
}

static std::string writeRaw(const std::string &path, const char *descr, const void *data,
                            size_t elemSize, const std::vector<int64_t> &shape);

std::string writeF32(const std::string &path, const float *data,
                     const std::vector<int64_t> &shape) {
  return writeRaw(path, "<f4", data, 4, shape);
}

std::string writeI64(const std::string &path, const int64_t *data,
                     const std::vector<int64_t> &shape) {
  return writeRaw(path, "<i8", data, 8, shape);
}

static std::string writeRaw(const std::string &path, const char *descr, const void *data,
                            size_t elemSize, const std::vector<int64_t> &shape) {
  std::string dims;
  size_t n = 1;
  for (int64_t d : shape) {
    dims += std::to_string(d) + ", ";
    n *= (size_t)d;
  }
  if (shape.size() > 1)
    dims.resize(dims.size() - 2);
  if (shape.size() == 1)
    dims.pop_back(); // "(3, )" -> "(3,)"
  std::string header = std::string("{'descr': '") + descr +
                       "', 'fortran_order': False, 'shape': (" + dims + "), }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::string tmp = path + ".tmp";
  FILE *f = std::fopen(tmp.c_str(), "wb");
  if (!f)
    return "cannot write '" + path + "'";
  uint16_t hl = header.size();
  bool ok = std::fwrite("\x93NUMPY\x01\x00", 1, 8, f) == 8 && std::fwrite(&hl, 2, 1, f) == 1 &&
            std::fwrite(header.data(), 1, header.size(), f) == header.size() &&
            std::fwrite(data, elemSize, n, f) == n;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return "cannot write '" + path + "'";
  }
  return "";
}

} // namespace tfc::npy
