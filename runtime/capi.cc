//===- capi.cc - the C API (include/tfrun/tfrun.h) over the session -------===//
//
// Thin shims: argument checks, tfrun::rt::Status to tfrun_status_t (the codes are
// the same numbers, checked below), and no exception across the API: every
// entry point that can allocate runs inside guarded().
//
//===----------------------------------------------------------------------===//
#include "tfrun/tfrun.h"

#include "runtime/device.h"
#include "runtime/model.h"
#include "runtime/engine.h"
#include "runtime/session.h"

#include <cmath>
#include <cstring>
#include <new>
#include <string>

using tfc::Code;
using tfrun::rt::Status;

static_assert((int)Code::Ok == TFRUN_OK && (int)Code::InvalidArgument == TFRUN_INVALID_ARGUMENT &&
                  (int)Code::InvalidModel == TFRUN_INVALID_MODEL &&
                  (int)Code::Unsupported == TFRUN_UNSUPPORTED &&
                  (int)Code::IoError == TFRUN_IO_ERROR &&
                  (int)Code::OutOfMemory == TFRUN_OUT_OF_MEMORY &&
                  (int)Code::Internal == TFRUN_INTERNAL &&
                  (int)Code::NonFinite == TFRUN_NON_FINITE &&
                  (int)Code::Cancelled == TFRUN_CANCELLED && (int)Code::Busy == TFRUN_BUSY,
              "tfc::Code and tfrun_code_t must agree one for one");
static_assert((uint32_t)TFRUN_I64 == TFC_DTYPE_I64 && (uint32_t)TFRUN_I32 == TFC_DTYPE_I32 &&
                  (uint32_t)TFRUN_F32 == TFC_DTYPE_F32 && (uint32_t)TFRUN_F16 == TFC_DTYPE_F16 &&
                  (uint32_t)TFRUN_BF16 == TFC_DTYPE_BF16,
              "tfrun_dtype_t and tfc_dtype_t must agree");

struct tfrun_status {
  tfrun_code_t code;
  std::string message;
};

struct tfrun_model {
  std::unique_ptr<tfrun::rt::Model> m;
  /// tfrun_model_input_info / _output_info: @forward's signature as C arrays.
  struct Info {
    std::vector<int64_t> dims, maxDims;
    std::vector<const char *> dimNames;
    std::string defaultValue;
  };
  std::vector<Info> inputs, outputs;
  explicit tfrun_model(std::unique_ptr<tfrun::rt::Model> model) : m(std::move(model)) {
    const tfrun::rt::Function &f = m->forward();
    for (auto [list, infos] : {std::pair{&f.inputs, &inputs}, std::pair{&f.outputs, &outputs}})
      for (const tfrun::rt::Binding &b : *list) {
        Info in;
        for (int64_t d : f.values[b.value].dims) {
          const bool sym = d < 0;
          in.dims.push_back(sym ? -1 : d);
          in.maxDims.push_back(sym ? m->symbolMax[-(d + 1)] : d);
          in.dimNames.push_back(sym ? m->symbolNames[-(d + 1)].c_str() : "");
        }
        infos->push_back(std::move(in));
      }
    for (size_t i = 0; i < inputs.size() && i < m->inputDefaults.size(); ++i) {
      const tfrun::rt::InputDefault &d = m->inputDefaults[i];
      const std::string &src = f.inputs[d.source].name;
      if (d.kind == TFC_INPUT_DEFAULT_ZEROS)
        inputs[i].defaultValue = "zeros like " + src;
      else if (d.kind == TFC_INPUT_DEFAULT_NOT_EQUAL)
        inputs[i].defaultValue = src + " != " + std::to_string(d.value);
    }
  }
};

