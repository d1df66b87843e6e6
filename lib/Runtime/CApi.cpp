//===- CApi.cpp - the liger runtime's C API -------------------------------===//
//
// Implements liger/Runtime/liger_runtime.h over the C++ runtime. No C++
// exception or type crosses it: every entry point runs its body through
// `guarded`, which turns any exception (std::bad_alloc included) into
// LIGER_INTERNAL and a message; failures set a thread-local message. The
// enumerations of the C header and of KernelAbi.h have the same values in
// the same order (checked below).
//
//===----------------------------------------------------------------------===//

#include "liger/Runtime/liger_runtime.h"

#include "liger/Runtime/Bundle.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

using namespace liger::runtime;

static_assert(LIGER_MAX_RANK == kMaxRank);
static_assert(LIGER_BF16 == static_cast<int>(DType::bf16) &&
              LIGER_I64 == static_cast<int>(DType::i64));
static_assert(LIGER_ROLE_WORKSPACE == static_cast<int>(ParamRole::Workspace));
static_assert(LIGER_KIND_ROWS == static_cast<int>(ParamKind::Rows) &&
              LIGER_KIND_MATRIX == static_cast<int>(ParamKind::Matrix) &&
              LIGER_KIND_HEAD_SCALARS ==
                  static_cast<int>(ParamKind::HeadScalars));
static_assert(LIGER_STAGE_DW == static_cast<int>(LossStage::DW) &&
              LIGER_NUM_LOSS_STAGES == kNumLossStages);

struct liger_bundle {
  std::unique_ptr<Bundle> bundle;
};

