//===- tfrun.cc - sessions, the executor and the C API --------------------===//
//
// A session owns one arena sized for the declared maximum dims (from the plan)
// and the bound inputs. A run binds the symbolic dims from the inputs' shapes,
// gives every value its actual shape and address (inputs, weights in the loaded
// model, arena slots, views), and calls the backend kernel of each instruction.
// Nothing here throws across the C API: every entry point catches and converts.
//
//===----------------------------------------------------------------------===//
#include "tfrun/tfrun.h"

#include "backends/cpu/kernels_cpu.h"
#include "runtime/model.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <new>
#include <omp.h>

struct tfrun_status {
  tfrun_code_t code;
  std::string message;
};

struct tfrun_model {
  std::unique_ptr<tfrun::Model> m;
};

struct tfrun_session {
  const tfrun::Model *m = nullptr;
  int threads = 0;
  void *arena = nullptr;
  struct Input {
    bool bound = false;
    std::vector<int64_t> shape;
    std::vector<int64_t> ids; // token ids, widened to i64
  };
  std::vector<Input> inputs;
  std::vector<tfc::cpu::Tensor> tensors; // per value, for the last run
  std::vector<std::vector<int64_t>> outputShapes;
  bool ran = false;
  bool profiling = false;
  std::vector<double> kernelMs = std::vector<double>(TFC_KERNEL_NOPEAK_MASK + 1, 0.0);
  std::vector<uint64_t> kernelCalls = std::vector<uint64_t>(TFC_KERNEL_NOPEAK_MASK + 1, 0);
  std::string profileText;
  ~tfrun_session() { std::free(arena); }
};

