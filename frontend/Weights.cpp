//===- Weights.cpp - the model's named weights ----------------------------===//
#include "frontend/Weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tfc {

bool WeightStore::openCheckpoint(const std::string &p, std::string &error) {
  if (!declared.empty() || !files.empty()) {
    // Weights declared without a checkpoint were never checked against it.
    error = "the checkpoint must be opened before any weight is declared";
    return false;
  }
  static const std::string kIndex = ".index.json";
  if (p.size() > kIndex.size() &&
      p.compare(p.size() - kIndex.size(), kIndex.size(), kIndex) == 0) {
    SafetensorsIndex idx;
    if (!readSafetensorsIndex(p, idx, &error))
      return false;
    size_t slash = p.find_last_of('/');
    std::string dir = slash == std::string::npos ? "" : p.substr(0, slash + 1);
    std::map<std::string, const SafetensorsFile *> shards;
    for (const std::string &s : idx.shards) {
      std::string err;
      auto f = SafetensorsFile::open(dir + s, &err);
      if (!f) {
        error = "shard '" + dir + s + "': " + err;
        files.clear();
        return false;
      }
      shards[s] = f.get();
      files.push_back(std::move(f));
    }
    for (const auto &[name, shard] : idx.weightMap) {
      const StTensor *t = shards[shard]->find(name);
      if (!t) {
        error = "the index puts '" + name + "' in shard '" + shard + "', which has no such tensor";
        files.clear();
        tensors.clear();
        return false;
      }
      tensors[name] = t;
    }
  } else {
    auto f = SafetensorsFile::open(p, &error);
    if (!f)
      return false;
    for (const auto &t : f->tensors())
      tensors[t.name] = &t;
    files.push_back(std::move(f));
  }
  path = p;
  for (const auto &t : tensors)
    used[t.first] = false;
  return true;
}

const StTensor *WeightStore::find(const std::string &name) const {
  auto it = tensors.find(name);
  return it == tensors.end() ? nullptr : it->second;
}

void WeightStore::addRename(const std::string &from, const std::string &to) {
  renames.emplace_back(from, to);
}

std::string WeightStore::rename(const std::string &name) const {
  const std::pair<std::string, std::string> *best = nullptr;
  for (const auto &r : renames)
    if (name.compare(0, r.first.size(), r.first) == 0 &&
        (!best || r.first.size() > best->first.size()))
      best = &r;
  return best ? best->second + name.substr(best->first.size()) : name;
}

static bool isFloat(StDType t) {
  return t == StDType::F32 || t == StDType::F16 || t == StDType::BF16 ||
         t == StDType::F64;
}

bool WeightStore::declare(const std::string &name,
                          const std::vector<int64_t> &shape, WeightRole role,
                          std::string &error) {
  for (int64_t d : shape)
    if (d < 0) {
      error = "weight '" + name + "' has a negative dimension in " + formatShape(shape);
      return false;
    }
  auto it = index.find(name);
  if (it != index.end()) {
    if (declared[it->second].shape != shape) {
      error = "weight '" + name + "' is used with shape " + formatShape(shape) +
              " here but with " + formatShape(declared[it->second].shape) +
              " elsewhere";
      return false;
    }
    return true;
  }
  std::string ckpt = rename(name);
  if (hasCheckpoint()) {
    const StTensor *t = find(ckpt);
    std::string shown = ckpt == name ? "'" + name + "'"
                                     : "'" + ckpt + "' (renamed from '" + name + "')";
    if (!t) {
      error = "missing weight tensor " + shown + " in '" + path + "' (expected F32 " +
              formatShape(shape) + ")";
      return false;
    }
    if (!isFloat(t->dtype)) {
      error = "weight " + shown + " has dtype " + stDTypeName(t->dtype) +
              ", expected a float type (F32, F16, BF16 or F64) with shape " +
              formatShape(shape);
      return false;
    }
    if (t->shape != shape) {
      error = "weight " + shown + " has shape " + formatShape(t->shape) +
              ", expected " + formatShape(shape);
      return false;
    }
    used[ckpt] = true;
  }
  index[name] = declared.size();
  declared.push_back({name, ckpt, shape, role});
  return true;
}

