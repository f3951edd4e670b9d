//===- _tfc.cpp - the native half of the tfc Python package ----------------===//
//
// A thin nanobind layer over libtfrun's C API (include/tfrun/tfrun.h): a model,
// a session, run and generate. Everything user-facing (type hints, docstrings,
// argument checks, the exception classes, Generation, the streaming iterator)
// lives in Python, in python/tfc/; this file only moves bytes and statuses.
//
// - Every C API status becomes the Python exception class that tfc/_errors.py
//   registers for its code (_set_error_classes), with the runtime's message.
// - run() and generate() release the GIL while libtfrun works. A session is
//   thread-compatible (tfrun.h), so each wrapper session holds a mutex: two
//   Python threads calling into one session take turns instead of racing.
// - A session keeps its model alive (shared_ptr): tfrun.h requires every
//   session to be released before its model.
//
//===----------------------------------------------------------------------===//
#include "tfrun/tfrun.h"

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace nb = nanobind;

namespace {

/// code -> exception class, set once by tfc/_errors.py.
nb::dict &errorClasses() {
  static nb::dict *classes = new nb::dict(); // leaked: outlives interpreter teardown order
  return *classes;
}

/// A C API failure, carried out of GIL-free code to where the GIL is held.
struct Failure {
  tfrun_code_t code = TFRUN_OK;
  std::string message;
  explicit operator bool() const { return code != TFRUN_OK; }
};

Failure take(tfrun_status_t *st) {
  Failure f;
  if (st) {
    f.code = tfrun_status_code(st);
    f.message = tfrun_status_message(st);
    tfrun_status_release(st);
  }
  return f;
}

/// Raises |f| as its registered exception class (the GIL is held).
[[noreturn]] void raise(const Failure &f) {
  nb::object key = nb::int_(static_cast<int>(f.code));
  PyObject *cls = PyExc_RuntimeError;
  if (errorClasses().contains(key))
    cls = errorClasses()[key].ptr();
  PyErr_SetString(cls, f.message.c_str());
  throw nb::python_error();
}

void check(tfrun_status_t *st) {
  if (Failure f = take(st))
    raise(f);
}

struct Model {
  tfrun_model_t *m = nullptr;
  ~Model() { tfrun_model_release(m); }
};

using Input = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;

/// One tensor's signature, as Python reads it: (name, dims, max_dims,
/// dim_names, default).
using Info = std::tuple<std::string, std::vector<int64_t>, std::vector<int64_t>,
                        std::vector<std::string>, std::string>;

Info toInfo(const tfrun_tensor_info_t &i) {
  Info r;
  std::get<0>(r) = i.name;
  for (size_t d = 0; d < i.rank; ++d) {
    std::get<1>(r).push_back(i.dims[d]);
    std::get<2>(r).push_back(i.max_dims[d]);
    std::get<3>(r).push_back(i.dim_names[d] ? i.dim_names[d] : "");
  }
  std::get<4>(r) = i.default_value ? i.default_value : "";
  return r;
}

struct Session {
  std::shared_ptr<Model> model;
  tfrun_session_t *s = nullptr;
  std::mutex mu; // one call at a time (a session is thread-compatible)

  ~Session() { tfrun_session_release(s); }

