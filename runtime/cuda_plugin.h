//===- cuda_plugin.h - libtfrun_cuda, the CUDA device as a plugin --*- C++ -*-===//
//
// Internal to libtfrun. The CUDA device (device_cuda.cc) and its kernels are a
// separate shared library, libtfrun_cuda.so.0, that libtfrun opens with
// dlopen() the first time a program asks about CUDA (cuda_plugin_loader.cc).
// Linking cuBLAS and cuBLASLt into libtfrun itself cost every process, CPU-only
// ones included, about 150 MB of resident memory and 80 ms of start-up to map
// and relocate them; ONNX Runtime ships its CUDA execution provider as a
// separate library for the same reason.
//
// The plugin is built from the same sources and headers in the same build as
// libtfrun, so the two share the C++ types of device.h; kAbi guards against a
// plugin from another build.
//
//===----------------------------------------------------------------------===//
#ifndef TFC_RUNTIME_CUDA_PLUGIN_H
#define TFC_RUNTIME_CUDA_PLUGIN_H

#include "runtime/device.h"

namespace tfrun::rt {

struct CudaPlugin {
  /// The layout of this struct and of the types it passes (device.h, model.h).
  static constexpr uint32_t kAbi = 1;
  uint32_t abi;
  const char *version; ///< the tfc version it was built as
  int (*deviceCount)(std::string *why);
  Status (*createDevice)(int ordinal, uint32_t computeDtype, std::unique_ptr<Device> &out);
};

} // namespace tfrun::rt

/// The plugin's one exported symbol.
extern "C" const tfrun::rt::CudaPlugin *tfrun_cuda_plugin(void);

#endif // TFC_RUNTIME_CUDA_PLUGIN_H
