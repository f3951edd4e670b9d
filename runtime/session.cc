//===- session.cc - creating a session, binding inputs, reading outputs ---===//
#include "runtime/session.h"

#include "runtime/executor.h"

#include <algorithm>
#include <cstdio>

namespace tfrun::rt {

Session::~Session() {
  if (!dev)
    return;
  for (FnState &fs : fns) {
    dev->release(fs.arena);
    for (auto &in : fs.devInputs)
      dev->release(in.first);
  }
  dev->release(state);
}

Status Session::create(const Model &model, std::unique_ptr<Device> device,
                       std::unique_ptr<Session> &out) {
  auto s = std::make_unique<Session>();
  s->m = &model;
  s->inputs.resize(model.forward().inputs.size());
  s->fns.resize(model.functions.size());
  s->deviceText = device->describe();
  s->dev = std::move(device);
  TFC_RETURN_IF_ERROR(s->dev->bindModel(model));
  // @forward's weights now, so a model the device cannot hold fails here. Its
  // arena comes with the first run, sized for that run's shapes.
  TFC_RETURN_IF_ERROR(prepareFunction(*s, 0));
  out = std::move(s);
  return Status::ok();
}

Status Session::setInput(const char *name, uint32_t dtype, const int64_t *shape, size_t rank,
                         const void *data) {
  const Function &f = m->forward();
  size_t idx = 0;
  while (idx < f.inputs.size() && f.inputs[idx].name != name)
    ++idx;
  if (idx == f.inputs.size()) {
    std::string known;
    for (const auto &b : f.inputs)
      known += (known.empty() ? "" : ", ") + b.name;
    return Status::invalidArgument(std::string("unknown input '") + name + "' (inputs: " + known +
                                   ")");
  }
  const ValueDesc &v = f.values[f.inputs[idx].value];
  if (dtype != TFC_DTYPE_I64 && dtype != TFC_DTYPE_I32)
    return Status::invalidArgument(
        std::string("input '") + name + "' takes token ids (i64 or i32), got " +
        (tfc_dtype_known(dtype) ? std::string(tfc_dtype_name(dtype))
                               : "dtype " + std::to_string((int32_t)dtype)));
  if (rank != v.dims.size())
    return Status::invalidArgument(std::string("input '") + name + "' must have rank " +
                                   std::to_string(v.dims.size()) + ", got " + std::to_string(rank));
  size_t n = 1;
  for (size_t d = 0; d < rank; ++d) {
    if (shape[d] <= 0)
      return Status::invalidArgument(std::string("input '") + name + "' has an empty dim " +
                                     std::to_string(d) + " (" + std::to_string(shape[d]) + ")");
    int64_t limit = m->maxDim(v.dims[d]);
    if (v.dims[d] >= 0 ? shape[d] != limit : shape[d] > limit)
      return Status::invalidArgument(
          std::string("input '") + name + "' dim " + std::to_string(d) + " is " +
          std::to_string(shape[d]) + ", beyond the declared maximum " +
          (v.dims[d] >= 0 ? "" : m->symbolNames[-(v.dims[d] + 1)] + " = ") + std::to_string(limit));
    n *= (size_t)shape[d];
  }
  if (!data)
    return Status::invalidArgument(std::string("input '") + name + "' has no data (null pointer)");
  Input &in = inputs[idx];
  in.defaulted = false;
  in.shape.assign(shape, shape + rank);
  in.ids.resize(n);
  for (size_t i = 0; i < n; ++i)
    in.ids[i] = dtype == TFC_DTYPE_I64 ? static_cast<const int64_t *>(data)[i]
                                       : static_cast<const int32_t *>(data)[i];
  in.bound = true;
  return Status::ok();
}

std::vector<StateCache> stateCaches(const Function &dec) {
  std::vector<StateCache> caches;
  for (size_t vi = 0; vi < dec.values.size(); ++vi) {
    const ValueDesc &v = dec.values[vi];
    if (v.storage != Storage::State)
      continue;
    bool seen = false;
    for (const StateCache &c : caches)
      seen |= c.offset == v.offset;
    if (!seen)
      caches.push_back({v.offset, v.dims[2], static_cast<uint32_t>(vi)});
  }
  return caches;
}

void Session::fillDefaults() {
  for (size_t i = 0; i < inputs.size(); ++i) {
    const InputDefault &d = m->inputDefaults[i];
    Input &in = inputs[i];
    if (!d.kind || (in.bound && !in.defaulted))
      continue;
    const Input &src = inputs[d.source];
    in.bound = in.defaulted = src.bound;
    if (!src.bound)
      continue; // "input 'SOURCE' is not bound" comes from the run
    in.shape = src.shape;
    in.ids.resize(src.ids.size());
    for (size_t k = 0; k < src.ids.size(); ++k)
      in.ids[k] = d.kind == TFC_INPUT_DEFAULT_ZEROS ? 0 : src.ids[k] != d.value ? 1 : 0;
  }
}

Status Session::run() {
  fillDefaults();
  const Function &f = m->forward();
  std::vector<BoundInput> ins(f.inputs.size());
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    if (!inputs[i].bound)
      return Status::invalidArgument("input '" + f.inputs[i].name + "' is not bound");
    ins[i] = {inputs[i].ids.data(), TFC_DTYPE_I64, inputs[i].shape};
  }
  return runFunction(*this, 0, ins);
}