  /// Binds exactly |inputs| (what earlier calls bound is cleared first: each
  /// Python call stands alone, as in ONNX Runtime's run); the GIL is released,
  /// the arrays stay referenced by the caller.
  Failure bind(const std::vector<std::pair<std::string, Input>> &inputs) {
    tfrun_session_clear_inputs(s);
    for (const auto &[name, a] : inputs) {
      tfrun_dtype_t dt;
      if (a.dtype() == nb::dtype<int64_t>())
        dt = TFRUN_I64;
      else if (a.dtype() == nb::dtype<int32_t>())
        dt = TFRUN_I32;
      else
        return {TFRUN_INVALID_ARGUMENT, "input '" + name + "': token ids must be int64 or int32"};
      std::vector<int64_t> shape(a.ndim());
      for (size_t d = 0; d < a.ndim(); ++d)
        shape[d] = static_cast<int64_t>(a.shape(d));
      if (Failure f = take(tfrun_session_set_input(s, name.c_str(), dt, shape.data(),
                                                   shape.size(), a.data())))
        return f;
    }
    return {};
  }
};

struct OutBuf {
  std::string name;
  std::vector<size_t> shape;
  float *data = nullptr;
};

/// run(): bind, run and copy every output out of the session without the
/// GIL; the copies become numpy arrays that own their memory. (The session
/// reuses its output buffers on the next run, so handing out views would let
/// a later run change arrays the caller holds.)
nb::dict run(Session &self, const std::vector<std::pair<std::string, Input>> &inputs) {
  Failure f;
  std::vector<OutBuf> outs;
  {
    nb::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(self.mu);
    f = self.bind(inputs);
    if (!f)
      f = take(tfrun_session_run(self.s));
    const size_t n = tfrun_model_output_count(self.model->m);
    for (size_t i = 0; !f && i < n; ++i) {
      OutBuf o;
      o.name = tfrun_model_output_name(self.model->m, i);
      const float *data;
      const int64_t *dims;
      size_t rank;
      if ((f = take(tfrun_session_get_output(self.s, o.name.c_str(), &data, &dims, &rank))))
        break;
      size_t count = 1;
      for (size_t d = 0; d < rank; ++d) {
        o.shape.push_back(static_cast<size_t>(dims[d]));
        count *= o.shape.back();
      }
      o.data = new float[count ? count : 1];
      std::memcpy(o.data, data, count * sizeof(float));
      outs.push_back(std::move(o));
    }
  }
  if (f) {
    for (OutBuf &o : outs)
      delete[] o.data;
    raise(f);
  }
  nb::dict result;
  for (OutBuf &o : outs) {
    nb::capsule owner(o.data, [](void *p) noexcept { delete[] static_cast<float *>(p); });
    result[o.name.c_str()] =
        nb::ndarray<nb::numpy, float>(o.data, o.shape.size(), o.shape.data(), owner).cast();
  }
  return result;
}

/// What the streaming callback needs: the Python callable and the first
/// Python exception it raised (re-raised once generate returns).
struct Stream {
  nb::callable fn;
  bool failed = false;
  std::optional<nb::python_error> error;
};

bool pythonFinalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

int streamToken(const tfrun_token_t *t, void *user) {
  Stream &st = *static_cast<Stream *>(user);
  // An engine's request thread must not take the GIL while the interpreter
  // exits (Python would end the thread inside C++ frames): it stops instead.
  if (pythonFinalizing())
    return 1;
  nb::gil_scoped_acquire gil;
  if (st.failed)
    return 1;
  try {
    nb::object stop = st.fn(t->batch_index, t->step, t->token_id, t->log_prob);
    return nb::cast<bool>(stop) ? 1 : 0;
  } catch (nb::python_error &e) {
    st.failed = true;
    st.error.emplace(std::move(e));
    return 1;
  } catch (...) {
    st.failed = true;
    return 1;
  }
}

using Generated = std::vector<std::pair<std::vector<int64_t>, float>>;

/// The C options of Session.generate / Engine.submit's arguments.
tfrun_generate_options_t options(int beam, int max_len, float length_penalty, bool sample,
                                 float temperature, int top_k, float top_p, uint64_t seed,
                                 float repetition_penalty, float min_p) {
  tfrun_generate_options_t o;
  tfrun_generate_options_init(&o);
  o.beam_width = beam;
  o.max_len = max_len;
  o.length_penalty = length_penalty;
  o.sample = sample ? 1 : 0;
  o.temperature = temperature;
  o.top_k = top_k;
  o.top_p = top_p;
  o.seed = seed;
  o.repetition_penalty = repetition_penalty;
  o.min_p = min_p;
  return o;
}

Generated generate(Session &self, const std::vector<std::pair<std::string, Input>> &inputs,
                   int beam, int max_len, float length_penalty, bool sample, float temperature,
                   int top_k, float top_p, uint64_t seed, float repetition_penalty, float min_p,
                   std::optional<nb::callable> callback) {
  const tfrun_generate_options_t o = options(beam, max_len, length_penalty, sample, temperature,
                                             top_k, top_p, seed, repetition_penalty, min_p);
  Stream stream;
  if (callback)
    stream.fn = *callback;
  Failure f;
  Generated out;
  {
    nb::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(self.mu);
    f = self.bind(inputs);
    if (!f)
      f = take(callback ? tfrun_session_generate_stream(self.s, &o, streamToken, &stream)
                        : tfrun_session_generate(self.s, &o));
    for (size_t i = 0; !f && i < tfrun_session_generated_count(self.s); ++i) {
      const int64_t *ids;
      size_t len;
      float score;
      if ((f = take(tfrun_session_get_generated(self.s, i, &ids, &len, &score))))
        break;
      out.emplace_back(std::vector<int64_t>(ids, ids + len), score);
    }
  }
  if (stream.error)
    throw *stream.error;
  if (stream.failed) {
    PyErr_SetString(PyExc_RuntimeError, "the streaming callback failed");
    throw nb::python_error();
  }
  if (f)
    raise(f);
  return out;
}

/// The engine (tfrun_engine_*): requests run on the engine's threads; their
/// token callbacks take the GIL to call Python.
struct Engine {
  std::shared_ptr<Model> model;
  tfrun_engine_t *e = nullptr;
  std::mutex mu; // streams
  std::map<uint64_t, std::shared_ptr<Stream>> streams;

