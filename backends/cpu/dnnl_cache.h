//===- dnnl_cache.h - oneDNN's engine and shared primitives -----*- C++ -*-===//
//
// The CPU backend's oneDNN engine, and the matmul and eltwise primitives its
// linear layers run (linear_dnnl.cc), made once and shared by every weight
// and session: a primitive reads its weights and data from the call's
// arguments, so the layers of a model (and every model) share one per shape.
//
//===----------------------------------------------------------------------===//
#ifndef TFC_BACKENDS_CPU_DNNL_CACHE_H
#define TFC_BACKENDS_CPU_DNNL_CACHE_H

#include <oneapi/dnnl/dnnl.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

namespace tfc::cpu {

dnnl::engine &cpuEngine();

/// The oneDNN eltwise algorithm of activation |act| (tfc/enums.def), for the
/// GEMM's post-ops and the OpenBLAS path's epilogue; false for one oneDNN
/// lacks, which runPackedLinear applies from tfc/unary.def instead.
bool dnnlEltwise(int act, dnnl::algorithm &alg);

/// One oneDNN matmul for a row count, weight layout, dtypes and post-ops.
struct DnnlPrim {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
  dnnl::memory::desc residual;
};

/// The primitives, created on first use and kept. Each is for one row count;
/// linear_dnnl.cc runs GEMMs of more rows in slices, so the primitives of a
/// shape stay bounded.
class PrimCache {
public:
  using dt = dnnl::memory::data_type;
  /// For (rows, weight layout, src, dst, bias, act, residual) at this
  /// thread's OpenMP thread count (oneDNN fixes it when it creates a
  /// primitive).
  const DnnlPrim &get(int64_t rows, const dnnl::memory::desc &wdesc, dt srcT, dt dstT, bool bias,
                      int act, bool res);
  /// oneDNN's in-place eltwise |act| over |count| f32 values.
  const dnnl::eltwise_forward &eltwise(int64_t count, int act);
  /// Primitives made so far.
  size_t count();

private:
  std::mutex mu;
  size_t made = 0;
  std::map<std::tuple<int64_t, int64_t, int64_t, int, int, int, bool, int, bool, int>,
           std::vector<std::unique_ptr<DnnlPrim>>>
      cache; ///< one per weight layout at a key
  std::map<std::tuple<int64_t, int, int>, dnnl::eltwise_forward> eltwises;
};

PrimCache &primCache();

} // namespace tfc::cpu

#endif // TFC_BACKENDS_CPU_DNNL_CACHE_H
