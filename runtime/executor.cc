//===- executor.cc - one executor loop for every device -------------------===//
//
// A run binds the symbolic dims from the inputs' shapes, gives every value its
// actual shape and address (inputs, weights, arena slots, session state,
// views) and hands each instruction to the session's Device. Views (reshape,
// unsqueeze) need no kernel: their address is their source's.
//
//===----------------------------------------------------------------------===//
#include "runtime/executor.h"

#include "format/arena_plan.h"

#include "tfc/bf16.h"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace tfrun::rt {
namespace {

float halfToFloat(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  uint32_t u;
  if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else { // subnormal: normalize
      int e = -1;
      do {
        ++e;
        man <<= 1;
      } while (!(man & 0x400u));
      u = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | (man << 13);
  } else {
    u = sign | ((exp + 112) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// Adds one kernel call to the session's profile, under its precision label.
void recordKernelTime(Session &s, const Instr &in, const std::vector<const tfc::Tensor *> &args,
                      const tfc::Tensor &out, std::chrono::steady_clock::time_point t0) {
  char label[24];
  const size_t n = args.size();
  tfc_instr_precision(in.kernel, n > 0 ? args[0]->dtype : UINT32_MAX,
                      n > 1 ? args[1]->dtype : UINT32_MAX, out.dtype, label, sizeof label);
  auto &kt = s.kernelTimes[{in.kernel, label}];
  kt.ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  kt.calls++;
}

/// The symbolic dims of a run of |f|, bound from the inputs' shapes; they must
/// agree across inputs and stay within the declared maxima.
Status bindSymbols(const Model &m, const Function &f, const std::vector<BoundInput> &ins,
                   std::vector<int64_t> &sym) {
  sym.assign(m.symbolNames.size(), -1);
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    const ValueDesc &v = f.values[f.inputs[i].value];
    const auto &shape = ins[i].shape;
    if (shape.size() != v.dims.size() || ins[i].dtype != v.dtype)
      return Status::invalidArgument("input '" + f.inputs[i].name + "' of '" + f.name +
                                     "' has the wrong rank or dtype");
    for (size_t d = 0; d < v.dims.size(); ++d) {
      if (v.dims[d] >= 0) {
        if (shape[d] != v.dims[d])
          return Status::invalidArgument("input '" + f.inputs[i].name + "' dim " +
                                         std::to_string(d) + " must be " +
                                         std::to_string(v.dims[d]));
        continue;
      }
      size_t k = -(v.dims[d] + 1);
      if (sym[k] >= 0 && sym[k] != shape[d])
        return Status::invalidArgument("input '" + f.inputs[i].name + "' has " + m.symbolNames[k] +
                                       " " + std::to_string(shape[d]) + ", but another input has " +
                                       std::to_string(sym[k]));
      if (shape[d] > m.symbolMax[k])
        return Status::invalidArgument("input '" + f.inputs[i].name + "' dim " + std::to_string(d) +
                                       " is " + std::to_string(shape[d]) +
                                       ", beyond the declared maximum " + m.symbolNames[k] + " = " +
                                       std::to_string(m.symbolMax[k]));
      sym[k] = shape[d];
    }
  }
  return Status::ok();
}

/// The inputs where the device reads them: in place in host memory, else
/// copied into per-function device buffers that grow as needed.
Status placeInputs(Session &s, Session::FnState &fs, const std::vector<BoundInput> &ins,
                   std::vector<void *> &where) {
  Device &d = *s.dev;
  where.resize(ins.size());
  for (size_t i = 0; i < ins.size(); ++i) {
    if (d.hostMemory()) {
      where[i] = const_cast<void *>(ins[i].data);
      continue;
    }
    uint64_t elems = 1;
    for (int64_t x : ins[i].shape)
      elems *= (uint64_t)x;
    const size_t bytes = tfc_dtype_bytes(ins[i].dtype, elems);
    auto &buf = fs.devInputs[i];
    if (bytes > buf.second) {
      d.release(buf.first);
      buf = {nullptr, 0};
      TFC_RETURN_IF_ERROR(d.alloc(bytes, &buf.first));
      buf.second = bytes;
    }
    if (bytes)
      TFC_RETURN_IF_ERROR(d.upload(buf.first, ins[i].data, bytes));
    where[i] = buf.first;
  }
  return Status::ok();
}

/// Each value's bytes at the actual dims (checked arithmetic: the dims come
/// from the file and the inputs); 0 for inputs.
Status valueBytes(const Session &s, size_t fn, const std::vector<int64_t> &sym,
                  std::vector<uint64_t> &bytes) {
  const Model &m = *s.m;
  const Function &f = m.functions[fn];
  bytes.assign(f.values.size(), 0);
  for (size_t i = 0; i < f.values.size(); ++i) {
    const ValueDesc &v = f.values[i];
    if (v.storage != Storage::Arena)
      continue;
    uint64_t elems = 1, b = 0;
    for (int64_t d : v.dims) {
      int64_t x = d >= 0 ? d : sym[-(d + 1)];
      if (x < 0)
        return Status::invalidArgument("'" + f.name + "': no input gives the size of " +
                                       m.symbolNames[-(d + 1)]);
      if (__builtin_mul_overflow(elems, (uint64_t)x, &elems))
        return Status::invalidModel("'" + f.name + "': value " + std::to_string(i) +
                                    " is too large");
    }
    if (!tfc_dtype_bytes_checked(s.fns[fn].dtypes[i], elems, &b))
      return Status::invalidModel("'" + f.name + "': value " + std::to_string(i) +
                                  " is too large");
    bytes[i] = b;
  }
  return Status::ok();
}

/// The arena of a run of |fn| at the actual dims |sym|: every arena value gets
/// an offset for its actual size, and two values whose lifetimes (fs.live)
/// overlap never share bytes (format/arena_plan.h, the compiler's planner
/// too). A few plans are kept, so repeated shapes (a
/// decode step per token) plan once. The compiler's plan, for the declared
/// maxima, only sizes --report and the loader's checks: a short run uses an
/// arena for its own shapes.
Status planArena(Session &s, size_t fn, const std::vector<int64_t> &sym,
                 const Session::FnState::Plan *&out) {
  Session::FnState &fs = s.fns[fn];
  for (size_t i = 0; i < fs.plans.size(); ++i)
    if (fs.plans[i].sym == sym) {
      std::rotate(fs.plans.begin(), fs.plans.begin() + i, fs.plans.begin() + i + 1);
      out = &fs.plans.front();
      return Status::ok();
    }
  std::vector<uint64_t> bytes;
  TFC_RETURN_IF_ERROR(valueBytes(s, fn, sym, bytes));
  const Function &f = s.m->functions[fn];
  std::vector<uint32_t> order;
  std::vector<tfc::format::ArenaItem> items;
  for (uint32_t i = 0; i < f.values.size(); ++i)
    if (f.values[i].storage == Storage::Arena) {
      order.push_back(i);
      items.push_back({bytes[i], fs.live[i].first, fs.live[i].second});
    }
  Session::FnState::Plan plan;
  plan.sym = sym;
  plan.offsets.assign(f.values.size(), 0);
  std::vector<uint64_t> offsets;
  if (!tfc::format::planArena(items, offsets, plan.size))
    return Status::outOfMemory("'" + f.name + "': the arena for these input sizes is larger "
                               "than 2^64 bytes");
  for (size_t k = 0; k < order.size(); ++k)
    plan.offsets[order[k]] = offsets[k];
  fs.plans.insert(fs.plans.begin(), std::move(plan));
  if (fs.plans.size() > 4)
    fs.plans.pop_back();
  out = &fs.plans.front();
  return Status::ok();
}

/// Fills the tensors of function |fn| for a run: each value's shape from the
/// bound symbolic dims, its dtype on the device, and its address by storage.
Status bindTensors(Session &s, size_t fn, const std::vector<BoundInput> &ins,
                   const std::vector<void *> &inputData, const std::vector<int64_t> &sym,
                   const Session::FnState::Plan &plan) {
  const Model &m = *s.m;
  const Function &f = m.functions[fn];
  Session::FnState &fs = s.fns[fn];
  fs.tensors.assign(f.values.size(), {});
  for (size_t i = 0; i < f.values.size(); ++i) {
    const ValueDesc &v = f.values[i];
    tfc::Tensor &t = fs.tensors[i];
    t.dtype = fs.dtypes[i];
    for (int64_t d : v.dims) {
      int64_t x = d >= 0 ? d : sym[-(d + 1)];
      if (x < 0)
        return Status::invalidArgument("'" + f.name + "': no input gives the size of " +
                                       m.symbolNames[-(d + 1)]);
      t.shape.push_back(x);
    }
    // A KV cache has the rows and positions the session reserved (reserveState).
    if (v.storage == Storage::State)
      t.shape = {s.stateRows, s.stateLen, v.dims[2]};
    // The bytes a kernel may touch, in checked arithmetic: they must lie in the
    // value's storage whatever the file says (the loader checked the declared
    // maxima; this holds for the actual dims too).
    uint64_t elems = 1, bytes = 0;
    bool tooLarge = false;
    for (int64_t x : v.storage == Storage::Input ? ins[v.offset].shape : t.shape)
      tooLarge |= __builtin_mul_overflow(elems, (uint64_t)x, &elems);
    if (tooLarge || !tfc_dtype_bytes_checked(t.dtype, elems, &bytes))
      return Status::invalidModel("'" + f.name + "': value " + std::to_string(i) +
                                  " is too large");
    switch (v.storage) {
    case Storage::Input:
      t.data = inputData[v.offset];
      t.shape = ins[v.offset].shape;
      break;
    case Storage::Weight:
      if (v.offset > m.weightsSize || bytes > m.weightsSize - v.offset)
        return Status::invalidModel("'" + f.name + "': weight " + std::to_string(i) +
                                    " lies outside the weights section");
      t.data = fs.weightPtrs[i];
      t.packed = fs.weightPacks[i];
      // A quantized weight carries its descriptor: the scales are another
      // weight (the loader checked its dtype and shape).
      if (v.quant.quantized()) {
        t.scales = static_cast<const float *>(fs.weightPtrs[v.quant.scales]);
        t.group = v.quant.group;
        t.actBits = static_cast<int>(v.quant.actBits);
      }
      break;
    case Storage::Arena: {
      const uint64_t at = plan.offsets[i];
      if (at > fs.arenaBytes || bytes > fs.arenaBytes - at)
        return Status::internal("'" + f.name + "': value " + std::to_string(i) +
                                " lies outside the arena at these dims");
      t.data = static_cast<char *>(fs.arena) + at;
      break;
    }
    case Storage::State: {
      auto slot = s.stateSlots.find(v.offset);
      if (slot == s.stateSlots.end() || slot->second > s.stateBytes ||
          bytes > s.stateBytes - slot->second)
        return Status::invalidModel("'" + f.name + "': value " + std::to_string(i) +
                                    " lies outside the session state at these dims");
      t.data = static_cast<char *>(s.state) + slot->second;
      break;
    }
    case Storage::View: {
      const tfc::Tensor &src = fs.tensors[v.offset];
      if (bytes > tfc_dtype_bytes(src.dtype, (uint64_t)src.numel()))
        return Status::invalidModel("'" + f.name + "': view " + std::to_string(i) +
                                    " is larger than the value it aliases");
      t.data = src.data;
      break;
    }
    }
  }
  return Status::ok();
}

/// After a run on a device the host cannot read: the outputs, widened to f32.
Status downloadOutputs(Session &s, size_t fn) {
  const Function &f = s.m->functions[fn];
  Session::FnState &fs = s.fns[fn];
  fs.hostOutputs.clear();
  for (const Binding &b : f.outputs) {
    const tfc::Tensor &t = fs.tensors[b.value];
    if (s.dev->hostMemory() && t.dtype == TFC_DTYPE_F32)
      continue; // read in place
    std::vector<float> &h = fs.hostOutputs[b.value];
    h.resize(t.numel());
    if (t.dtype == TFC_DTYPE_F32) {
      TFC_RETURN_IF_ERROR(s.dev->download(h.data(), t.data, h.size() * 4));
      continue;
    }
    std::vector<uint16_t> raw(h.size());
    TFC_RETURN_IF_ERROR(s.dev->download(raw.data(), t.data, raw.size() * 2));
    for (size_t k = 0; k < h.size(); ++k)
      h[k] = t.dtype == TFC_DTYPE_BF16 ? tfc_bf16_to_f32(raw[k]) : halfToFloat(raw[k]);
  }
  return Status::ok();
}

/// A kernel's complaint about the caller's data (a token id out of range)
/// names the input it came from: "input 'src': token id 40 is out of range
/// [0, 40)". decode_step's step.tokens are the generation target's ids.
Status nameTheInput(const Model &m, const Function &f, const Instr &in, Status st) {
  if (st.code() != Code::InvalidArgument)
    return st;
  for (uint32_t v : in.inputs) {
    for (size_t hops = 0; f.values[v].storage == Storage::View && hops < f.values.size(); ++hops)
      v = (uint32_t)f.values[v].offset;
    if (f.values[v].storage != Storage::Input)
      continue;
    std::string name = f.inputs[f.values[v].offset].name;
    if (name == "step.tokens" && m.gen.present)
      name = m.gen.target;
    return Status::invalidArgument("input '" + name + "': " + st.message());
  }
  return st;
}

} // namespace

Status prepareFunction(Session &s, size_t fn) {
  const Model &m = *s.m;
  const Function &f = m.functions[fn];
  Session::FnState &fs = s.fns[fn];
  if (fs.prepared)
    return Status::ok();
  Device &d = *s.dev;
  const uint32_t compute = d.computeDtype();
  // f32 values are computed in the compute dtype, but for the scales of
  // quantized weights (their descriptors), the operands the device's kernels
  // take in f32 only (tfc/kernels.def: rotary's inv_freq, whose angles
  // pos * inv_freq lose whole radians in 16 bits at long positions; T5's
  // bucket table), with the values they view, and the outputs its kernels
  // write in f32 only (T5's position bias).
  std::vector<char> staysF32(f.values.size(), 0);
  for (const ValueDesc &v : f.values)
    if (v.quant.quantized())
      staysF32[v.quant.scales] = 1;
  if (compute != TFC_DTYPE_F32) {
    std::vector<uint32_t> dts;
    for (const Instr &in : f.plan) {
      dts.clear();
      for (uint32_t v : in.inputs)
        dts.push_back(f.values[v].dtype);
      for (size_t p = 0; p < in.inputs.size(); ++p) {
        const tfc::schema::OperandInfo *row = tfc::schema::operandRow(
            in.kernel, p, in.ints, in.floats, {dts.data(), dts.size()});
        if (!row || (row->set(d.schemaBackend()) & (1u << compute)))
          continue;
        uint64_t v = in.inputs[p];
        for (size_t hops = 0; v < f.values.size() && hops <= f.values.size(); ++hops) {
          staysF32[v] = 1;
          if (f.values[v].storage != Storage::View)
            break;
          v = f.values[v].offset;
        }
      }
      const tfc::schema::KernelInfo *k = tfc::schema::kernelInfo(in.kernel);
      if (k && !(k->out.set(d.schemaBackend()) & (1u << compute)) && in.output < f.values.size())
        staysF32[in.output] = 1;
    }
  }
  fs.dtypes.resize(f.values.size());
  fs.weightPtrs.assign(f.values.size(), nullptr);
  fs.weightPacks.assign(f.values.size(), nullptr);
  for (size_t i = 0; i < f.values.size(); ++i) {
    const ValueDesc &v = f.values[i];
    uint32_t dt = v.dtype;
    if (compute != TFC_DTYPE_F32 && dt == TFC_DTYPE_F32 && !staysF32[i] &&
        v.storage != Storage::Input)
      dt = compute;
    fs.dtypes[i] = dt;
    if (v.storage == Storage::Weight)
      TFC_RETURN_IF_ERROR(d.weight(fn, (uint32_t)i, dt, &fs.weightPtrs[i], &fs.weightPacks[i]));
  }
  // Lifetimes for the run-time arena plans: an arena value lives from the
  // first to the last instruction that reads or writes it or a view of it;
  // function outputs live to the end, so they can be read after the run.
  fs.live.assign(f.values.size(), {-1, -1});
  auto root = [&](uint32_t v) {
    for (size_t hops = 0; f.values[v].storage == Storage::View && hops < f.values.size(); ++hops)
      v = (uint32_t)f.values[v].offset;
    return v;
  };
  auto touch = [&](uint32_t v, int32_t at) {
    v = root(v);
    if (f.values[v].storage != Storage::Arena)
      return;
    auto &l = fs.live[v];
    l.first = l.first < 0 ? at : std::min(l.first, at);
    l.second = std::max(l.second, at);
  };
  const int32_t end = (int32_t)f.plan.size();
  for (int32_t i = 0; i < end; ++i) {
    for (uint32_t v : f.plan[i].inputs)
      touch(v, i);
    touch(f.plan[i].output, i);
  }
  for (const Binding &b : f.outputs)
    touch(b.value, end);
  for (size_t i = 0; i < f.values.size(); ++i)
    if (f.values[i].storage == Storage::Arena && fs.live[i].first < 0)
      fs.live[i] = {0, end}; // never touched: a slot of its own
  fs.devInputs.assign(f.inputs.size(), {nullptr, 0});
  fs.prepared = true;
  return Status::ok();
}

Status runFunction(Session &s, size_t fn, const std::vector<BoundInput> &ins) {
  const Model &m = *s.m;
  const Function &f = m.functions[fn];
  Session::FnState &fs = s.fns[fn];
  Device &d = *s.dev;
  s.lastRun = -1;
  std::vector<int64_t> sym;
  TFC_RETURN_IF_ERROR(bindSymbols(m, f, ins, sym));
  TFC_RETURN_IF_ERROR(prepareFunction(s, fn));
  bool usesState = false;
  for (const ValueDesc &v : f.values)
    usesState |= v.storage == Storage::State;
  if (usesState && !s.state) {
    // Not reserved by generate: the declared maxima.
    for (const ValueDesc &v : f.values)
      if (v.storage == Storage::State) {
        TFC_RETURN_IF_ERROR(s.reserveState(m.maxDim(v.dims[0]),
                                           v.dims[1]));
        break;
      }
  }
  const Session::FnState::Plan *plan = nullptr;
  TFC_RETURN_IF_ERROR(planArena(s, fn, sym, plan));
  if (plan->size > fs.arenaBytes) {
    // Grow to this run's plan; what the previous run left there is dead.
    d.release(fs.arena);
    fs.arena = nullptr;
    fs.arenaBytes = 0;
    if (Status st = d.alloc(plan->size, &fs.arena); !st.isOk())
      return Status::outOfMemory(
          "cannot allocate the " + std::to_string(plan->size) + "-byte " +
          (d.hostMemory() ? "" : "device ") + "arena of '" + f.name + "' for these input sizes (" +
          st.message() + ")");
    fs.arenaBytes = plan->size;
  }
  s.peakArena = std::max<uint64_t>(s.peakArena, plan->size);
  std::vector<void *> inputData;
  TFC_RETURN_IF_ERROR(placeInputs(s, fs, ins, inputData));
  TFC_RETURN_IF_ERROR(bindTensors(s, fn, ins, inputData, sym, *plan));
  d.beginRun();
  std::vector<const tfc::Tensor *> args;
  for (const Instr &in : f.plan) {
    if (in.kernel == TFC_KERNEL_RESHAPE || in.kernel == TFC_KERNEL_UNSQUEEZE)
      continue; // views: the address is already the source's
    args.clear();
    for (uint32_t v : in.inputs)
      args.push_back(&fs.tensors[v]);
    auto t0 = std::chrono::steady_clock::now();
    if (Status st = d.run(in, args, fs.tensors[in.output]); !st.isOk())
      return nameTheInput(m, f, in, std::move(st));
    if (s.profiling) {
      // Kernel times need the kernel finished: profiling slows a device run.
      TFC_RETURN_IF_ERROR(d.sync());
      recordKernelTime(s, in, args, fs.tensors[in.output], t0);
    }
  }
  TFC_RETURN_IF_ERROR(d.sync());
  TFC_RETURN_IF_ERROR(downloadOutputs(s, fn));
  s.lastRun = (int)fn;
  return Status::ok();
}

} // namespace tfrun::rt
