//===- tfrun/tfrun.hpp - a small C++ wrapper over the tfrun C API ---------===//
//
// Header-only RAII over include/tfrun/tfrun.h for C++ programs: Model and Session
// release themselves, and a failing call throws tfrun::Error (code + message).
// Session::generate wraps tfrun_session_generate (docs/generation.md, docs/c-api.md).
// The exceptions are thrown here, in the caller's code; none crosses the C API.
// Thread safety is the C API's: share a Model freely, use a Session from one
// thread at a time.
//
//===----------------------------------------------------------------------===//
#ifndef TFRUN_TFRUN_HPP
#define TFRUN_TFRUN_HPP

#include "tfrun/tfrun.h"

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace tfrun {

/// A failed tfrun call.
class Error : public std::runtime_error {
public:
  Error(tfrun_code_t code, const std::string &msg) : std::runtime_error(msg), code_(code) {}
  tfrun_code_t code() const { return code_; }

private:
  tfrun_code_t code_;
};

/// Throws if |st| is a failure; always releases it.
inline void check(tfrun_status_t *st) {
  if (!st)
    return;
  Error e(tfrun_status_code(st), tfrun_status_message(st));
  tfrun_status_release(st);
  throw e;
}

/// A loaded model.bin; immutable, shareable across threads.
class Model {
public:
  explicit Model(const std::string &path) { check(tfrun_model_load_file(path.c_str(), &m_)); }
  Model(const void *data, size_t size) { check(tfrun_model_load_buffer(data, size, &m_)); }
  ~Model() { tfrun_model_release(m_); }
  Model(const Model &) = delete;
  Model &operator=(const Model &) = delete;

  std::vector<std::string> inputNames() const {
    std::vector<std::string> v;
    for (size_t i = 0; i < tfrun_model_input_count(m_); ++i)
      v.push_back(tfrun_model_input_name(m_, i));
    return v;
  }
  std::vector<std::string> outputNames() const {
    std::vector<std::string> v;
    for (size_t i = 0; i < tfrun_model_output_count(m_); ++i)
      v.push_back(tfrun_model_output_name(m_, i));
    return v;
  }
  const tfrun_model_t *get() const { return m_; }

private:
  tfrun_model_t *m_ = nullptr;
};

/// An f32 output: shape and a copy of the data.
struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

/// One session over a Model (which must outlive it).
class Session {
public:
  explicit Session(const Model &model, int numThreads = 0) {
    check(tfrun_session_create(model.get(), numThreads, &s_));
  }
  ~Session() { tfrun_session_release(s_); }
  Session(const Session &) = delete;
  Session &operator=(const Session &) = delete;

  /// Binds token ids [batch, seq] (row-major).
  void setInput(const std::string &name, const std::vector<int64_t> &ids, int64_t batch,
                int64_t seq) {
    int64_t shape[2] = {batch, seq};
    if ((int64_t)ids.size() != batch * seq)
      throw Error(TFRUN_INVALID_ARGUMENT, "input '" + name + "' has " +
                                              std::to_string(ids.size()) + " ids, not " +
                                              std::to_string(batch * seq));
    check(tfrun_session_set_input(s_, name.c_str(), TFRUN_I64, shape, 2, ids.data()));
  }
  void run() { check(tfrun_session_run(s_)); }
  Tensor output(const std::string &name) {
    const float *data;
    const int64_t *shape;
    size_t rank;
    check(tfrun_session_get_output(s_, name.c_str(), &data, &shape, &rank));
    Tensor t;
    t.shape.assign(shape, shape + rank);
    size_t n = 1;
    for (int64_t d : t.shape)
      n *= (size_t)d;
    t.data.assign(data, data + n);
    return t;
  }

  /// Runs the decoding loop (docs/generation.md) over the bound inputs and
  /// returns each sequence's new tokens and score.
  struct Generated {
    std::vector<std::vector<int64_t>> ids;
    std::vector<float> scores;
  };
  Generated generate(const tfrun_generate_options_t &options) {
    check(tfrun_session_generate(s_, &options));
    Generated g;
    for (size_t i = 0; i < tfrun_session_generated_count(s_); ++i) {
      const int64_t *ids;
      size_t len;
      float score;
      check(tfrun_session_get_generated(s_, i, &ids, &len, &score));
      g.ids.emplace_back(ids, ids + len);
      g.scores.push_back(score);
    }
    return g;
  }
  /// Greedy (beamWidth 1) or beam search with the model's ids; 0 (and a NaN
  /// length penalty) take the model's defaults (tfrun_generate_options_init).
  Generated generate(int beamWidth = 0, int maxLen = 0,
                     float lengthPenalty = std::numeric_limits<float>::quiet_NaN()) {
    tfrun_generate_options_t o;
    tfrun_generate_options_init(&o);
    o.beam_width = beamWidth;
    o.max_len = maxLen;
    o.length_penalty = lengthPenalty;
    return generate(o);
  }

private:
  tfrun_session_t *s_ = nullptr;
};

} // namespace tfrun

#endif // TFRUN_TFRUN_HPP