  ~Engine() {
    // Request threads may wait for the GIL in a token callback: stop them
    // without holding it.
    nb::gil_scoped_release nogil;
    tfrun_engine_destroy(e);
  }
};

uint64_t engineSubmit(Engine &self, const std::vector<std::pair<std::string, Input>> &inputs,
                      int beam, int max_len, float length_penalty, bool sample,
                      float temperature, int top_k, float top_p, uint64_t seed,
                      float repetition_penalty, float min_p,
                      std::optional<nb::callable> callback, uint64_t cache_salt) {
  tfrun_generate_options_t o = options(beam, max_len, length_penalty, sample, temperature, top_k,
                                       top_p, seed, repetition_penalty, min_p);
  o.cache_salt = cache_salt;
  std::vector<std::vector<int64_t>> shapes(inputs.size());
  std::vector<tfrun_input_t> ins(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto &[name, a] = inputs[i];
    tfrun_dtype_t dt;
    if (a.dtype() == nb::dtype<int64_t>())
      dt = TFRUN_I64;
    else if (a.dtype() == nb::dtype<int32_t>())
      dt = TFRUN_I32;
    else
      raise({TFRUN_INVALID_ARGUMENT, "input '" + name + "': token ids must be int64 or int32"});
    for (size_t d = 0; d < a.ndim(); ++d)
      shapes[i].push_back(static_cast<int64_t>(a.shape(d)));
    ins[i] = {name.c_str(), dt, shapes[i].data(), shapes[i].size(), a.data()};
  }
  std::shared_ptr<Stream> stream;
  if (callback) {
    stream = std::make_shared<Stream>();
    stream->fn = *callback;
  }
  uint64_t id = 0;
  Failure f;
  {
    nb::gil_scoped_release nogil;
    // The stream is registered before the request can call it.
    std::lock_guard<std::mutex> lock(self.mu);
    f = take(tfrun_engine_submit(self.e, ins.data(), ins.size(), &o,
                                 stream ? streamToken : nullptr, stream.get(), &id));
    if (!f && stream)
      self.streams[id] = stream;
  }
  if (f)
    raise(f);
  return id;
}

} // namespace

