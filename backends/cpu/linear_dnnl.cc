//===- linear_dnnl.cc - linear layers on oneDNN matmul --------------------===//
#include "backends/cpu/linear_dnnl.h"

#include <oneapi/dnnl/dnnl.hpp>
#include <omp.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

namespace tfc::cpu {

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

namespace {
dnnl::engine &cpuEngine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}
/// The row count the weights' layout is chosen for; oneDNN's blocked weight
/// layouts do not depend on it, and primitives for other row counts accept it.
constexpr int64_t kPackRows = 128;
} // namespace

class PackedLinear {
public:
  int64_t n = 0, k = 0;
  dnnl::memory::desc wdesc;
  dnnl::memory weights;

  struct Prim {
    dnnl::matmul::primitive_desc pd;
    dnnl::matmul prim;
  };
  /// Primitive for (rows, hasBias, act, hasResidual, threads), created on
  /// first use. oneDNN fixes a primitive's thread count when it is created, so
  /// sessions with different thread counts get their own primitives.
  const Prim &get(int64_t rows, bool bias, int act, bool res) const {
    std::lock_guard<std::mutex> lock(mu);
    auto key = std::make_tuple(rows, bias, act, res, omp_get_max_threads());
    auto it = cache.find(key);
    if (it != cache.end())
      return it->second;
    dnnl::memory::desc src({rows, k}, dt::f32, tag::ab);
    dnnl::memory::desc dst({rows, n}, dt::f32, tag::ab);
    dnnl::memory::desc bdesc = bias ? dnnl::memory::desc({1, n}, dt::f32, tag::ab)
                                    : dnnl::memory::desc();
    dnnl::post_ops ops;
    if (act == 1)
      ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    else if (act == 2)
      ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_erf, 0.0f, 0.0f);
    else if (act == 3)
      ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_tanh, 0.0f, 0.0f);
    if (res)
      ops.append_binary(dnnl::algorithm::binary_add, dst);
    dnnl::primitive_attr attr;
    attr.set_post_ops(ops);
    // A primitive in oneDNN's default (library) scratchpad mode takes its
    // scratchpad from a thread-local buffer sized by the primitives created on
    // the *calling* thread, so a primitive created on one thread and run on
    // another can write past that buffer. These primitives are shared by every
    // session of a model, on any thread, so each call brings its own scratchpad.
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::matmul::desc d = bias ? dnnl::matmul::desc(src, wdesc, bdesc, dst)
                                : dnnl::matmul::desc(src, wdesc, dst);
    dnnl::matmul::primitive_desc pd(d, attr, cpuEngine());
    auto [pos, _] = cache.emplace(key, Prim{pd, dnnl::matmul(pd)});
    return pos->second;
  }

private:
  mutable std::mutex mu;
  mutable std::map<std::tuple<int64_t, bool, int, bool, int>, Prim> cache;
};

std::shared_ptr<PackedLinear> packLinear(const float *w, int64_t n, int64_t k,
                                         std::string &err) {
  try {
    auto p = std::make_shared<PackedLinear>();
    p->n = n;
    p->k = k;
    // W [N, K] row-major is the matmul weights [K, N] in layout "ba".
    dnnl::memory::desc plain({k, n}, dt::f32, tag::ba);
    dnnl::memory::desc any({k, n}, dt::f32, tag::any);
    dnnl::memory::desc src({kPackRows, k}, dt::f32, tag::ab);
    dnnl::memory::desc dst({kPackRows, n}, dt::f32, tag::ab);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, any, dst), cpuEngine());
    p->wdesc = pd.weights_desc();
    p->weights = dnnl::memory(p->wdesc, cpuEngine());
    dnnl::memory from(plain, cpuEngine(), const_cast<float *>(w));
    dnnl::stream s(cpuEngine());
    dnnl::reorder(from, p->weights).execute(s, from, p->weights);
    s.wait();
    return p;
  } catch (const dnnl::error &e) {
    err = std::string("oneDNN could not pack a linear weight: ") + e.what();
    return nullptr;
  }
}

std::string runPackedLinear(const PackedLinear &w, const float *x, int64_t rows,
                            const float *bias, const float *residual, int act, float *y) {
  try {
    const PackedLinear::Prim &p = w.get(rows, bias != nullptr, act, residual != nullptr);
    dnnl::engine &eng = cpuEngine();
    dnnl::memory src(p.pd.src_desc(), eng, const_cast<float *>(x));
    dnnl::memory dst(p.pd.dst_desc(), eng, y);
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, w.weights}, {DNNL_ARG_DST, dst}};
    if (bias)
      args[DNNL_ARG_BIAS] = dnnl::memory(p.pd.bias_desc(), eng, const_cast<float *>(bias));
    if (residual)
      args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(act ? 1 : 0) | DNNL_ARG_SRC_1] =
          dnnl::memory(p.pd.dst_desc(), eng, const_cast<float *>(residual));
    const size_t scratch = p.pd.scratchpad_desc().get_size();
    if (scratch) {
      // Per thread, grown to the largest need; only the calling thread uses it.
      thread_local std::unique_ptr<char, void (*)(void *)> buf(nullptr, std::free);
      thread_local size_t bufSize = 0;
      if (scratch > bufSize) {
        buf.reset(static_cast<char *>(std::aligned_alloc(64, (scratch + 63) / 64 * 64)));
        bufSize = buf ? scratch : 0;
        if (!buf)
          return "out of memory for a oneDNN matmul scratchpad";
      }
      args[DNNL_ARG_SCRATCHPAD] = dnnl::memory(p.pd.scratchpad_desc(), eng, buf.get());
    }
    thread_local dnnl::stream stream(eng);
    p.prim.execute(stream, args);
    stream.wait();
    return "";
  } catch (const dnnl::error &e) {
    return std::string("oneDNN matmul failed: ") + e.what();
  }
}

} // namespace tfc::cpu
