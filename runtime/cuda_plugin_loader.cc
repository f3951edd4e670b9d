//===- cuda_plugin_loader.cc - finds and opens libtfrun_cuda.so -----------===//
//
// libtfrun's side of cuda_plugin.h: cudaDeviceCount and createCudaDevice of
// device.h, answered by the plugin. It is looked for beside libtfrun itself
// (the build's lib/ and an installed prefix's libdir alike), then by name
// through the dynamic linker's search path. It is opened once, on first use,
// and never closed: devices it created may live until exit.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda_plugin.h"

#include <dlfcn.h>
#include <mutex>
#include <unistd.h>

namespace tfrun::rt {
namespace {

#if TFC_HAVE_CUDA_PLUGIN
constexpr const char *kPluginName = "libtfrun_cuda.so.0";

/// The plugin, or null with |why| saying what went wrong.
const CudaPlugin *plugin(std::string &why) {
  static std::once_flag once;
  static const CudaPlugin *found = nullptr;
  static std::string error;
  std::call_once(once, [] {
    std::string path = kPluginName;
    Dl_info self{};
    if (dladdr(reinterpret_cast<void *>(&cudaDeviceCount), &self) && self.dli_fname) {
      std::string lib = self.dli_fname;
      size_t slash = lib.rfind('/');
      if (slash != std::string::npos)
        path = lib.substr(0, slash + 1) + kPluginName;
    }
    void *h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    const char *e = h ? nullptr : dlerror();
    std::string firstError = e ? e : "unknown error";
    if (!h && path != kPluginName && access(path.c_str(), F_OK) != 0) {
      h = dlopen(kPluginName, RTLD_NOW | RTLD_LOCAL); // not beside libtfrun: the search path
      e = h ? nullptr : dlerror();
      firstError = e ? e : "unknown error";
    }
    if (!h) {
      error = std::string("the CUDA backend (") + kPluginName + ") cannot be loaded: " + firstError;
      return;
    }
    using Entry = const CudaPlugin *(*)();
    auto entry = reinterpret_cast<Entry>(dlsym(h, "tfrun_cuda_plugin"));
    const CudaPlugin *p = entry ? entry() : nullptr;
    if (!p || p->abi != CudaPlugin::kAbi || std::string(p->version) != TFC_VERSION_STRING) {
      error = std::string(kPluginName) + " is from another build of tfc (" +
              (p ? p->version : "no entry point") + "; this libtfrun is " + TFC_VERSION_STRING +
              ")";
      return;
    }
    found = p;
  });
  why = error;
  return found;
}
#else
const CudaPlugin *plugin(std::string &why) {
  why = "this libtfrun was built without CUDA";
  return nullptr;
}
#endif

} // namespace

int cudaDeviceCount(std::string *why) {
  std::string e;
  const CudaPlugin *p = plugin(e);
  if (!p) {
    if (why)
      *why = e;
    return 0;
  }
  return p->deviceCount(why);
}

Status createCudaDevice(int ordinal, uint32_t computeDtype, std::unique_ptr<Device> &out) {
  std::string e;
  const CudaPlugin *p = plugin(e);
  if (!p) {
#if TFC_HAVE_CUDA_PLUGIN
    return Status::unsupported(e);
#else
    return Status::unsupported("this libtfrun was built without CUDA (configure with the CUDA "
                               "toolkit at /usr/local/cuda, or -DTFC_CUDA=ON)");
#endif
  }
  return p->createDevice(ordinal, computeDtype, out);
}

} // namespace tfrun::rt