namespace {
thread_local std::string lastError;
/// Where even the message of a failure could not be allocated: what
/// liger_last_error says instead.
thread_local const char *lastErrorFallback = nullptr;

liger_status fail(const Status &status) {
  lastError = status.message();
  lastErrorFallback = nullptr;
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

/// The failure of C entry point `call` that threw: LIGER_INTERNAL with
/// "<call>: <why>".
liger_status failedByException(const char *call, const char *why) noexcept {
  try {
    lastError = std::string(call) + ": " + why;
    lastErrorFallback = nullptr;
  } catch (...) {
    lastErrorFallback = "liger runtime: out of memory (no room for the "
                        "message of a failure)";
  }
  return LIGER_INTERNAL;
}

/// Runs the body of C entry point `call`; no exception leaves it. A body
/// returning a status fails with LIGER_INTERNAL where it throws; one
/// returning a value returns `failed`.
template <typename Body>
liger_status guarded(const char *call, Body &&body) noexcept {
  return catchExceptions(
      body, [call](const char *why) { return failedByException(call, why); });
}
template <typename T, typename Body>
T guardedValue(const char *call, T failed, Body &&body) noexcept {
  return catchExceptions(body, [call, failed](const char *why) {
    (void)failedByException(call, why);
    return failed;
  });
}

liger_status check(const Status &status) {
  return status.isOk() ? LIGER_OK : fail(status);
}

liger_status invalid(const std::string &what) {
  return fail(Status(StatusCode::kInvalidArgument, what));
}

/// The kernel `kernel` of `bundle`, or a failure naming `call`.
liger_status kernelOf(const liger_bundle *bundle, int32_t kernel,
                      const char *call) {
  if (!bundle)
    return invalid(std::string(call) + ": null bundle");
  if (kernel < 0 ||
      static_cast<size_t>(kernel) >= bundle->bundle->kernelCount())
    return fail(
        Status(StatusCode::kNotFound,
               std::string(call) + ": no kernel #" + std::to_string(kernel) +
                   " in " + bundle->bundle->dir() + " (it has " +
                   std::to_string(bundle->bundle->kernelCount()) + ")"));
  return LIGER_OK;
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
      // A C caller may store any integer in the field: read it as one (a
      // value outside the enum's range, read as the enum, is undefined).
      int32_t dtype;
      static_assert(sizeof(dtype) == sizeof(t.dtype), "liger_dtype is an int");
      std::memcpy(&dtype, &t.dtype, sizeof(dtype));
      if (dtype < LIGER_BF16 || dtype > LIGER_I64)
        return invalid(std::string(call) + ": argument #" + std::to_string(i) +
                       " has an unknown dtype " + std::to_string(dtype));
      Status s =
          makeTensorArg(t.data, static_cast<DType>(dtype), t.shape, t.rank,
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

/// The shapes `infer` gives for the inputs of kernel `kernel`, written into
/// the caller's rank and size arrays.
template <typename Infer>
liger_status shapesOf(const char *call, const liger_bundle *bundle,
                      int32_t kernel, const liger_tensor *inputs,
                      int32_t numInputs, int32_t *ranks, int64_t *sizes,
                      Infer infer) {
  if (liger_status s = kernelOf(bundle, kernel, call))
    return s;
  if (!ranks || !sizes)
    return invalid(std::string(call) + ": null output arrays");
  Tensors tensors;
  if (liger_status s = tensors.convert(inputs, numInputs, call))
    return s;
  std::vector<Shape> in(tensors.size()), out;
  for (size_t i = 0; i < tensors.size(); ++i)
    in[i] = tensors.data()[i].shape;
  if (liger_status s = check(infer(bundle->bundle->kernel(kernel), in, &out)))
    return s;
  for (size_t i = 0; i < out.size(); ++i) {
    ranks[i] = static_cast<int32_t>(out[i].size());
    for (size_t d = 0; d < out[i].size(); ++d)
      sizes[i * LIGER_MAX_RANK + d] = out[i][d];
  }
  return LIGER_OK;
}
} // namespace

extern "C" {

int32_t liger_abi_version(void) { return LIGER_RUNTIME_ABI_VERSION; }

const char *liger_last_error(void) {
  return lastErrorFallback ? lastErrorFallback : lastError.c_str();
}

liger_status liger_bundle_open(const char *dir, liger_bundle **out) {
  return guarded("liger_bundle_open", [&]() -> liger_status {
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
  });
}

void liger_bundle_close(liger_bundle *bundle) { delete bundle; }

int32_t liger_bundle_kernel_count(const liger_bundle *bundle) {
  return guardedValue<int32_t>(
      "liger_bundle_kernel_count", 0, [&]() -> int32_t {
        return bundle ? static_cast<int32_t>(bundle->bundle->kernelCount()) : 0;
      });
}

const char *liger_bundle_kernel_name(const liger_bundle *bundle,
                                     int32_t index) {
  return guardedValue<const char *>(
      "liger_bundle_kernel_name", nullptr, [&]() -> const char * {
        if (!bundle || index < 0 ||
            static_cast<size_t>(index) >= bundle->bundle->kernelCount())
          return nullptr;
        return bundle->bundle->kernel(index).name.c_str();
      });
}

int32_t liger_bundle_kernel_index(const liger_bundle *bundle,
                                  const char *kernel) {
  return guardedValue<int32_t>("liger_bundle_kernel_index", -1,
                               [&]() -> int32_t {
                                 if (!bundle || !kernel)
                                   return -1;
                                 return bundle->bundle->kernelIndex(kernel);
                               });
}

int32_t liger_bundle_kernel_param_count(const liger_bundle *bundle,
                                        const char *kernel) {
  return guardedValue<int32_t>(
      "liger_bundle_kernel_param_count", -1, [&]() -> int32_t {
        int32_t index = liger_bundle_kernel_index(bundle, kernel);
        return index < 0 ? -1
                         : static_cast<int32_t>(
                               bundle->bundle->kernel(index).params.size());
      });
}

int64_t liger_bundle_workspace_ctas(const liger_bundle *bundle,
                                    const char *kernel, int64_t rows,
                                    int32_t sm_count) {
  return guardedValue<int64_t>(
      "liger_bundle_workspace_ctas", -1, [&]() -> int64_t {
        int32_t index = liger_bundle_kernel_index(bundle, kernel);
        if (index < 0)
          return -1;
        const KernelSpec &spec = bundle->bundle->kernel(index);
        bool partials = std::any_of(
            spec.params.begin(), spec.params.end(),
            [](const KernelParam &p) { return p.kind == ParamKind::Partials; });
        return partials ? workspaceCtas(spec, rows, sm_count) : 0;
      });
}

liger_status liger_bundle_launch(liger_bundle *bundle, const char *kernel,
                                 const liger_tensor *args, int32_t num_args,
                                 void *stream, int32_t device) {
  return guarded("liger_bundle_launch", [&]() -> liger_status {
    if (!bundle || !kernel)
      return invalid("liger_bundle_launch: null bundle or kernel name");
    int32_t index = bundle->bundle->kernelIndex(kernel);
    if (index < 0)
      return fail(
          Status(StatusCode::kNotFound,
                 bundle->bundle->dir() + " has no kernel '" + kernel + "'"));
    return liger_bundle_launch_kernel(bundle, index, args, num_args, stream,
                                      device);
  });
}

liger_status liger_bundle_launch_kernel(liger_bundle *bundle, int32_t kernel,
                                        const liger_tensor *args,
                                        int32_t num_args, void *stream,
                                        int32_t device) {
  return guarded("liger_bundle_launch_kernel", [&]() -> liger_status {
    if (liger_status s = kernelOf(bundle, kernel, "liger_bundle_launch"))
      return s;
    Tensors tensors;
    if (liger_status s = tensors.convert(args, num_args, "liger_bundle_launch"))
      return s;
    return check(bundle->bundle->launch(
        static_cast<size_t>(kernel), tensors.data(), tensors.size(),
        reinterpret_cast<CUstream>(stream), device));
  });
}

liger_status liger_bundle_kernel_info(const liger_bundle *bundle,
                                      int32_t kernel, liger_kernel_info *info) {
  return guarded("liger_bundle_kernel_info", [&]() -> liger_status {
    if (liger_status s = kernelOf(bundle, kernel, "liger_bundle_kernel_info"))
      return s;
    if (!info)
      return invalid("liger_bundle_kernel_info: null output pointer");
    const KernelSpec &spec = bundle->bundle->kernel(kernel);
    info->name = spec.name.c_str();
    info->function = spec.function.c_str();
    info->ops = spec.ops.c_str();
    info->template_name = templateName(spec.kernelTemplate);
    info->arch = bundle->bundle->moduleOf(kernel).arch.c_str();
    info->num_params = static_cast<int32_t>(spec.params.size());
    info->num_inputs = static_cast<int32_t>(spec.numInputs());
    info->num_outputs = static_cast<int32_t>(spec.numOutputs());
    info->num_workspaces =
        info->num_params - info->num_inputs - info->num_outputs;
    return LIGER_OK;
  });
}

liger_status liger_bundle_param_info(const liger_bundle *bundle, int32_t kernel,
                                     int32_t param, liger_param_info *info) {
  return guarded("liger_bundle_param_info", [&]() -> liger_status {
    if (liger_status s = kernelOf(bundle, kernel, "liger_bundle_param_info"))
      return s;
    const KernelSpec &spec = bundle->bundle->kernel(kernel);
    if (param < 0 || static_cast<size_t>(param) >= spec.params.size())
      return fail(Status(StatusCode::kNotFound,
                         "liger_bundle_param_info: kernel '" + spec.name +
                             "' has no parameter #" + std::to_string(param) +
                             " (it has " + std::to_string(spec.params.size()) +
                             ")"));
    if (!info)
      return invalid("liger_bundle_param_info: null output pointer");
    const KernelParam &p = spec.params[param];
    info->name = p.name.c_str();
    info->role = static_cast<liger_param_role>(p.role);
    info->kind = static_cast<liger_param_kind>(p.kind);
    info->dtype = static_cast<liger_dtype>(p.dtype);
    info->length = p.length;
    info->outer = p.outer;
    return LIGER_OK;
  });
}

liger_status liger_bundle_output_shapes(const liger_bundle *bundle,
                                        int32_t kernel,
                                        const liger_tensor *inputs,
                                        int32_t num_inputs, int32_t *ranks,
                                        int64_t *shapes) {
  return guarded("liger_bundle_output_shapes", [&]() -> liger_status {
    return shapesOf("liger_bundle_output_shapes", bundle, kernel, inputs,
                    num_inputs, ranks, shapes,
                    [](const KernelSpec &spec, const std::vector<Shape> &in,
                       std::vector<Shape> *out) {
                      return inferOutputShapes(spec, in.data(), in.size(), out);
                    });
  });
}

liger_status liger_bundle_workspace_shapes(const liger_bundle *bundle,
                                           int32_t kernel,
                                           const liger_tensor *inputs,
                                           int32_t num_inputs, int32_t sm_count,
                                           int32_t *ranks, int64_t *shapes) {
  return guarded("liger_bundle_workspace_shapes", [&]() -> liger_status {
    return shapesOf("liger_bundle_workspace_shapes", bundle, kernel, inputs,
                    num_inputs, ranks, shapes,
                    [sm_count](const KernelSpec &spec,
                               const std::vector<Shape> &in,
                               std::vector<Shape> *out) {
                      return inferWorkspaceShapes(spec, in.data(), in.size(),
                                                  sm_count, out);
                    });
  });
}

liger_status liger_bundle_check_device(liger_bundle *bundle, int32_t device) {
  return guarded("liger_bundle_check_device", [&]() -> liger_status {
    if (!bundle)
      return invalid("liger_bundle_check_device: null bundle");
    return check(bundle->bundle->checkDevice(device));
  });
}

int32_t liger_bundle_plan_count(const liger_bundle *bundle) {
  return guardedValue<int32_t>("liger_bundle_plan_count", 0, [&]() -> int32_t {
    return bundle
               ? static_cast<int32_t>(bundle->bundle->manifest().plans.size())
               : 0;
  });
}

liger_status liger_bundle_plan(const liger_bundle *bundle, int32_t index,
                               liger_loss_plan *plan) {
  return guarded("liger_bundle_plan", [&]() -> liger_status {
    if (!bundle || !plan)
      return invalid("liger_bundle_plan: null bundle or output pointer");
    const std::vector<LossPlan> &plans = bundle->bundle->manifest().plans;
    if (index < 0 || static_cast<size_t>(index) >= plans.size())
      return fail(Status(StatusCode::kNotFound,
                         "liger_bundle_plan: no plan #" +
                             std::to_string(index) + " (the bundle has " +
                             std::to_string(plans.size()) + ")"));
    const LossPlan &p = plans[index];
    plan->function = p.function.c_str();
    plan->kind = lossPlanKindName(p.kind);
    plan->chunk_tokens = p.chunkTokens;
    plan->memory_budget = p.memoryBudget;
    plan->ignore_index = p.ignoreIndex;
    plan->mean = p.mean;
    plan->class_weight = p.classWeight;
    plan->dw_f32 = p.dwF32;
    for (int s = 0; s < kNumLossStages; ++s)
      plan->kernels[s] =
          p.kernels[s].empty() ? -1 : bundle->bundle->kernelIndex(p.kernels[s]);
    return LIGER_OK;
  });
}

} // extern "C"
