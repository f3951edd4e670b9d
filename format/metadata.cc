//===- metadata.cc - the one description of model.bin's metadata ----------===//
//
// describe() below is the layout, record by record, with each record's key
// and type and the format version that added it. encodeMetadata() runs it with
// an Encoder (which appends each field), decodeMetadata() with a Decoder
// (which reads each field in bounds and names the first one that is not
// there). docs/model-bin.md lists the same records.
//
//===----------------------------------------------------------------------===//
#include "format/metadata.h"

#include "tfc/abi.h"

namespace tfc::format {
namespace {

/// Appends every field (the compiler).
class Encoder {
public:
  uint32_t version() const { return TFC_FORMAT_VERSION; }
  bool ok() const { return true; }
  void u32(const char *, uint32_t &v) { w.u32(v); }
  void u64(const char *, uint64_t &v) { w.u64(v); }
  void i64(const char *, int64_t &v) { w.i64(v); }
  void f64(const char *, double &v) { w.f64(v); }
  void str(const char *, std::string &v) { w.str(v); }
  void flag(const char *, bool &v) { w.u32(v ? 1 : 0); }
  void instr(const char *, Instr &v) { w.instr(v); }
  template <typename T, typename Each>
  void list(const char *, std::vector<T> &v, size_t, Each each) {
    w.u32((uint32_t)v.size());
    for (T &item : v)
      each(item);
  }
  Writer w;
};

/// Reads every field in bounds (the runtime); the first missing one is named
/// by its key path.
class Decoder {
public:
  Decoder(const uint8_t *p, size_t n, uint32_t version) : r(p, n), ver(version) {}
  uint32_t version() const { return ver; }
  bool ok() const { return err.empty(); }
  void u32(const char *k, uint32_t &v) { v = r.u32(), check(k); }
  void u64(const char *k, uint64_t &v) { v = r.u64(), check(k); }
  void i64(const char *k, int64_t &v) { v = r.i64(), check(k); }
  void f64(const char *k, double &v) { v = r.f64(), check(k); }
  void str(const char *k, std::string &v) { v = r.str(), check(k); }
  void flag(const char *k, bool &v) {
    uint32_t x = r.u32();
    check(k);
    if (ok() && x > 1)
      err = at(k) + " is " + std::to_string(x) + ", not 0 or 1";
    v = x == 1;
  }
  void instr(const char *k, Instr &v) { v = r.instr(), check(k); }
  /// A count no larger than the remaining bytes could hold at |minItemBytes|
  /// each, then the items.
  template <typename T, typename Each>
  void list(const char *k, std::vector<T> &v, size_t minItemBytes, Each each) {
    const uint32_t n = r.count(minItemBytes);
    check(k);
    if (!ok())
      return;
    v.resize(n);
    for (uint32_t i = 0; i < n && ok(); ++i) {
      path.push_back(std::string(k) + "[" + std::to_string(i) + "]");
      each(v[i]);
      path.pop_back();
    }
  }
  std::string finish() {
    if (ok() && !r.atEnd())
      err = "has bytes after its last record";
    return err;
  }

private:
  std::string at(const char *k) const {
    std::string s;
    for (const std::string &p : path)
      s += p + ".";
    return s + k;
  }
  void check(const char *k) {
    if (ok() && !r.ok())
      err = "is truncated or malformed at " + at(k);
  }
  Reader r;
  uint32_t ver;
  std::vector<std::string> path;
  std::string err;
};

/// The layout. Each record: key, type, and (where later) the version that
/// added it. Counts are u32, strings a u32 length and bytes.
template <typename IO> void describe(IO &io, Metadata &m) {
  io.str("producer", m.producer);
  io.str("model", m.model);
  io.list("symbols", m.symbols, 12, [&](SymbolRecord &s) {
    io.str("name", s.name);
    io.i64("max", s.max);
  });
  io.list("functions", m.functions, 16, [&](FunctionRecord &f) {
    io.str("name", f.name);
    io.list("values", f.values, 20, [&](ValueRecord &v) {
      io.u32("dtype", v.dtype);
      io.list("dims", v.dims, 8, [&](int64_t &d) { io.i64("dim", d); });
      io.u32("storage", v.storage);
      io.u64("offset", v.offset);
      // The weight descriptor (version 6), for a weight of a quantized dtype:
      // int8, and int4 from version 8.
      if (v.storage == TFC_STORAGE_WEIGHT &&
          ((io.version() >= 6 && v.dtype == TFC_DTYPE_I8) ||
           (io.version() >= 8 && v.dtype == TFC_DTYPE_I4))) {
        io.u32("scales", v.quant.scales);
        io.u32("zeros", v.quant.zeros);
        io.u32("group", v.quant.group);
        if (io.version() >= 9)
          io.u32("act_bits", v.quant.actBits);
      }
    });
    for (auto [key, list] : {std::pair{"inputs", &f.inputs}, std::pair{"outputs", &f.outputs}})
      io.list(key, *list, 8, [&](BindingRecord &b) {
        io.str("name", b.name);
        io.u32("value", b.value);
      });
    io.list("plan", f.plan, 16, [&](Instr &in) { io.instr("instr", in); });
    io.u64("arena_size", f.arenaSize);
  });
  io.u64("state_size", m.stateSize);
  GenerationRecord &g = m.gen;
  io.flag("generation", g.present);
  if (io.ok() && g.present) {
    io.str("target", g.target);
    io.i64("bos", g.bos);
    io.i64("eos", g.eos);
    io.i64("pad", g.pad);
    io.i64("max_len", g.maxLen);
    if (io.version() >= 4) {
      io.i64("forced_bos", g.forcedBos);
      io.i64("forced_eos", g.forcedEos);
    }
    if (io.version() >= 5) {
      io.i64("num_beams", g.numBeams);
      io.i64("max_length", g.maxLength);
      io.i64("min_length", g.minLength);
      io.i64("no_repeat_ngram_size", g.noRepeatNgram);
      io.i64("early_stopping", g.earlyStopping);
      io.i64("suppress", g.suppress);
      io.f64("length_penalty", g.lengthPenalty);
    }
    if (io.version() >= 7) {
      io.list("more_eos", g.moreEos, 8, [&](int64_t &e) { io.i64("eos", e); });
      io.i64("sample", g.sample);
      io.i64("top_k", g.topK);
      io.f64("temperature", g.temperature);
      io.f64("top_p", g.topP);
    }
  }
  if (io.version() >= 4)
    io.list("input_defaults", m.inputDefaults, 20, [&](InputDefaultRecord &d) {
      io.u32("input", d.input);
      io.u32("kind", d.kind);
      io.u32("source", d.source);
      io.i64("value", d.value);
    });
}

} // namespace

std::string encodeMetadata(const Metadata &m) {
  Encoder e;
  describe(e, const_cast<Metadata &>(m)); // the Encoder only reads
  return std::move(e.w.buf);
}

std::string decodeMetadata(const uint8_t *data, size_t size, uint32_t version, Metadata &m) {
  Decoder d(data, size, version);
  describe(d, m);
  std::string err = d.finish();
  return err.empty() ? "" : "model.bin metadata " + err;
}

} // namespace tfc::format
