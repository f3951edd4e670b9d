//===- dnnl_cache.cc - oneDNN's engine and shared primitives --------------===//
#include "backends/cpu/dnnl_cache.h"

#include "backends/cpu/linear_dnnl.h"
#include "tfc/abi.h"

#include <omp.h>

namespace tfc::cpu {

using tag = dnnl::memory::format_tag;

dnnl::engine &cpuEngine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

bool dnnlEltwise(int act, dnnl::algorithm &alg) {
  switch (act) {
  case TFC_ACT_RELU:
    alg = dnnl::algorithm::eltwise_relu;
    return true;
  case TFC_ACT_GELU:
    alg = dnnl::algorithm::eltwise_gelu_erf;
    return true;
  case TFC_ACT_GELU_TANH:
    alg = dnnl::algorithm::eltwise_gelu_tanh;
    return true;
  default:
    return false;
  }
}

const DnnlPrim &PrimCache::get(int64_t rows, const dnnl::memory::desc &wdesc, dt srcT, dt dstT,
                               bool bias, int act, bool res) {
  const dnnl::memory::dims wd = wdesc.dims();
  const int64_t k = wd[0], n = wd[1];
  std::lock_guard<std::mutex> lock(mu);
  auto key = std::make_tuple(rows, k, n, (int)wdesc.data_type(), (int)srcT, (int)dstT, bias, act,
                             res, omp_get_max_threads());
  std::vector<std::unique_ptr<DnnlPrim>> &at = cache[key];
  for (const auto &p : at)
    if (p->pd.weights_desc() == wdesc)
      return *p;
  dnnl::memory::desc src({rows, k}, srcT, tag::ab);
  dnnl::memory::desc dst({rows, n}, dstT, tag::ab);
  dnnl::memory::desc rdesc({rows, n}, dt::f32, tag::ab);
  dnnl::memory::desc bdesc = bias ? dnnl::memory::desc({1, n}, dt::f32, tag::ab)
                                  : dnnl::memory::desc();
  dnnl::post_ops ops;
  dnnl::algorithm alg;
  if (dnnlEltwise(act, alg))
    ops.append_eltwise(1.0f, alg, 0.0f, 0.0f);
  if (res)
    ops.append_binary(dnnl::algorithm::binary_add, rdesc);
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  // A primitive in oneDNN's default (library) scratchpad mode takes its
  // scratchpad from a thread-local buffer sized by the primitives created on
  // the *calling* thread, so a primitive created on one thread and run on
  // another can write past that buffer. These primitives are shared by every
  // session, on any thread, so each call brings its own scratchpad.
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  dnnl::matmul::desc d = bias ? dnnl::matmul::desc(src, wdesc, bdesc, dst)
                              : dnnl::matmul::desc(src, wdesc, dst);
  dnnl::matmul::primitive_desc pd(d, attr, cpuEngine());
  at.push_back(std::make_unique<DnnlPrim>(DnnlPrim{pd, dnnl::matmul(pd), rdesc}));
  ++made;
  return *at.back();
}

const dnnl::eltwise_forward &PrimCache::eltwise(int64_t count, int act) {
  std::lock_guard<std::mutex> lock(mu);
  auto key = std::make_tuple(count, act, omp_get_max_threads());
  auto it = eltwises.find(key);
  if (it != eltwises.end())
    return it->second;
  dnnl::memory::desc d({count}, dt::f32, tag::a);
  dnnl::algorithm alg = dnnl::algorithm::eltwise_relu;
  dnnlEltwise(act, alg);
  dnnl::eltwise_forward::primitive_desc pd(
      dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, alg, d, 0.0f, 0.0f),
      cpuEngine());
  ++made;
  return eltwises.emplace(key, dnnl::eltwise_forward(pd)).first->second;
}

size_t PrimCache::count() {
  std::lock_guard<std::mutex> lock(mu);
  return made;
}

PrimCache &primCache() {
  static PrimCache *c = new PrimCache; // never destroyed: sessions may outlive statics
  return *c;
}

size_t dnnlPrimitivesMade() { return primCache().count(); }

} // namespace tfc::cpu