namespace {

tfrun_status_t *makeStatus(tfrun_code_t code, std::string msg) {
  auto *s = new (std::nothrow) tfrun_status;
  if (!s)
    return nullptr; // cannot report; callers treat a null status as success only
                    // when they created none, so OOM here is the one lossy case
  s->code = code;
  s->message = std::move(msg);
  return s;
}

tfrun_status_t *fromError(const tfrun::Error &e) {
  return e ? makeStatus(static_cast<tfrun_code_t>(e.code), e.message) : nullptr;
}

/// Runs |f| and converts any C++ exception into a status.
template <typename F> tfrun_status_t *guarded(F f) {
  try {
    return f();
  } catch (const std::bad_alloc &) {
    return makeStatus(TFRUN_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception &e) {
    return makeStatus(TFRUN_INTERNAL, e.what());
  } catch (...) {
    return makeStatus(TFRUN_INTERNAL, "unknown internal error");
  }
}

const char *dtypeName(uint32_t d) {
  switch (d) {
  case TFC_DTYPE_F32:
    return "f32";
  case TFC_DTYPE_I64:
    return "i64";
  case TFC_DTYPE_I32:
    return "i32";
  case TFC_DTYPE_BOOL:
    return "bool";
  default:
    return "?";
  }
}

tfrun_status_t *runPlan(tfrun_session_t *s) {
  const tfrun::Model &m = *s->m;
  for (size_t i = 0; i < m.inputs.size(); ++i)
    if (!s->inputs[i].bound)
      return makeStatus(TFRUN_INVALID_ARGUMENT,
                        "input '" + m.inputs[i].name + "' is not bound");
  // Bind symbolic dims from the inputs; they must agree across inputs.
  std::vector<int64_t> sym(m.symbolNames.size(), -1);
  for (size_t i = 0; i < m.inputs.size(); ++i) {
    const tfrun::ValueDesc &v = m.values[m.inputs[i].value];
    const auto &shape = s->inputs[i].shape;
    for (size_t d = 0; d < v.dims.size(); ++d) {
      if (v.dims[d] >= 0)
        continue;
      size_t k = -(v.dims[d] + 1);
      if (sym[k] >= 0 && sym[k] != shape[d])
        return makeStatus(TFRUN_INVALID_ARGUMENT,
                          "input '" + m.inputs[i].name + "' has " + m.symbolNames[k] +
                              " " + std::to_string(shape[d]) + ", but another input has " +
                              std::to_string(sym[k]));
      sym[k] = shape[d];
    }
  }
  // Shapes and addresses.
  s->tensors.assign(m.values.size(), {});
  for (size_t i = 0; i < m.values.size(); ++i) {
    const tfrun::ValueDesc &v = m.values[i];
    tfc::cpu::Tensor &t = s->tensors[i];
    t.dtype = v.dtype;
    for (int64_t d : v.dims)
      t.shape.push_back(d >= 0 ? d : sym[-(d + 1)]);
    switch (v.storage) {
    case tfrun::Storage::Input: {
      auto &in = s->inputs[v.offset];
      t.data = in.ids.data();
      t.dtype = TFC_DTYPE_I64;
      t.shape = in.shape;
      break;
    }
    case tfrun::Storage::Weight:
      t.data = const_cast<uint8_t *>(m.weights + v.offset);
      t.packed = m.packed[i].get();
      break;
    case tfrun::Storage::Arena:
      t.data = static_cast<char *>(s->arena) + v.offset;
      break;
    case tfrun::Storage::View:
      t.data = s->tensors[v.offset].data;
      break;
    }
  }
  if (s->threads > 0)
    omp_set_num_threads(s->threads);
  for (size_t i = 0; i < m.plan.size(); ++i) {
    const tfrun::Instr &in = m.plan[i];
    if (in.kernel == TFC_KERNEL_RESHAPE || in.kernel == TFC_KERNEL_UNSQUEEZE)
      continue; // views: the address is already the source's
    std::vector<const tfc::cpu::Tensor *> args;
    for (uint32_t v : in.inputs)
      args.push_back(&s->tensors[v]);
    auto t0 = std::chrono::steady_clock::now();
    std::string err = tfc::cpu::runKernel(in.kernel, args, s->tensors[in.output], in.ints,
                                          in.floats);
    if (s->profiling) {
      s->kernelMs[in.kernel] +=
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
              .count();
      s->kernelCalls[in.kernel]++;
    }
    if (!err.empty())
      return makeStatus(TFRUN_INVALID_ARGUMENT, err);
  }
  s->ran = true;
  return nullptr;
}

} // namespace

extern "C" {

tfrun_code_t tfrun_status_code(const tfrun_status_t *s) { return s ? s->code : TFRUN_OK; }
const char *tfrun_status_message(const tfrun_status_t *s) {
  return s ? s->message.c_str() : "";
}
void tfrun_status_release(tfrun_status_t *s) { delete s; }

tfrun_status_t *tfrun_model_load_buffer(const void *data, size_t size,
                                        tfrun_model_t **out) {
  if (!out)
    return makeStatus(TFRUN_INVALID_ARGUMENT, "out_model is null");
  *out = nullptr;
  return guarded([&]() -> tfrun_status_t * {
    std::unique_ptr<tfrun::Model> m;
    if (tfrun_status_t *st =
            fromError(tfrun::loadModel(static_cast<const uint8_t *>(data), size, m)))
      return st;
    *out = new tfrun_model{std::move(m)};
    return nullptr;
  });
}

tfrun_status_t *tfrun_model_load_file(const char *path, tfrun_model_t **out) {
  if (!out || !path)
    return makeStatus(TFRUN_INVALID_ARGUMENT, "path or out_model is null");
  *out = nullptr;
  return guarded([&]() -> tfrun_status_t * {
    std::unique_ptr<tfrun::Model> m;
    if (tfrun_status_t *st = fromError(tfrun::loadModelFile(path, m)))
      return st;
    *out = new tfrun_model{std::move(m)};
    return nullptr;
  });
}

void tfrun_model_release(tfrun_model_t *m) { delete m; }

size_t tfrun_model_input_count(const tfrun_model_t *m) { return m ? m->m->inputs.size() : 0; }
const char *tfrun_model_input_name(const tfrun_model_t *m, size_t i) {
  return m && i < m->m->inputs.size() ? m->m->inputs[i].name.c_str() : nullptr;
}
size_t tfrun_model_output_count(const tfrun_model_t *m) {
  return m ? m->m->outputs.size() : 0;
}
const char *tfrun_model_output_name(const tfrun_model_t *m, size_t i) {
  return m && i < m->m->outputs.size() ? m->m->outputs[i].name.c_str() : nullptr;
}
const char *tfrun_model_name(const tfrun_model_t *m) { return m ? m->m->name.c_str() : ""; }

tfrun_status_t *tfrun_session_create(const tfrun_model_t *model, int threads,
                                     tfrun_session_t **out) {
  if (!model || !out)
    return makeStatus(TFRUN_INVALID_ARGUMENT, "model or out_session is null");
  *out = nullptr;
  return guarded([&]() -> tfrun_status_t * {
    auto s = std::make_unique<tfrun_session>();
    s->m = model->m.get();
    s->threads = threads;
    s->inputs.resize(s->m->inputs.size());
    size_t bytes = s->m->arenaSize ? s->m->arenaSize : 64;
    s->arena = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!s->arena)
      return makeStatus(TFRUN_OUT_OF_MEMORY,
                        "cannot allocate the " + std::to_string(bytes) +
                            "-byte arena (sized for the declared maximum dims; "
                            "compile with smaller --set max_batch / max_len)");
    *out = s.release();
    return nullptr;
  });
}

void tfrun_session_release(tfrun_session_t *s) { delete s; }

tfrun_status_t *tfrun_session_set_input(tfrun_session_t *s, const char *name,
                                        tfrun_dtype_t dtype, const int64_t *shape,
                                        size_t rank, const void *data) {
  if (!s || !name || (!shape && rank))
    return makeStatus(TFRUN_INVALID_ARGUMENT, "null argument to tfrun_session_set_input");
  return guarded([&]() -> tfrun_status_t * {
    const tfrun::Model &m = *s->m;
    size_t idx = 0;
    while (idx < m.inputs.size() && m.inputs[idx].name != name)
      ++idx;
    if (idx == m.inputs.size()) {
      std::string known;
      for (const auto &b : m.inputs)
        known += (known.empty() ? "" : ", ") + b.name;
      return makeStatus(TFRUN_INVALID_ARGUMENT,
                        std::string("unknown input '") + name + "' (inputs: " + known + ")");
    }
    const tfrun::ValueDesc &v = m.values[m.inputs[idx].value];
    if (dtype != TFRUN_I64 && dtype != TFRUN_I32)
      return makeStatus(TFRUN_INVALID_ARGUMENT,
                        std::string("input '") + name + "' takes token ids (i64 or i32), got " +
                            dtypeName(dtype));
    if (rank != v.dims.size())
      return makeStatus(TFRUN_INVALID_ARGUMENT,
                        std::string("input '") + name + "' must have rank " +
                            std::to_string(v.dims.size()) + ", got " + std::to_string(rank));
    size_t n = 1;
    for (size_t d = 0; d < rank; ++d) {
      if (shape[d] <= 0)
        return makeStatus(TFRUN_INVALID_ARGUMENT,
                          std::string("input '") + name + "' has an empty dim " +
                              std::to_string(d) + " (" + std::to_string(shape[d]) + ")");
      int64_t limit = v.dims[d] >= 0 ? v.dims[d] : m.symbolMax[-(v.dims[d] + 1)];
      if (v.dims[d] >= 0 ? shape[d] != limit : shape[d] > limit)
        return makeStatus(
            TFRUN_INVALID_ARGUMENT,
            std::string("input '") + name + "' dim " + std::to_string(d) + " is " +
                std::to_string(shape[d]) + ", beyond the declared maximum " +
                (v.dims[d] >= 0 ? "" : m.symbolNames[-(v.dims[d] + 1)] + " = ") +
                std::to_string(limit));
      n *= (size_t)shape[d];
    }
    if (!data)
      return makeStatus(TFRUN_INVALID_ARGUMENT,
                        std::string("input '") + name + "' has no data (null pointer)");
    auto &in = s->inputs[idx];
    in.shape.assign(shape, shape + rank);
    in.ids.resize(n);
    for (size_t i = 0; i < n; ++i)
      in.ids[i] = dtype == TFRUN_I64 ? static_cast<const int64_t *>(data)[i]
                                     : static_cast<const int32_t *>(data)[i];
    in.bound = true;
    return nullptr;
  });
}

tfrun_status_t *tfrun_session_run(tfrun_session_t *s) {
  if (!s)
    return makeStatus(TFRUN_INVALID_ARGUMENT, "session is null");
  s->ran = false;
  return guarded([&] { return runPlan(s); });
}

tfrun_status_t *tfrun_session_get_output(tfrun_session_t *s, const char *name,
                                         const float **data, const int64_t **shape,
                                         size_t *rank) {
  if (!s || !name || !data || !shape || !rank)
    return makeStatus(TFRUN_INVALID_ARGUMENT, "null argument to tfrun_session_get_output");
  if (!s->ran)
    return makeStatus(TFRUN_INVALID_ARGUMENT, "no successful run yet");
  for (const auto &b : s->m->outputs)
    if (b.name == name) {
      const tfc::cpu::Tensor &t = s->tensors[b.value];
      *data = t.as<float>();
      *shape = t.shape.data();
      *rank = t.shape.size();
      return nullptr;
    }
  return makeStatus(TFRUN_INVALID_ARGUMENT, std::string("unknown output '") + name + "'");
}

void tfrun_session_enable_profiling(tfrun_session_t *s, int enable) {
  if (s)
    s->profiling = enable != 0;
}

const char *tfrun_session_profile(tfrun_session_t *s) {
  static const char *kNames[] = {
      "token_embedding", "embedding", "linear", "fused_linear", "matmul", "add", "sub",
      "mul", "div", "and", "not", "compare", "cast", "masked_fill", "select", "reshape",
      "transpose", "unsqueeze", "slice", "reduce_mean", "reduce_sum", "sqrt", "relu",
      "gelu", "softmax", "log_softmax", "layer_norm", "attention", "positions",
      "nopeak_mask"};
  if (!s)
    return "";
  try {
    double total = 0;
    for (double v : s->kernelMs)
      total += v;
    std::vector<size_t> order;
    for (size_t k = 0; k < s->kernelMs.size(); ++k)
      if (s->kernelCalls[k])
        order.push_back(k);
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return s->kernelMs[a] > s->kernelMs[b]; });
    char line[160];
    s->profileText = "kernel               dtype  calls    total ms   share\n";
    for (size_t k : order) {
      std::snprintf(line, sizeof line, "%-20s %-5s %6llu %11.3f %6.1f%%\n", kNames[k], "f32",
                    (unsigned long long)s->kernelCalls[k], s->kernelMs[k],
                    total > 0 ? 100.0 * s->kernelMs[k] / total : 0.0);
      s->profileText += line;
    }
    std::snprintf(line, sizeof line, "%-20s %-5s %6s %11.3f %6.1f%%\n", "total", "", "", total,
                  100.0);
    s->profileText += line;
    return s->profileText.c_str();
  } catch (...) {
    return "";
  }
}

} // extern "C"