NB_MODULE(_tfc, mod) {
  mod.doc() = "tfc's native module: libtfrun's C API for the tfc package (use tfc, not this)";
  mod.attr("API_VERSION") = TFRUN_API_VERSION;

  mod.def("_set_error_classes", [](nb::dict classes) {
    errorClasses().clear();
    for (auto [k, v] : classes)
      errorClasses()[k] = v;
  });
  mod.def("cuda_device_count", &tfrun_cuda_device_count);

  nb::class_<Model>(mod, "Model")
      .def_static(
          "load",
          [](const std::string &path) {
            auto m = std::make_shared<Model>();
            Failure f;
            {
              nb::gil_scoped_release nogil;
              f = take(tfrun_model_load_file(path.c_str(), &m->m));
            }
            if (f)
              raise(f);
            return m;
          },
          nb::arg("path"))
      .def_prop_ro("name", [](const Model &m) { return std::string(tfrun_model_name(m.m)); })
      .def_prop_ro("inputs",
                   [](const Model &m) {
                     std::vector<Info> r;
                     for (size_t i = 0; i < tfrun_model_input_count(m.m); ++i) {
                       tfrun_tensor_info_t info;
                       check(tfrun_model_input_info(m.m, i, &info));
                       r.push_back(toInfo(info));
                     }
                     return r;
                   })
      .def_prop_ro("outputs",
                   [](const Model &m) {
                     std::vector<Info> r;
                     for (size_t i = 0; i < tfrun_model_output_count(m.m); ++i) {
                       tfrun_tensor_info_t info;
                       check(tfrun_model_output_info(m.m, i, &info));
                       r.push_back(toInfo(info));
                     }
                     return r;
                   })
      .def_prop_ro("can_generate", [](const Model &m) { return tfrun_model_can_generate(m.m) != 0; })
      .def_prop_ro("generation_info", [](const Model &m) {
        int64_t bos, eos, pad, maxLen;
        tfrun_model_generation_info(m.m, &bos, &eos, &pad, &maxLen);
        return std::make_tuple(bos, eos, pad, maxLen);
      });

  nb::class_<Engine>(mod, "Engine")
      .def(
          "__init__",
          [](Engine *self, std::shared_ptr<Model> model, int threads, int device, int deviceId,
             int maxRows, int maxQueue, int maxBatchTokens, int64_t kvCacheBytes,
             int kvBlockSize, bool prefixCaching) {
            tfrun_engine_options_t o;
            tfrun_engine_options_init(&o);
            o.session.num_threads = threads;
            o.session.device = device;
            o.session.device_id = deviceId;
            o.max_rows = maxRows;
            o.max_queue = maxQueue;
            o.max_batch_tokens = maxBatchTokens;
            o.kv_cache_bytes = kvCacheBytes;
            o.kv_block_size = kvBlockSize;
            o.prefix_caching = prefixCaching ? 1 : -1;
            tfrun_engine_t *e = nullptr;
            Failure f;
            {
              nb::gil_scoped_release nogil;
              f = take(tfrun_engine_create(model->m, &o, &e));
            }
            if (f)
              raise(f);
            new (self) Engine();
            self->model = std::move(model);
            self->e = e;
          },
          nb::arg("model"), nb::arg("threads"), nb::arg("device"), nb::arg("device_id"),
          nb::arg("max_rows"), nb::arg("max_queue"), nb::arg("max_batch_tokens"),
          nb::arg("kv_cache_bytes"), nb::arg("kv_block_size"), nb::arg("prefix_caching"))
      .def("submit", &engineSubmit, nb::arg("inputs"), nb::arg("beam"), nb::arg("max_len"),
           nb::arg("length_penalty"), nb::arg("sample"), nb::arg("temperature"),
           nb::arg("top_k"), nb::arg("top_p"), nb::arg("seed"),
           nb::arg("repetition_penalty") = 1.0f, nb::arg("min_p") = 0.0f,
           nb::arg("callback").none() = nb::none(), nb::arg("cache_salt") = 0)
      .def(
          "wait",
          [](Engine &self, uint64_t id, int64_t timeoutMs) {
            int done = 0;
            Failure f;
            {
              nb::gil_scoped_release nogil;
              f = take(tfrun_engine_wait(self.e, id, timeoutMs, &done));
            }
            std::shared_ptr<Stream> stream;
            if (done) {
              std::lock_guard<std::mutex> lock(self.mu);
              auto it = self.streams.find(id);
              if (it != self.streams.end())
                stream = it->second;
            }
            if (stream && stream->error)
              throw *stream->error;
            if (f)
              raise(f);
            return done != 0;
          },
          nb::arg("id"), nb::arg("timeout_ms"))
      .def(
          "results",
          [](Engine &self, uint64_t id) {
            Generated out;
            size_t n = 0;
            check(tfrun_engine_generated_count(self.e, id, &n));
            for (size_t i = 0; i < n; ++i) {
              const int64_t *ids;
              size_t len;
              float score;
              check(tfrun_engine_get_generated(self.e, id, i, &ids, &len, &score));
              out.emplace_back(std::vector<int64_t>(ids, ids + len), score);
            }
            return out;
          },
          nb::arg("id"))
      .def(
          "cancel", [](Engine &self, uint64_t id) { check(tfrun_engine_cancel(self.e, id)); },
          nb::arg("id"))
      .def(
          "cached_tokens",
          [](Engine &self, uint64_t id) {
            uint64_t n = 0;
            check(tfrun_engine_cached_tokens(self.e, id, &n));
            return n;
          },
          nb::arg("id"))
      .def(
          "release",
          [](Engine &self, uint64_t id) {
            Failure f;
            std::shared_ptr<Stream> stream;
            {
              nb::gil_scoped_release nogil;
              // A running request is cancelled and waited for, so that its
              // token callback is never called once its stream is gone.
              f = take(tfrun_engine_cancel(self.e, id));
              int done = 0;
              if (!f)
                f = take(tfrun_engine_wait(self.e, id, -1, &done));
              f = take(tfrun_engine_release(self.e, id));
              std::lock_guard<std::mutex> lock(self.mu);
              auto it = self.streams.find(id);
              if (it != self.streams.end()) {
                stream = std::move(it->second);
                self.streams.erase(it);
              }
            }
            stream.reset(); // drops the callable with the GIL held
            if (f)
              raise(f);
          },
          nb::arg("id"))
      .def("stats", [](Engine &self) {
        tfrun_engine_stats_t st;
        check(tfrun_engine_stats(self.e, &st));
        nb::dict d;
        d["requests_queued"] = st.requests_queued;
        d["requests_running"] = st.requests_running;
        d["kv_blocks_used"] = st.kv_blocks_used;
        d["kv_blocks_free"] = st.kv_blocks_free;
        d["kv_block_positions"] = st.kv_block_positions;
        d["kv_block_bytes"] = st.kv_block_bytes;
        d["memory_blocks_used"] = st.memory_blocks_used;
        d["memory_blocks_free"] = st.memory_blocks_free;
        d["memory_block_positions"] = st.memory_block_positions;
        d["memory_block_bytes"] = st.memory_block_bytes;
        d["requests_preempted"] = st.requests_preempted;
        d["requests_finished"] = st.requests_finished;
        d["requests_cancelled"] = st.requests_cancelled;
        d["requests_failed"] = st.requests_failed;
        d["tokens_generated"] = st.tokens_generated;
        d["steps"] = st.steps;
        d["tokens_per_second"] = st.tokens_per_second;
        d["kv_blocks_cached"] = st.kv_blocks_cached;
        d["prefix_cache_queries"] = st.prefix_cache_queries;
        d["prefix_cache_hits"] = st.prefix_cache_hits;
        return d;
      });

  nb::class_<Session>(mod, "Session")
      .def(
          "__init__",
          [](Session *self, std::shared_ptr<Model> model, int threads, int device, int deviceId) {
            tfrun_session_options_t o;
            tfrun_session_options_init(&o);
            o.num_threads = threads;
            o.device = device;
            o.device_id = deviceId;
            tfrun_session_t *s = nullptr;
            Failure f;
            {
              nb::gil_scoped_release nogil;
              f = take(tfrun_session_create_with_options(model->m, &o, &s));
            }
            if (f)
              raise(f);
            new (self) Session();
            self->model = std::move(model);
            self->s = s;
          },
          nb::arg("model"), nb::arg("threads"), nb::arg("device"), nb::arg("device_id"))
      .def_prop_ro("device",
                   [](const Session &s) { return std::string(tfrun_session_device(s.s)); })
      .def("run", &run, nb::arg("inputs"))
      .def("generate", &generate, nb::arg("inputs"), nb::arg("beam"), nb::arg("max_len"),
           nb::arg("length_penalty"), nb::arg("sample"), nb::arg("temperature"),
           nb::arg("top_k"), nb::arg("top_p"), nb::arg("seed"),
           nb::arg("repetition_penalty") = 1.0f, nb::arg("min_p") = 0.0f,
           nb::arg("callback").none() = nb::none())
      .def("memory_info", [](Session &s) {
        tfrun_memory_info_t i;
        Failure f;
        {
          nb::gil_scoped_release nogil; // the lock may be held by a thread that needs the GIL
          std::lock_guard<std::mutex> lock(s.mu);
          f = take(tfrun_session_memory_info(s.s, &i));
        }
        if (f)
          raise(f);
        nb::dict d;
        d["weights_bytes"] = i.weights_bytes;
        d["arena_bytes"] = i.arena_bytes;
        d["kv_cache_bytes"] = i.kv_cache_bytes;
        d["declared_arena_bytes"] = i.declared_arena_bytes;
        d["declared_kv_cache_bytes"] = i.declared_kv_cache_bytes;
        return d;
      });
}