Status Session::reserveState(int64_t rows, int64_t len, bool blocks) {
  size_t fn = 0;
  while (fn < m->functions.size() && m->functions[fn].name != "decode_step")
    ++fn;
  if (fn == m->functions.size())
    return Status::ok();
  TFC_RETURN_IF_ERROR(prepareFunction(*this, fn)); // the dtypes on the device
  const Function &f = m->functions[fn];
  // One slot per state offset (a K or V cache), its widest value's width.
  std::map<uint64_t, std::pair<int64_t, uint64_t>> widths; // offset -> (width, elem bytes)
  for (size_t i = 0; i < f.values.size(); ++i) {
    const ValueDesc &v = f.values[i];
    if (v.storage != Storage::State)
      continue;
    const int64_t maxRows = blocks ? INT32_MAX : m->maxDim(v.dims[0]);
    if (rows < 1 || rows > maxRows || len < 1 || len > v.dims[1])
      return Status::invalidArgument(
          "a KV cache of " + std::to_string(rows) + " rows x " + std::to_string(len) +
          " positions is outside the declared maxima (" + std::to_string(maxRows) + " x " +
          std::to_string(v.dims[1]) + ")");
    auto &w = widths[v.offset];
    w.first = std::max(w.first, v.dims[2]);
    w.second = std::max<uint64_t>(w.second, tfc_dtype_bytes(fns[fn].dtypes[i], 1));
  }
  std::map<uint64_t, uint64_t> slots;
  uint64_t total = 0;
  for (const auto &[offset, w] : widths) {
    uint64_t b = w.second;
    bool overflow = __builtin_mul_overflow(b, (uint64_t)rows, &b) ||
                    __builtin_mul_overflow(b, (uint64_t)len, &b) ||
                    __builtin_mul_overflow(b, (uint64_t)w.first, &b) ||
                    __builtin_add_overflow(b, 63, &b);
    slots[offset] = total;
    if (overflow || __builtin_add_overflow(total, b / 64 * 64, &total))
      return Status::invalidModel("the KV cache's size overflows 64 bits");
  }
  if (total > stateBytes) {
    dev->release(state);
    state = nullptr;
    stateBytes = 0;
    if (Status st = dev->alloc(total, &state, /*zeroed=*/true); !st.isOk())
      return Status::outOfMemory("cannot allocate the " + std::to_string(total) +
                                 "-byte KV cache (" + std::to_string(rows) + " rows x " +
                                 std::to_string(len) + " positions)" +
                                 (dev->hostMemory() ? "" : " on the device: " + st.message()));
    stateBytes = total;
  }
  stateRows = rows;
  stateLen = len;
  stateSlots = std::move(slots);
  peakState = std::max(peakState, total);
  return Status::ok();
}

const float *Session::hostOutput(size_t fn, uint32_t value) const {
  const FnState &fs = fns[fn];
  auto it = fs.hostOutputs.find(value);
  if (it != fs.hostOutputs.end())
    return it->second.data();
  // Read in place: f32 in host memory (executor.cc's downloadOutputs).
  return dev->hostMemory() ? fs.tensors[value].as<float>() : nullptr;
}

const std::string &Session::profile() {
  double total = 0;
  std::vector<std::pair<std::pair<uint32_t, std::string>, KernelTime>> rows(kernelTimes.begin(),
                                                                            kernelTimes.end());
  for (const auto &r : rows)
    total += r.second.ms;
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto &a, const auto &b) { return a.second.ms > b.second.ms; });
  char line[160];
  profileText = "kernel               dtype      calls    total ms   share\n";
  for (const auto &[key, kt] : rows) {
    std::snprintf(line, sizeof line, "%-20s %-9s %6llu %11.3f %6.1f%%\n",
                  tfc_kernel_name(key.first), key.second.c_str(), (unsigned long long)kt.calls,
                  kt.ms, total > 0 ? 100.0 * kt.ms / total : 0.0);
    profileText += line;
  }
  std::snprintf(line, sizeof line, "%-20s %-9s %6s %11.3f %6.1f%%\n", "total", "", "", total,
                100.0);
  profileText += line;
  return profileText;
}

} // namespace tfrun::rt