struct tfrun_session {
  std::unique_ptr<tfrun::rt::Session> s;
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

tfrun_status_t *toC(const Status &st) {
  return st.isOk() ? nullptr : makeStatus(static_cast<tfrun_code_t>(st.code()), st.message());
}

/// Runs |f| and converts any C++ exception into a status.
template <typename F> tfrun_status_t *guarded(F f) {
  try {
    return toC(f());
  } catch (const std::bad_alloc &) {
    return makeStatus(TFRUN_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception &e) {
    return makeStatus(TFRUN_INTERNAL, e.what());
  } catch (...) {
    return makeStatus(TFRUN_INTERNAL, "unknown internal error");
  }
}

/// The device a session or engine runs on.
Status makeDevice(const tfrun_session_options_t &o, std::unique_ptr<tfrun::rt::Device> &dev) {
  const uint32_t cd = (uint32_t)o.compute_dtype;
  if (cd != TFC_DTYPE_F32 && cd != TFC_DTYPE_F16 && cd != TFC_DTYPE_BF16)
    return Status::invalidArgument("compute dtype " + std::to_string(o.compute_dtype) +
                                   " is not f32, f16 or bf16");
  if (o.device == TFRUN_DEVICE_CUDA)
    return tfrun::rt::createCudaDevice(o.device_id, cd, dev);
  if (o.device == TFRUN_DEVICE_CPU)
    return tfrun::rt::createCpuDevice(o.num_threads, cd, dev);
  return Status::invalidArgument("unknown device " + std::to_string(o.device));
}

} // namespace

// The one set of symbols libtfrun exports (runtime/CMakeLists.txt hides the rest).
#pragma GCC visibility push(default)
extern "C" {

tfrun_code_t tfrun_status_code(const tfrun_status_t *s) { return s ? s->code : TFRUN_OK; }
const char *tfrun_status_message(const tfrun_status_t *s) { return s ? s->message.c_str() : ""; }
void tfrun_status_release(tfrun_status_t *s) { delete s; }

tfrun_status_t *tfrun_model_load_buffer(const void *data, size_t size, tfrun_model_t **out) {
  if (!out)
    return makeStatus(TFRUN_INVALID_ARGUMENT, "out_model is null");
  *out = nullptr;
  if (!data && size)
    return makeStatus(TFRUN_INVALID_ARGUMENT,
                      "data is null but size is " + std::to_string(size));
  return guarded([&] {
    std::unique_ptr<tfrun::rt::Model> m;
    TFC_RETURN_IF_ERROR(tfrun::rt::loadModel(static_cast<const uint8_t *>(data), size, m));
    *out = new tfrun_model(std::move(m));
    return Status::ok();
  });
}

tfrun_status_t *tfrun_model_load_file(const char *path, tfrun_model_t **out) {
  if (!out || !path)
    return makeStatus(TFRUN_INVALID_ARGUMENT, "path or out_model is null");
  *out = nullptr;
  return guarded([&] {
    std::unique_ptr<tfrun::rt::Model> m;
    TFC_RETURN_IF_ERROR(tfrun::rt::loadModelFile(path, m));
    *out = new tfrun_model(std::move(m));
    return Status::ok();
  });
}

void tfrun_model_release(tfrun_model_t *m) { delete m; }

size_t tfrun_model_input_count(const tfrun_model_t *m) {
  return m ? m->m->forward().inputs.size() : 0;
}
const char *tfrun_model_input_name(const tfrun_model_t *m, size_t i) {
  return m && i < m->m->forward().inputs.size() ? m->m->forward().inputs[i].name.c_str() : nullptr;
}
static tfrun_status_t *tensorInfo(const tfrun_model_t *m, size_t i, tfrun_tensor_info_t *out,
                                  bool input) {
  if (!m || !out)
    return makeStatus(TFRUN_INVALID_ARGUMENT, "null argument to tfrun_model_" +
                                                  std::string(input ? "input" : "output") +
                                                  "_info");
  const auto &bindings = input ? m->m->forward().inputs : m->m->forward().outputs;
  const auto &infos = input ? m->inputs : m->outputs;
  if (i >= bindings.size())
    return makeStatus(TFRUN_INVALID_ARGUMENT,
                      std::string(input ? "input " : "output ") + std::to_string(i) + " of " +
                          std::to_string(bindings.size()));
  out->name = bindings[i].name.c_str();
  out->dtype = input ? TFRUN_I64 : TFRUN_F32;
  out->rank = infos[i].dims.size();
  out->dims = infos[i].dims.data();
  out->max_dims = infos[i].maxDims.data();
  out->dim_names = infos[i].dimNames.data();
  out->default_value = infos[i].defaultValue.c_str();
  return nullptr;
}

tfrun_status_t *tfrun_model_input_info(const tfrun_model_t *m, size_t i, tfrun_tensor_info_t *out) {
  return tensorInfo(m, i, out, true);
}

tfrun_status_t *tfrun_model_output_info(const tfrun_model_t *m, size_t i,
                                        tfrun_tensor_info_t *out) {
  return tensorInfo(m, i, out, false);
}

size_t tfrun_model_output_count(const tfrun_model_t *m) {
  return m ? m->m->forward().outputs.size() : 0;
}
const char *tfrun_model_output_name(const tfrun_model_t *m, size_t i) {
  return m && i < m->m->forward().outputs.size() ? m->m->forward().outputs[i].name.c_str()
                                                 : nullptr;
}
int tfrun_model_can_generate(const tfrun_model_t *m) { return m && m->m->gen.present; }
void tfrun_model_generation_info(const tfrun_model_t *m, int64_t *bos, int64_t *eos, int64_t *pad,
                                 int64_t *maxLen) {
  const tfrun::rt::GenerationInfo *g = m && m->m->gen.present ? &m->m->gen : nullptr;
  if (bos)
    *bos = g ? g->bos : -1;
  if (eos)
    *eos = g ? g->eos : -1;
  if (pad)
    *pad = g ? g->pad : -1;
  if (maxLen)
    *maxLen = g ? g->maxLen : -1;
}
const char *tfrun_model_name(const tfrun_model_t *m) { return m ? m->m->name.c_str() : ""; }

void tfrun_session_options_init(tfrun_session_options_t *o) {
  if (!o)
    return;
  *o = tfrun_session_options_t{};
  o->num_threads = 0;
  o->device = TFRUN_DEVICE_CPU;
  o->device_id = 0;
  o->compute_dtype = TFRUN_F32;
}

int tfrun_cuda_device_count(void) {
  try {
    return tfrun::rt::cudaDeviceCount();
  } catch (...) {
    return 0;
  }
}

const char *tfrun_session_device(const tfrun_session_t *s) {
  return s ? s->s->deviceText.c_str() : "";
}

tfrun_status_t *tfrun_session_create(const tfrun_model_t *model, int threads,
                                     tfrun_session_t **out) {
  tfrun_session_options_t o;
  tfrun_session_options_init(&o);
  o.num_threads = threads;
  return tfrun_session_create_with_options(model, &o, out);
}

tfrun_status_t *tfrun_session_create_with_options(const tfrun_model_t *model,
                                                  const tfrun_session_options_t *o,
                                                  tfrun_session_t **out) {
  if (!model || !out || !o)
    return makeStatus(TFRUN_INVALID_ARGUMENT, "model, options or out_session is null");
  *out = nullptr;
  return guarded([&] {
    std::unique_ptr<tfrun::rt::Device> dev;
    TFC_RETURN_IF_ERROR(makeDevice(*o, dev));
    auto s = std::make_unique<tfrun_session>();
    TFC_RETURN_IF_ERROR(tfrun::rt::Session::create(*model->m, std::move(dev), s->s));
    *out = s.release();
    return Status::ok();
  });
}

void tfrun_session_release(tfrun_session_t *s) { delete s; }

tfrun_status_t *tfrun_session_set_input(tfrun_session_t *s, const char *name, tfrun_dtype_t dtype,
                                        const int64_t *shape, size_t rank, const void *data) {
  if (!s || !name || (!shape && rank))
    return makeStatus(TFRUN_INVALID_ARGUMENT, "null argument to tfrun_session_set_input");
  // The dtype as an integer, not as an enum value: a caller's 77 is a bad
  // argument to report, not undefined behaviour to load.
  int32_t dt;
  static_assert(sizeof dt == sizeof dtype, "tfrun_dtype_t is 32 bits");
  std::memcpy(&dt, &dtype, sizeof dt);
  return guarded([&] { return s->s->setInput(name, (uint32_t)dt, shape, rank, data); });
}

void tfrun_session_clear_inputs(tfrun_session_t *s) {
  if (!s)
    return;
  for (auto &in : s->s->inputs) {
    in.bound = in.defaulted = false;
    in.shape.clear();
    in.ids.clear();
  }
}

tfrun_status_t *tfrun_session_run(tfrun_session_t *s) {
  if (!s)
    return makeStatus(TFRUN_INVALID_ARGUMENT, "session is null");
  return guarded([&] { return s->s->run(); });
}

tfrun_status_t *tfrun_session_get_output(tfrun_session_t *s, const char *name, const float **data,
                                         const int64_t **shape, size_t *rank) {
  if (!s || !name || !data || !shape || !rank)
    return makeStatus(TFRUN_INVALID_ARGUMENT, "null argument to tfrun_session_get_output");
  const tfrun::rt::Session &ss = *s->s;
  if (ss.lastRun < 0)
    return makeStatus(TFRUN_INVALID_ARGUMENT, "no successful run yet");
  const tfrun::rt::Function &f = ss.m->functions[ss.lastRun];
  for (const auto &b : f.outputs)
    if (b.name == name) {
      const tfc::Tensor &t = ss.fns[ss.lastRun].tensors[b.value];
      *data = ss.hostOutput(ss.lastRun, b.value);
      *shape = t.shape.data();
      *rank = t.shape.size();
      return nullptr;
    }
  return makeStatus(TFRUN_INVALID_ARGUMENT, std::string("unknown output '") + name + "'");
}

void tfrun_session_enable_profiling(tfrun_session_t *s, int enable) {
  if (s)
    s->s->profiling = enable != 0;
}

const char *tfrun_session_profile(tfrun_session_t *s) {
  if (!s)
    return "";
  try {
    return s->s->profile().c_str();
  } catch (...) {
    return "";
  }
}

tfrun_status_t *tfrun_session_memory_info(const tfrun_session_t *s, tfrun_memory_info_t *info) {
  if (!s || !info)
    return makeStatus(TFRUN_INVALID_ARGUMENT, "null argument to tfrun_session_memory_info");
  const tfrun::rt::Session &ss = *s->s;
  info->weights_bytes = ss.m->weightsSize;
  info->arena_bytes = ss.peakArena;
  info->kv_cache_bytes = ss.peakState;
  info->declared_arena_bytes = ss.m->forward().arenaSize;
  info->declared_kv_cache_bytes = ss.m->stateSize;
  return nullptr;
}

void tfrun_generate_options_init(tfrun_generate_options_t *o) {
  if (!o)
    return;
  *o = tfrun_generate_options_t{};
  o->beam_width = 0;                  // the model's num_beams (1 unless its config says)
  o->max_len = 0;
  o->length_penalty = std::nanf("");  // the model's length_penalty (1 unless its config says)
  o->sample = -1;                 // the model's do_sample (off unless its config says)
  o->temperature = std::nanf(""); // the model's (1 unless its config says)
  o->top_k = -1;                  // the model's (0; a Hugging Face directory's 50)
  o->top_p = std::nanf("");       // the model's (1 unless its config says)
  o->repetition_penalty = 1.0f;   // off
  o->min_p = 0.0f;                // off
  o->seed = 0;
  o->bos_id = o->eos_id = o->pad_id = -1;
}

tfrun_status_t *tfrun_session_generate(tfrun_session_t *s, const tfrun_generate_options_t *o) {
  if (!s || !o)
    return makeStatus(TFRUN_INVALID_ARGUMENT, "null argument to tfrun_session_generate");
  return guarded([&] { return s->s->generate(*o); });
}

tfrun_status_t *tfrun_session_generate_stream(tfrun_session_t *s,
                                              const tfrun_generate_options_t *o,
                                              tfrun_token_callback_t cb, void *user) {
  if (!s || !o)
    return makeStatus(TFRUN_INVALID_ARGUMENT, "null argument to tfrun_session_generate_stream");
  if (!cb)
    return tfrun_session_generate(s, o);
  return guarded([&] {
    return s->s->generate(*o, [cb, user](size_t b, int64_t step, int64_t tok, float logp) {
      tfrun_token_t t{b, static_cast<size_t>(step), tok, logp};
      return cb(&t, user) != 0;
    });
  });
}

size_t tfrun_session_generated_count(const tfrun_session_t *s) {
  return s ? s->s->generated.size() : 0;
}

tfrun_status_t *tfrun_session_get_generated(const tfrun_session_t *s, size_t i, const int64_t **ids,
                                            size_t *len, float *score) {
  if (!s || !ids || !len)
    return makeStatus(TFRUN_INVALID_ARGUMENT, "null argument to tfrun_session_get_generated");
  const tfrun::rt::Session &ss = *s->s;
  if (i >= ss.generated.size())
    return makeStatus(TFRUN_INVALID_ARGUMENT, "sequence " + std::to_string(i) + " of " +
                                                  std::to_string(ss.generated.size()) +
                                                  " generated");
  *ids = ss.generated[i].data();
  *len = ss.generated[i].size();
  if (score)
    *score = ss.scores[i];
  return nullptr;
}

} // extern "C"
// --- The engine ----------------------------------------------------------------

struct tfrun_engine {
  std::unique_ptr<tfrun::rt::Engine> e;
};

void tfrun_engine_options_init(tfrun_engine_options_t *o) {
  if (!o)
    return;
  *o = tfrun_engine_options_t{};
  tfrun_session_options_init(&o->session);
}

tfrun_status_t *tfrun_engine_create(const tfrun_model_t *model, const tfrun_engine_options_t *o,
                                    tfrun_engine_t **out) {
  if (!model || !o || !out)
    return makeStatus(TFRUN_INVALID_ARGUMENT, "model, options or out_engine is null");
  *out = nullptr;
  return guarded([&] {
    std::unique_ptr<tfrun::rt::Device> dev;
    TFC_RETURN_IF_ERROR(makeDevice(o->session, dev));
    tfrun::rt::EngineOptions eo;
    eo.rows = o->max_rows;
    eo.maxQueue = o->max_queue;
    eo.maxBatchTokens = o->max_batch_tokens;
    eo.kvCacheBytes = o->kv_cache_bytes;
    eo.kvBlockSize = o->kv_block_size;
    if (o->prefix_caching < -1 || o->prefix_caching > 1)
      return Status::invalidArgument("prefix_caching is " + std::to_string(o->prefix_caching) +
                                     "; it takes 1 or 0 (on) or -1 (off)");
    eo.prefixCaching = o->prefix_caching >= 0;
    auto e = std::make_unique<tfrun_engine>();
    TFC_RETURN_IF_ERROR(tfrun::rt::Engine::create(*model->m, std::move(dev), eo, e->e));
    *out = e.release();
    return Status::ok();
  });
}

tfrun_status_t *tfrun_engine_submit(tfrun_engine_t *e, const tfrun_input_t *inputs, size_t n,
                                    const tfrun_generate_options_t *o, tfrun_token_callback_t cb,
                                    void *user, uint64_t *id) {
  if (!e || (!inputs && n) || !o || !id)
    return makeStatus(TFRUN_INVALID_ARGUMENT, "null argument to tfrun_engine_submit");
  return guarded([&] {
    std::vector<tfrun::rt::EngineInput> ins(n);
    for (size_t i = 0; i < n; ++i) {
      if (!inputs[i].name || (!inputs[i].shape && inputs[i].rank) || !inputs[i].data)
        return Status::invalidArgument("input " + std::to_string(i) +
                                       " has a null name, shape or data");
      ins[i].name = inputs[i].name;
      ins[i].dtype = static_cast<uint32_t>(inputs[i].dtype);
      ins[i].shape.assign(inputs[i].shape, inputs[i].shape + inputs[i].rank);
      ins[i].data = inputs[i].data;
    }
    tfrun::rt::EngineTokenFn fn;
    if (cb)
      fn = [cb, user](size_t b, int64_t step, int64_t tok, float logp) {
        tfrun_token_t t{b, static_cast<size_t>(step), tok, logp};
        return cb(&t, user) != 0;
      };
    return e->e->submit(ins, *o, std::move(fn), *id);
  });
}

tfrun_status_t *tfrun_engine_wait(tfrun_engine_t *e, uint64_t id, int64_t timeout_ms, int *done) {
  if (!e || !done)
    return makeStatus(TFRUN_INVALID_ARGUMENT, "null argument to tfrun_engine_wait");
  *done = 0;
  return guarded([&] {
    bool ended = false;
    TFC_RETURN_IF_ERROR(e->e->wait(id, timeout_ms, ended));
    *done = ended ? 1 : 0;
    if (!ended)
      return Status::ok();
    Status st;
    const std::vector<std::vector<int64_t>> *ids = nullptr;
    const std::vector<float> *scores = nullptr;
    TFC_RETURN_IF_ERROR(e->e->result(id, st, ids, scores));
    return st;
  });
}

tfrun_status_t *tfrun_engine_generated_count(tfrun_engine_t *e, uint64_t id, size_t *count) {
  if (!e || !count)
    return makeStatus(TFRUN_INVALID_ARGUMENT, "null argument to tfrun_engine_generated_count");
  *count = 0;
  return guarded([&] {
    Status st;
    const std::vector<std::vector<int64_t>> *ids = nullptr;
    const std::vector<float> *scores = nullptr;
    TFC_RETURN_IF_ERROR(e->e->result(id, st, ids, scores));
    *count = ids->size();
    return Status::ok();
  });
}

tfrun_status_t *tfrun_engine_cached_tokens(const tfrun_engine_t *e, uint64_t id,
                                           uint64_t *out) {
  if (!e || !out)
    return makeStatus(TFRUN_INVALID_ARGUMENT, "null argument to tfrun_engine_cached_tokens");
  *out = 0;
  return guarded([&] { return e->e->cachedTokens(id, *out); });
}

tfrun_status_t *tfrun_engine_get_generated(tfrun_engine_t *e, uint64_t id, size_t i,
                                           const int64_t **out_ids, size_t *len, float *score) {
  if (!e || !out_ids || !len)
    return makeStatus(TFRUN_INVALID_ARGUMENT, "null argument to tfrun_engine_get_generated");
  return guarded([&] {
    Status st;
    const std::vector<std::vector<int64_t>> *ids = nullptr;
    const std::vector<float> *scores = nullptr;
    TFC_RETURN_IF_ERROR(e->e->result(id, st, ids, scores));
    if (i >= ids->size())
      return Status::invalidArgument("sequence " + std::to_string(i) + " of " +
                                     std::to_string(ids->size()) + " generated");
    *out_ids = (*ids)[i].data();
    *len = (*ids)[i].size();
    if (score)
      *score = (*scores)[i];
    return Status::ok();
  });
}

tfrun_status_t *tfrun_engine_cancel(tfrun_engine_t *e, uint64_t id) {
  if (!e)
    return makeStatus(TFRUN_INVALID_ARGUMENT, "engine is null");
  return guarded([&] { return e->e->cancel(id); });
}

tfrun_status_t *tfrun_engine_release(tfrun_engine_t *e, uint64_t id) {
  if (!e)
    return makeStatus(TFRUN_INVALID_ARGUMENT, "engine is null");
  return guarded([&] { return e->e->release(id); });
}

tfrun_status_t *tfrun_engine_stats(const tfrun_engine_t *e, tfrun_engine_stats_t *out) {
  if (!e || !out)
    return makeStatus(TFRUN_INVALID_ARGUMENT, "null argument to tfrun_engine_stats");
  return guarded([&] {
    const tfrun::rt::EngineStats st = e->e->stats();
    out->requests_queued = st.queued;
    out->requests_running = st.running;
    out->kv_blocks_used = st.kvBlocksUsed;
    out->kv_blocks_free = st.kvBlocksFree;
    out->kv_block_positions = st.kvBlockPositions;
    out->kv_block_bytes = st.kvBlockBytes;
    out->memory_blocks_used = st.memBlocksUsed;
    out->memory_blocks_free = st.memBlocksFree;
    out->memory_block_positions = st.memBlockPositions;
    out->memory_block_bytes = st.memBlockBytes;
    out->requests_finished = st.requestsFinished;
    out->requests_cancelled = st.requestsCancelled;
    out->requests_failed = st.requestsFailed;
    out->requests_preempted = st.preemptions;
    out->tokens_generated = st.tokensGenerated;
    out->steps = st.steps;
    out->tokens_per_second = st.tokensPerSecond;
    out->kv_blocks_cached = st.kvBlocksCached;
    out->prefix_cache_queries = st.prefixQueryTokens;
    out->prefix_cache_hits = st.prefixHitTokens;
    return Status::ok();
  });
}

void tfrun_engine_destroy(tfrun_engine_t *e) { delete e; }

#pragma GCC visibility pop
