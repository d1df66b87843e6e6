//===- compile_and_list.cpp - an installed liger::compiler, from outside --===//
//
// `liger-compile-and-list MODULE.mlir BUNDLE_DIR [TARGET]` compiles a module
// in the liger dialect for TARGET (sm_90a by default) into a bundle with
// liger::compile (liger/Pipelines/Compile.h), then opens the bundle with
// the runtime's C ABI (liger/Runtime/liger_runtime.h) and lists its
// kernels: a framework that compiles its layers ahead of time and runs
// them. No GPU is needed: nothing is launched. A module or a target the
// compiler refuses ends it with the compiler's message (the parse error
// and its location, the targets it knows) and exit status 1.
//
//===----------------------------------------------------------------------===//

#include "liger/Pipelines/Compile.h"
#include "liger/Runtime/liger_runtime.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

int main(int argc, char **argv) {
  if (argc != 3 && argc != 4) {
    std::fprintf(stderr,
                 "usage: liger-compile-and-list MODULE.mlir BUNDLE_DIR [TARGET]\n");
    return 2;
  }
  std::ifstream in(argv[1]);
  if (!in) {
    std::fprintf(stderr, "liger-compile-and-list: cannot read %s\n", argv[1]);
    return 1;
  }
  std::stringstream text;
  text << in.rdbuf();

  liger::CompileOptions options;
  options.sourceName = argv[1];
  if (argc == 4)
    options.target = argv[3];
  liger::CompileResult result;
  std::string error;
  if (!liger::compile(text.str(), options, argv[2], result, error)) {
    std::fprintf(stderr, "liger-compile-and-list: %s%s", error.c_str(),
                 error.empty() || error.back() != '\n' ? "\n" : "");
    return 1;
  }
  std::printf("compiled %d kernels for %s into %s", result.numKernels,
              options.target.c_str(), argv[2]);
  // What was not compiled and why, as liger-compile says it.
  std::printf("%s\n", liger::describeNotCompiled(result).c_str());

  liger_bundle *handle = nullptr;
  if (liger_bundle_open(argv[2], &handle) != LIGER_OK) {
    std::fprintf(stderr, "liger-compile-and-list: %s\n", liger_last_error());
    return 1;
  }
  for (int32_t k = 0; k < liger_bundle_kernel_count(handle); ++k) {
    liger_kernel_info info;
    if (liger_bundle_kernel_info(handle, k, &info) != LIGER_OK) {
      std::fprintf(stderr, "liger-compile-and-list: %s\n", liger_last_error());
      liger_bundle_close(handle);
      return 1;
    }
    std::printf("%s: %s for %s (%s)\n", info.name, info.template_name,
                info.arch, info.ops);
  }
  liger_bundle_close(handle);
  return 0;
}
