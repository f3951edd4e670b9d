// Host emulation of the CUDA execution model, for checking tfc's CUDA kernels
// on a machine without a GPU. Throwaway developer harness, not part of tfc.
#pragma once
#include <cuda_runtime_api.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#undef __shared__
#define __shared__ static
#ifndef __launch_bounds__
#define __launch_bounds__(...)
#endif

namespace emu {
struct Idx { unsigned x = 0, y = 0, z = 0; };
inline thread_local Idx threadIdx_, blockIdx_;
inline Idx gridDim_, blockDim_;
inline std::barrier<> *blockBar = nullptr;
inline std::vector<std::unique_ptr<std::barrier<>>> warpBars;
inline int votes[1024];
inline double xchg[32][32];

inline void syncthreads() { blockBar->arrive_and_wait(); }
inline std::barrier<> &warpBar() { return *warpBars[threadIdx_.x / 32]; }
template <class T> T shfl_xor(T v, int o) {
  const int w = threadIdx_.x / 32, l = threadIdx_.x % 32;
  xchg[w][l] = static_cast<double>(v);
  warpBar().arrive_and_wait();
  T r = static_cast<T>(xchg[w][l ^ o]);
  warpBar().arrive_and_wait();
  return r;
}
inline int vote(int p, bool all) {
  votes[threadIdx_.x] = p != 0;
  syncthreads();
  int r = all ? 1 : 0;
  for (unsigned i = 0; i < blockDim_.x; ++i)
    r = all ? (r && votes[i]) : (r || votes[i]);
  syncthreads();
  return r;
}

template <class F> void launch(Idx grid, Idx block, F body) {
  const unsigned n = block.x;
  gridDim_ = grid;
  blockDim_ = block;
  std::barrier<> bar(n);
  blockBar = &bar;
  warpBars.clear();
  for (unsigned w = 0; w < (n + 31) / 32; ++w)
    warpBars.emplace_back(new std::barrier<>(std::min(32u, n - 32 * w)));
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < n; ++t)
    ts.emplace_back([&, t] {
      threadIdx_.x = t;
      for (unsigned z = 0; z < grid.z; ++z)
        for (unsigned y = 0; y < grid.y; ++y)
          for (unsigned x = 0; x < grid.x; ++x) {
            blockIdx_ = {x, y, z};
            body();
            bar.arrive_and_wait();
          }
    });
  for (auto &t : ts)
    t.join();
}
inline Idx toIdx(unsigned x) { return {x, 1, 1}; }
inline Idx toIdx(int x) { return {unsigned(x), 1, 1}; }
inline Idx toIdx(long x) { return {unsigned(x), 1, 1}; }
inline Idx toIdx(const dim3 &d) { return {d.x, d.y, d.z}; }
template <class G, class B, class F> void launch4(G g, B b, size_t, cudaStream_t, F f) {
  launch(toIdx(g), toIdx(b), f);
}
} // namespace emu

#define threadIdx emu::threadIdx_
#define blockIdx emu::blockIdx_
#define gridDim emu::gridDim_
#define blockDim emu::blockDim_
inline void __syncthreads() { emu::syncthreads(); }
inline int __syncthreads_and(int p) { return emu::vote(p, true); }
inline int __syncthreads_or(int p) { return emu::vote(p, false); }
inline void __syncwarp(unsigned = 0xffffffffu) { emu::warpBar().arrive_and_wait(); }
template <class T> inline T __ldg(const T *p) { return *p; }
inline float __shfl_xor_sync(unsigned, float v, int o) { return emu::shfl_xor(v, o); }
inline double __shfl_xor_sync(unsigned, double v, int o) { return emu::shfl_xor(v, o); }
inline unsigned atomicCAS(unsigned *p, unsigned cmp, unsigned val) {
  static std::mutex m;
  std::lock_guard<std::mutex> l(m);
  unsigned old = *p;
  if (old == cmp)
    *p = val;
  return old;
}
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
inline double __longlong_as_double(long long i) { double f; std::memcpy(&f, &i, 8); return f; }
using std::min;
using std::max;
