//===- cuda_plugin.cc - the entry point of libtfrun_cuda.so ---------------===//
//
// Exports device_cuda.cc's two functions to libtfrun (cuda_plugin.h).
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda_plugin.h"

extern "C" __attribute__((visibility("default"))) const tfrun::rt::CudaPlugin *
tfrun_cuda_plugin(void) {
  static const tfrun::rt::CudaPlugin plugin{tfrun::rt::CudaPlugin::kAbi, TFC_VERSION_STRING,
                                            &tfrun::rt::cudaDeviceCount,
                                            &tfrun::rt::createCudaDevice};
  return &plugin;
}
