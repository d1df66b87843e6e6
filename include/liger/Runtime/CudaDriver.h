//===- CudaDriver.h - the CUDA driver API, loaded at run time ---*- C++ -*-===//
//
// The runtime talks to the GPU through the CUDA driver API only, loaded with
// dlopen from libcuda.so.1 (or $LIGER_LIBCUDA) on first use, so that the
// runtime builds and imports on machines without a GPU or driver and fails
// there with a clear Status at first use. Every call goes through
// LIGER_CUDA_RETURN_IF_ERROR, whose Status names the call, the CUDA error
// name and its description.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_RUNTIME_CUDADRIVER_H
#define LIGER_RUNTIME_CUDADRIVER_H

#include "liger/Runtime/Status.h"

namespace liger::runtime {

// The driver API's types, declared here so that no CUDA header is needed.
using CUresult = int;
using CUdevice = int;
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;
using CUcontext = CUctx_st *;
using CUmodule = CUmod_st *;
using CUfunction = CUfunc_st *;
using CUstream = CUstream_st *;

constexpr CUresult kCudaSuccess = 0;
constexpr int kAttrComputeCapabilityMajor = 75;
constexpr int kAttrComputeCapabilityMinor = 76;
constexpr int kAttrMultiprocessorCount = 16;
constexpr int kAttrMaxSharedMemoryPerBlockOptin = 97;
constexpr int kFuncAttrMaxDynamicSharedMemory = 8;

/// The loaded driver: one function pointer per entry of CudaSymbols.def.
struct CudaDriver {
#define LIGER_CUDA_SYMBOL(name, ret, params) ret(*name) params = nullptr;
#include "liger/Runtime/CudaSymbols.def"
#undef LIGER_CUDA_SYMBOL

  /// The process-wide driver, loaded and cuInit-ed on first call
  /// (thread-safe). On failure, `*driver` is null and the Status says why
  /// (no libcuda.so.1, a missing symbol, or cuInit's error).
  static Status get(const CudaDriver **driver);

  /// "<call> failed: CUDA_ERROR_X (<description>)".
  std::string describe(CUresult result, const char *call) const;
};

/// Turns a CUresult into a Status naming `call`.
Status cudaStatus(const CudaDriver &driver, CUresult result, const char *call,
                  const char *file, int line);

} // namespace liger::runtime

/// Runs the driver call `expr` (through `driver`, a `const CudaDriver &`)
/// and returns a failed Status from the enclosing function if it fails.
#define LIGER_CUDA_RETURN_IF_ERROR(driver, expr)                               \
  do {                                                                         \
    ::liger::runtime::CUresult ligerCuResult_ = (driver).expr;                 \
    if (ligerCuResult_ != ::liger::runtime::kCudaSuccess)                      \
      return ::liger::runtime::cudaStatus((driver), ligerCuResult_, #expr,     \
                                          __FILE__, __LINE__);                 \
  } while (false)

/// A driver call whose failure is deliberately ignored (say why at the use).
#define LIGER_CUDA_IGNORE_ERROR(driver, expr) (void)(driver).expr

#endif // LIGER_RUNTIME_CUDADRIVER_H
