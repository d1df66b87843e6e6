//===- liger_runtime.hpp - a header-only C++ API over the C ABI -*- C++ -*-===//
//
// For programs built with another compiler or standard library than the
// runtime: everything crosses the C ABI (liger_runtime.h). RAII for the
// bundle handle; failures come back as liger::abi::Error (the code and the
// runtime's message). Programs built with the runtime itself can use
// liger/Runtime/Bundle.h directly.
//
//   liger::abi::Bundle bundle("layer.bundle");
//   bundle.launch("layer_rowwise_0", {{x, LIGER_BF16, 2, xShape}, ...},
//   stream);
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_RUNTIME_LIGER_RUNTIME_HPP
#define LIGER_RUNTIME_LIGER_RUNTIME_HPP

#include "liger/Runtime/liger_runtime.h"

#include <stdexcept>
#include <string>
#include <vector>

namespace liger::abi {

class Error : public std::runtime_error {
public:
  Error(liger_status status, const std::string &message)
      : std::runtime_error(message), status_(status) {}
  liger_status status() const { return status_; }

private:
  liger_status status_;
};

inline void check(liger_status status) {
  if (status != LIGER_OK)
    throw Error(status, liger_last_error());
}

class Bundle {
public:
  explicit Bundle(const std::string &dir) {
    check(liger_bundle_open(dir.c_str(), &handle_));
  }
  ~Bundle() { liger_bundle_close(handle_); }
  Bundle(const Bundle &) = delete;
  Bundle &operator=(const Bundle &) = delete;
  Bundle(Bundle &&other) noexcept : handle_(other.handle_) {
    other.handle_ = nullptr;
  }

  std::vector<std::string> kernels() const {
    std::vector<std::string> names;
    for (int32_t i = 0; i < liger_bundle_kernel_count(handle_); ++i)
      names.emplace_back(liger_bundle_kernel_name(handle_, i));
    return names;
  }

  /// 0 when `kernel` has no partials workspace; throws for an unknown
  /// kernel.
  int64_t workspaceCtas(const std::string &kernel, int64_t rows,
                        int32_t smCount) const {
    int64_t ctas =
        liger_bundle_workspace_ctas(handle_, kernel.c_str(), rows, smCount);
    if (ctas < 0)
      throw Error(LIGER_NOT_FOUND, "no kernel '" + kernel + "'");
    return ctas;
  }

  void launch(const std::string &kernel, const std::vector<liger_tensor> &args,
              void *stream = nullptr, int32_t device = 0) {
    check(liger_bundle_launch(handle_, kernel.c_str(), args.data(),
                              static_cast<int32_t>(args.size()), stream,
                              device));
  }

  /// The handle of `kernel`; throws for an unknown kernel.
  int32_t kernelIndex(const std::string &kernel) const {
    int32_t index = liger_bundle_kernel_index(handle_, kernel.c_str());
    if (index < 0)
      throw Error(LIGER_NOT_FOUND, "no kernel '" + kernel + "'");
    return index;
  }

  /// The shapes of the outputs of `kernel` for `inputs` (their dtypes and
  /// shapes; pointers may be null).
  std::vector<std::vector<int64_t>>
  outputShapes(const std::string &kernel,
               const std::vector<liger_tensor> &inputs) const {
    int32_t index = kernelIndex(kernel);
    liger_kernel_info info;
    check(liger_bundle_kernel_info(handle_, index, &info));
    std::vector<int32_t> ranks(info.num_outputs);
    std::vector<int64_t> sizes(ranks.size() * LIGER_MAX_RANK);
    check(liger_bundle_output_shapes(handle_, index, inputs.data(),
                                     static_cast<int32_t>(inputs.size()),
                                     ranks.data(), sizes.data()));
    std::vector<std::vector<int64_t>> shapes;
    for (size_t i = 0; i < ranks.size(); ++i)
      shapes.emplace_back(sizes.begin() + i * LIGER_MAX_RANK,
                          sizes.begin() + i * LIGER_MAX_RANK + ranks[i]);
    return shapes;
  }

  /// Throws naming the first kernel `device` cannot run, and why.
  void checkDevice(int32_t device) {
    check(liger_bundle_check_device(handle_, device));
  }

private:
  liger_bundle *handle_ = nullptr;
};

} // namespace liger::abi

#endif // LIGER_RUNTIME_LIGER_RUNTIME_HPP
