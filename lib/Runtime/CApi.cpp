//===- CApi.cpp - the liger runtime's C API -------------------------------===//
//
// Implements liger/Runtime/liger_runtime.h over the C++ runtime. No C++
// exception or type crosses it; failures set a thread-local message.
//
//===----------------------------------------------------------------------===//

#include "liger/Runtime/liger_runtime.h"

#include "liger/Runtime/Bundle.h"

#include <memory>
#include <string>

using namespace liger::runtime;

struct liger_bundle {
  std::unique_ptr<Bundle> bundle;
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

liger_status check(const Status &status) {
  return status.isOk() ? LIGER_OK : fail(status);
}

liger_status invalid(const std::string &what) {
  return fail(Status(StatusCode::kInvalidArgument, what));
}

/// C tensors as TensorArgs, on the stack for the usual kernel.
class Tensors {
public:
  liger_status convert(const liger_tensor *tensors, int32_t n,
                       const char *call) {
    if (n < 0 || (n > 0 && !tensors))
      return invalid(std::string(call) + ": null or negative argument list");
    list_ = static_cast<size_t>(n) <= kInline
                ? inline_
                : (heap_.resize(static_cast<size_t>(n)), heap_.data());
    for (int32_t i = 0; i < n; ++i) {
      const liger_tensor &t = tensors[i];
      if (t.dtype < LIGER_BF16 || t.dtype > LIGER_I64)
        return invalid(std::string(call) + ": argument #" + std::to_string(i) +
                       " has an unknown dtype " + std::to_string(t.dtype));
      Status s =
          makeTensorArg(t.data, static_cast<DType>(t.dtype), t.shape, t.rank,
                        "argument", static_cast<size_t>(i), &list_[i]);
      if (!s.isOk())
        return fail(Status(s.code(), std::string(call) + ": " + s.message()));
    }
    size_ = static_cast<size_t>(n);
    return LIGER_OK;
  }
  const TensorArg *data() const { return list_; }
  size_t size() const { return size_; }

private:
  static constexpr size_t kInline = 16;
  TensorArg inline_[kInline];
  std::vector<TensorArg> heap_;
  TensorArg *list_ = inline_;
  size_t size_ = 0;
};

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
  *out = handle.release();
  return LIGER_OK;
}

void liger_bundle_close(liger_bundle *bundle) { delete bundle; }

int32_t liger_bundle_kernel_count(const liger_bundle *bundle) {
  return bundle ? static_cast<int32_t>(bundle->bundle->kernelCount()) : 0;
}

const char *liger_bundle_kernel_name(const liger_bundle *bundle,
                                     int32_t index) {
  if (!bundle || index < 0 ||
      static_cast<size_t>(index) >= bundle->bundle->kernelCount())
    return nullptr;
  return bundle->bundle->kernel(index).name.c_str();
}

int32_t liger_bundle_kernel_param_count(const liger_bundle *bundle,
                                        const char *kernel) {
  int32_t index = bundle && kernel ? bundle->bundle->kernelIndex(kernel) : -1;
  return index < 0 ? -1
                   : static_cast<int32_t>(
                         bundle->bundle->kernel(index).params.size());
}

int64_t liger_bundle_workspace_ctas(const liger_bundle *bundle,
                                    const char *kernel, int64_t rows,
                                    int32_t sm_count) {
  int32_t index = bundle && kernel ? bundle->bundle->kernelIndex(kernel) : -1;
  if (index < 0)
    return -1;
  const KernelSpec &spec = bundle->bundle->kernel(index);
  return spec.hasWorkspaces() ? workspaceCtas(spec, rows, sm_count) : 0;
}

liger_status liger_bundle_launch(liger_bundle *bundle, const char *kernel,
                                 const liger_tensor *args, int32_t num_args,
                                 void *stream, int32_t device) {
  if (!bundle || !kernel)
    return invalid("liger_bundle_launch: null bundle or kernel name");
  int32_t index = bundle->bundle->kernelIndex(kernel);
  if (index < 0)
    return fail(
        Status(StatusCode::kNotFound,
               bundle->bundle->dir() + " has no kernel '" + kernel + "'"));
  Tensors tensors;
  if (liger_status s = tensors.convert(args, num_args, "liger_bundle_launch"))
    return s;
  return check(bundle->bundle->launch(static_cast<size_t>(index),
                                      tensors.data(), tensors.size(),
                                      reinterpret_cast<CUstream>(stream),
                                      device));
}


} // extern "C"
