//===- LaunchBench.cpp - the CPU cost of a launch, against a stand-in -----===//
//
// Times the runtime's per-launch path (argument checks, descriptor packing,
// the context and function lookups, cuLaunchKernel) against the stand-in
// driver, which does nothing, so that what is measured is the runtime's own
// work; an add+RMSNorm kernel of 3 inputs and 2 outputs, as the LibTorch
// adapter calls it. Not a test: run it by hand (docs/Design/Kernel-ABI.md
// has the numbers), or under `valgrind --tool=callgrind` for instruction
// counts, which do not depend on the machine's load:
//
//   LIGER_LIBCUDA=build/lib/libliger_fake_cuda.so \
//     build/bin/liger-launch-bench [launches] [handle|name|c]
//
//===----------------------------------------------------------------------===//

#include "TestBundle.h"
#include "TestManifests.h"
#include "liger/Runtime/Bundle.h"
#include "liger/Runtime/liger_runtime.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

using namespace liger::runtime;
using liger::runtime::testing::moduleManifest;
using liger::runtime::testing::rowwiseKernel;
using liger::runtime::testing::writeTestBundle;

namespace {
Manifest addRMSNorm() {
  return moduleManifest(
      "sm_90a",
      {rowwiseKernel(
          "layer_rowwise_0", "liger.add_rms_norm",
          {{"input0", ParamRole::Input, ParamKind::Rows, DType::bf16, 4096, 0},
           {"input1", ParamRole::Input, ParamKind::Rows, DType::bf16, 4096, 0},
           {"input2", ParamRole::Input, ParamKind::Feature, DType::bf16, 4096,
            0},
           {"output0", ParamRole::Output, ParamKind::Rows, DType::bf16, 4096,
            0},
           {"output1", ParamRole::Output, ParamKind::Rows, DType::bf16, 4096,
            0}})});
}

int fail(const std::string &what) {
  std::fprintf(stderr, "liger-launch-bench: %s\n", what.c_str());
  return 1;
}
} // namespace

int main(int argc, char **argv) {
  long n = argc > 1 ? std::atol(argv[1]) : 1000000;
  std::string mode = argc > 2 ? argv[2] : "handle";
  char pattern[] = "/tmp/liger-launch-bench-XXXXXX";
  if (!mkdtemp(pattern))
    return fail("cannot make a temporary directory");
  std::string dir = pattern, text;
  Status s = writeManifest(addRMSNorm(), dir, &text);
  if (!s.isOk())
    return fail(s.message());
  writeTestBundle(dir, text);
  liger_bundle *bundle = nullptr;
  if (liger_bundle_open(dir.c_str(), &bundle) != LIGER_OK)
    return fail(liger_last_error());
  std::unique_ptr<Bundle> b;
  if (!(s = Bundle::open(dir, &b)).isOk())
    return fail(s.message());
  // As under PyTorch, the device's primary context is current.
  const CudaDriver *driver = nullptr;
  CUcontext context = nullptr;
  if (!(s = CudaDriver::get(&driver)).isOk())
    return fail(s.message() + " (set LIGER_LIBCUDA to the stand-in driver)");
  if (driver->cuDevicePrimaryCtxRetain(&context, 0) != kCudaSuccess ||
      driver->cuCtxSetCurrent(context) != kCudaSuccess)
    return fail("cannot make device 0's primary context current");
  enum {
    ByHandle,
    ByName,
    ByC
  } how = mode == "c"      ? ByC
          : mode == "name" ? ByName
                           : ByHandle;

  alignas(16) static char buf[64];
  const int64_t rows[] = {4, 512, 4096}, feature[] = {4096};
  liger_tensor c[] = {{buf, LIGER_BF16, 3, rows},
                      {buf, LIGER_BF16, 3, rows},
                      {buf, LIGER_BF16, 1, feature},
                      {buf, LIGER_BF16, 3, rows},
                      {buf, LIGER_BF16, 3, rows}};
  int32_t handle = liger_bundle_kernel_index(bundle, "layer_rowwise_0");
  std::string name = "layer_rowwise_0";
  auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < n; ++i) {
    if (how == ByC) {
      // The C ABI by handle: its tensors converted on every call.
      if (liger_bundle_launch_kernel(bundle, handle, c, 5, nullptr, 0) !=
          LIGER_OK)
        return fail(liger_last_error());
      continue;
    }
    if (how == ByName) {
      // By name, with the arguments built per call in vectors.
      std::vector<TensorArg> args = {{buf, DType::bf16, {4, 512, 4096}},
                                     {buf, DType::bf16, {4, 512, 4096}},
                                     {buf, DType::bf16, {4096}},
                                     {buf, DType::bf16, {4, 512, 4096}},
                                     {buf, DType::bf16, {4, 512, 4096}}};
      if (!(s = b->launch(name, args, nullptr, 0)).isOk())
        return fail(s.message());
      continue;
    }
    // By handle, the arguments on the stack: what the LibTorch adapter does.
    TensorArg args[] = {{buf, DType::bf16, {4, 512, 4096}},
                        {buf, DType::bf16, {4, 512, 4096}},
                        {buf, DType::bf16, {4096}},
                        {buf, DType::bf16, {4, 512, 4096}},
                        {buf, DType::bf16, {4, 512, 4096}}};
    if (!(s = b->launch(static_cast<size_t>(handle), args, 5, nullptr, 0))
             .isOk())
      return fail(s.message());
  }
  auto t1 = std::chrono::steady_clock::now();
  std::printf("liger-launch-bench: %ld launches by %s: %.1f ns per launch\n", n,
              mode.c_str(),
              std::chrono::duration<double, std::nano>(t1 - t0).count() /
                  static_cast<double>(n ? n : 1));
  liger_bundle_close(bundle);
  std::remove((dir + "/manifest.json").c_str());
  std::remove((dir + "/k.cubin").c_str());
  std::remove(dir.c_str());
  return 0;
}