bool WeightStore::accept(const std::string &name) {
  if (!hasCheckpoint())
    return false;
  std::string ckpt = rename(name);
  auto it = used.find(ckpt);
  if (it == used.end())
    return false;
  it->second = true;
  return true;
}

std::vector<std::string> WeightStore::unusedCheckpointTensors() const {
  std::vector<std::string> out;
  for (const auto &kv : used)
    if (!kv.second)
      out.push_back(kv.first);
  return out;
}

uint64_t WeightStore::totalBytes() const {
  uint64_t n = 0;
  for (const auto &w : declared) {
    uint64_t e = 1;
    for (int64_t d : w.shape)
      e *= (uint64_t)d;
    n += 4 * e;
  }
  return n;
}

namespace {
float halfToFloat(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else { // subnormal: renormalize
      exp = 127 - 15 + 1;
      while (!(mant & 0x400)) {
        mant <<= 1;
        --exp;
      }
      bits = sign | (exp << 23) | ((mant & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000 | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint64_t fnv1a(const std::string &s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s)
    h = (h ^ c) * 1099511628211ull;
  return h;
}

/// splitmix64: a tiny, well-known generator whose output is identical on every
/// platform (std::uniform_real_distribution is not).
struct SplitMix {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return (next() >> 11) * (1.0 / 9007199254740992.0); }
};
} // namespace

uint64_t WeightStore::countNonFinite(const std::string &name, uint64_t &first) const {
  if (!hasCheckpoint() || !index.count(name))
    return 0;
  // The values as the plan will hold them (F64/F16/BF16 widened or narrowed
  // to f32, so an F64 beyond float range counts too).
  std::vector<float> v = materialize(name);
  uint64_t n = 0;
  for (size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i]) && n++ == 0)
      first = i;
  return n;
}

std::vector<float> WeightStore::materialize(const std::string &name) const {
  auto it = index.find(name);
  if (it == index.end())
    return {};
  const WeightInfo &w = declared[it->second];
  size_t n = 1;
  for (int64_t d : w.shape)
    n *= (size_t)d;
  std::vector<float> out(n);
  if (n == 0)
    return out;
  if (hasCheckpoint()) {
    const StTensor *t = find(w.checkpointName);
    if (!t)
      return {};
    const uint8_t *p = t->data;
    for (size_t i = 0; i < n; ++i) {
      switch (t->dtype) {
      case StDType::F32:
        std::memcpy(&out[i], p + 4 * i, 4);
        break;
      case StDType::F64: {
        double d;
        std::memcpy(&d, p + 8 * i, 8);
        out[i] = (float)d;
        break;
      }
      case StDType::F16: {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = halfToFloat(h);
        break;
      }
      case StDType::BF16: {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        uint32_t bits = (uint32_t)h << 16;
        std::memcpy(&out[i], &bits, 4);
        break;
      }
      default:
        break; // rejected in declare()
      }
    }
    return out;
  }
  switch (w.role) {
  case WeightRole::Bias:
  case WeightRole::Shift:
    std::fill(out.begin(), out.end(), 0.0f);
    break;
  case WeightRole::Gain:
    std::fill(out.begin(), out.end(), 1.0f);
    break;
  case WeightRole::Matrix: {
    // Xavier/Glorot uniform, as the tutorials' `nn.init.xavier_uniform_` on every
    // parameter with dim > 1: U(-a, a), a = sqrt(6 / (fan_in + fan_out)).
    double fanOut = w.shape.empty() ? 1 : (double)w.shape[0];
    double fanIn = w.shape.size() < 2 ? 1 : (double)(n / (size_t)w.shape[0]);
    double a = std::sqrt(6.0 / (fanIn + fanOut));
    SplitMix rng{seed ^ fnv1a(name)};
    for (auto &v : out)
      v = (float)((rng.uniform() * 2.0 - 1.0) * a);
    break;
  }
  }
  return out;
}

} // namespace tfc
