//===- CApi.cpp - the liger runtime's C API -------------------------------===//
//
// Implements liger/Runtime/liger_runtime.h over the C++ runtime. No C++
// exception or type crosses it; failures set a thread-local message.
//
//===----------------------------------------------------------------------===//

#include "liger/Runtime/liger_runtime.h"

#include "liger/Runtime/Bundle.h"

#include <cstring>
#include <memory>
#include <string>

using namespace liger::runtime;

struct liger_bundle {
  std::unique_ptr<Bundle> bundle;
  std::vector<std::string> names;
};

namespace {
thread_local std::string lastError;

liger_status fail(const Status &status) {
  lastError = status.message();
  switch (status.code()) {
  case StatusCode::kOk:
    return LIGER_OK;
  case StatusCode::kInvalidArgument:
    return LIGER_INVALID_ARGUMENT;
  case StatusCode::kNotFound:
    return LIGER_NOT_FOUND;
  case StatusCode::kFailedPrecondition:
    return LIGER_FAILED_PRECONDITION;
  case StatusCode::kUnavailable:
    return LIGER_UNAVAILABLE;
  case StatusCode::kInternal:
    return LIGER_INTERNAL;
  }
  return LIGER_INTERNAL;
}

liger_status invalid(const std::string &what) {
  return fail(Status(StatusCode::kInvalidArgument, what));
}

const KernelSpec *find(const liger_bundle *bundle, const char *kernel) {
  if (!bundle || !kernel)
    return nullptr;
  return bundle->bundle->findKernel(kernel);
}
} // namespace

extern "C" {

int32_t liger_abi_version(void) { return LIGER_RUNTIME_ABI_VERSION; }

const char *liger_last_error(void) { return lastError.c_str(); }

liger_status liger_bundle_open(const char *dir, liger_bundle **out) {
  if (!out)
    return invalid("liger_bundle_open: null output pointer");
  *out = nullptr;
  if (!dir)
    return invalid("liger_bundle_open: null directory");
  auto handle = std::make_unique<liger_bundle>();
  Status status = Bundle::open(dir, &handle->bundle);
  if (!status.isOk())
    return fail(status);
  for (const ModuleSpec &module : handle->bundle->manifest().modules)
    for (const KernelSpec &kernel : module.kernels)
      handle->names.push_back(kernel.name);
  *out = handle.release();
  return LIGER_OK;
}

void liger_bundle_close(liger_bundle *bundle) { delete bundle; }

int32_t liger_bundle_kernel_count(const liger_bundle *bundle) {
  return bundle ? static_cast<int32_t>(bundle->names.size()) : 0;
}

const char *liger_bundle_kernel_name(const liger_bundle *bundle,
                                     int32_t index) {
  if (!bundle || index < 0 ||
      static_cast<size_t>(index) >= bundle->names.size())
    return nullptr;
  return bundle->names[index].c_str();
}

int32_t liger_bundle_kernel_param_count(const liger_bundle *bundle,
                                        const char *kernel) {
  const KernelSpec *spec = find(bundle, kernel);
  return spec ? static_cast<int32_t>(spec->params.size()) : -1;
}

int64_t liger_bundle_workspace_ctas(const liger_bundle *bundle,
                                    const char *kernel, int64_t rows,
                                    int32_t sm_count) {
  const KernelSpec *spec = find(bundle, kernel);
  if (!spec)
    return -1;
  return spec->hasWorkspaces() ? workspaceCtas(*spec, rows, sm_count) : 0;
}

liger_status liger_bundle_launch(liger_bundle *bundle, const char *kernel,
                                 const liger_tensor *args, int32_t num_args,
                                 void *stream, int32_t device) {
  if (!bundle || !kernel)
    return invalid("liger_bundle_launch: null bundle or kernel name");
  if (num_args < 0 || (num_args > 0 && !args))
    return invalid("liger_bundle_launch: null or negative argument list");
  std::vector<TensorArg> tensors(num_args);
  for (int32_t i = 0; i < num_args; ++i) {
    const liger_tensor &a = args[i];
    // A C caller may store any integer in the field: read it as one (a
    // value outside the enum's range, read as the enum, is undefined).
    int32_t dtype;
    static_assert(sizeof(dtype) == sizeof(a.dtype), "liger_dtype is an int");
    std::memcpy(&dtype, &a.dtype, sizeof(dtype));
    if (dtype < LIGER_BF16 || dtype > LIGER_I64)
      return invalid("liger_bundle_launch: argument #" + std::to_string(i) +
                     " has an unknown dtype " + std::to_string(dtype));
    if (a.rank < 0 || a.rank > 8 || (a.rank > 0 && !a.shape))
      return invalid("liger_bundle_launch: argument #" + std::to_string(i) +
                     " has rank " + std::to_string(a.rank) +
                     " (0 to 8, with a shape array)");
    static const DType kDTypes[] = {DType::bf16, DType::f16, DType::f32,
                                    DType::i32, DType::i64};
    tensors[i].data = a.data;
    tensors[i].dtype = kDTypes[dtype];
    tensors[i].shape.assign(a.shape, a.shape + a.rank);
  }
  Status status = bundle->bundle->launch(
      kernel, tensors, reinterpret_cast<CUstream>(stream), device);
  return status.isOk() ? LIGER_OK : fail(status);
}

} // extern "C"
