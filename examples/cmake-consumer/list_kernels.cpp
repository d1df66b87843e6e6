//===- list_kernels.cpp - an installed liger::runtime, from outside -------===//
//
// `liger-list-kernels BUNDLE_DIR` opens a bundle through the runtime's C ABI
// (liger/Runtime/liger_runtime.h), prints each kernel with its template,
// target and parameters, and asks the runtime for the output shapes of the
// first kernel whose inputs are all rows of H: what a framework does
// before it allocates outputs. No GPU is needed: nothing is launched. A
// bundle the runtime refuses ends it with the runtime's message and exit
// status 1.
//
//===----------------------------------------------------------------------===//

#include "liger/Runtime/liger_runtime.h"
#include "liger/Version.h"

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

namespace {
void check(liger_status status) {
  if (status != LIGER_OK)
    throw std::runtime_error(liger_last_error());
}

const char *kindName(liger_param_kind kind) {
  switch (kind) {
  case LIGER_KIND_ROWS:
    return "rows";
  case LIGER_KIND_ROW_SCALARS:
    return "row scalars";
  case LIGER_KIND_FEATURE:
    return "feature";
  case LIGER_KIND_SCALAR:
    return "scalar";
  case LIGER_KIND_HEADS:
    return "heads";
  case LIGER_KIND_TABLES:
    return "tables";
  case LIGER_KIND_PARTIALS:
    return "partials";
  case LIGER_KIND_MATRIX:
    return "matrix";
  case LIGER_KIND_HEAD_SCALARS:
    return "head scalars";
  }
  return "?";
}

/// The output shapes of kernel `index` for `rows` rows, where every input
/// is rows of H or a vector of H (the rowwise kernels); false otherwise.
bool printOutputShapes(const liger_bundle *handle, int32_t index,
                       const liger_kernel_info &info, int64_t rows) {
  std::vector<std::vector<int64_t>> shapes;
  std::vector<liger_tensor> inputs;
  for (int32_t p = 0; p < info.num_inputs; ++p) {
    liger_param_info param;
    check(liger_bundle_param_info(handle, index, p, &param));
    if (param.kind == LIGER_KIND_ROWS)
      shapes.push_back({rows, param.length});
    else if (param.kind == LIGER_KIND_FEATURE)
      shapes.push_back({param.length});
    else
      return false;
    inputs.push_back({nullptr, param.dtype,
                      static_cast<int32_t>(shapes.back().size()), nullptr});
  }
  for (size_t i = 0; i < inputs.size(); ++i)
    inputs[i].shape = shapes[i].data();
  std::printf("  %s with %lld rows writes", info.name,
              static_cast<long long>(rows));
  std::vector<int32_t> ranks(info.num_outputs);
  std::vector<int64_t> sizes(ranks.size() * LIGER_MAX_RANK);
  check(liger_bundle_output_shapes(handle, index, inputs.data(),
                                   static_cast<int32_t>(inputs.size()),
                                   ranks.data(), sizes.data()));
  for (size_t o = 0; o < ranks.size(); ++o) {
    std::printf(" [");
    for (int32_t d = 0; d < ranks[o]; ++d)
      std::printf(d ? ", %lld" : "%lld",
                  static_cast<long long>(sizes[o * LIGER_MAX_RANK + d]));
    std::printf("]");
  }
  std::printf("\n");
  return true;
}
} // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: liger-list-kernels BUNDLE_DIR\n");
    return 2;
  }
  liger_bundle *handle = nullptr;
  try {
    check(liger_bundle_open(argv[1], &handle));
    std::printf("liger %s (runtime ABI %d): %s\n", LIGER_VERSION_STRING,
                liger_abi_version(), argv[1]);
    int32_t count = liger_bundle_kernel_count(handle);
    for (int32_t k = 0; k < count; ++k) {
      liger_kernel_info info;
      check(liger_bundle_kernel_info(handle, k, &info));
      std::printf("%s: %s for %s, %d inputs, %d outputs (%s)\n", info.name,
                  info.template_name, info.arch, info.num_inputs,
                  info.num_outputs, info.ops);
      for (int32_t p = 0; p < info.num_params; ++p) {
        liger_param_info param;
        check(liger_bundle_param_info(handle, k, p, &param));
        std::printf("  %s: %s, length %lld\n", param.name,
                    kindName(param.kind), static_cast<long long>(param.length));
      }
    }
    for (int32_t k = 0; k < count; ++k) {
      liger_kernel_info info;
      check(liger_bundle_kernel_info(handle, k, &info));
      if (printOutputShapes(handle, k, info, 3))
        break;
    }
  } catch (const std::exception &e) {
    std::fprintf(stderr, "liger-list-kernels: %s\n", e.what());
    liger_bundle_close(handle);
    return 1;
  }
  liger_bundle_close(handle);
  return 0;
}
