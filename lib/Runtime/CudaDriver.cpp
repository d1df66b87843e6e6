//===- CudaDriver.cpp - the CUDA driver API, loaded at run time -----------===//

#include "liger/Runtime/CudaDriver.h"

#include <cstdlib>
#include <dlfcn.h>
#include <mutex>

using namespace liger::runtime;

std::string CudaDriver::describe(CUresult result, const char *call) const {
  const char *name = nullptr, *text = nullptr;
  if (cuGetErrorName)
    (void)cuGetErrorName(result, &name);
  if (cuGetErrorString)
    (void)cuGetErrorString(result, &text);
  std::string message = std::string(call) + " failed: ";
  message += name ? name : "CUDA error " + std::to_string(result);
  if (text)
    message += std::string(" (") + text + ")";
  return message;
}

Status liger::runtime::cudaStatus(const CudaDriver &driver, CUresult result,
                                  const char *call, const char *file,
                                  int line) {
  return Status(StatusCode::kInternal, driver.describe(result, call), file,
                line);
}

namespace {
struct LoadedDriver {
  CudaDriver driver;
  Status status;
};

LoadedDriver load() {
  LoadedDriver loaded;
  const char *path = std::getenv("LIGER_LIBCUDA");
  if (!path || !*path)
    path = "libcuda.so.1";
  void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *why = dlerror();
    loaded.status = LIGER_MAKE_STATUS(
        StatusCode::kUnavailable,
        std::string("cannot load the CUDA driver (") + path +
            "): " + (why ? why : "unknown error") +
            "; liger kernels need an NVIDIA GPU and its driver");
    return loaded;
  }
#define LIGER_CUDA_SYMBOL(name, ret, params)                                   \
  loaded.driver.name = reinterpret_cast<ret(*) params>(dlsym(handle, #name));  \
  if (!loaded.driver.name) {                                                   \
    loaded.status = LIGER_MAKE_STATUS(                                         \
        StatusCode::kUnavailable, std::string("the CUDA driver (") + path +    \
                                      ") has no '" #name                       \
                                      "'; is it older than CUDA 12?");         \
    return loaded;                                                             \
  }
#include "liger/Runtime/CudaSymbols.def"
#undef LIGER_CUDA_SYMBOL
  CUresult result = loaded.driver.cuInit(0);
  if (result != kCudaSuccess)
    loaded.status =
        cudaStatus(loaded.driver, result, "cuInit(0)", __FILE__, __LINE__);
  return loaded;
}
} // namespace

Status CudaDriver::get(const CudaDriver **driver) {
  static LoadedDriver loaded = load(); // thread-safe initialization
  *driver = loaded.status.isOk() ? &loaded.driver : nullptr;
  return loaded.status;
}
