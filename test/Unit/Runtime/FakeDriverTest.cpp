//===- FakeDriverTest.cpp - where a launch runs, without a GPU ------------===//
//
// The runtime against a stand-in CUDA driver (FakeCuda.c, through
// LIGER_LIBCUDA; its own executable, since the driver loads once per
// process): a kernel runs in its device's context whatever context is
// current, loads its module once per context, and leaves the caller's
// context current.
//
//===----------------------------------------------------------------------===//

#include "BundleDir.h"
#include "liger/Runtime/Bundle.h"
#include "liger/Runtime/CudaDriver.h"

#include <cstdlib>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <memory>
#include <string>

using namespace liger::runtime;

namespace {

const char *kManifest = R"({
  "format": "liger-bundle", "version": 1, "source": "t.mlir",
  "modules": [{"name": "liger_kernels", "arch": "sm_90a",
    "cubin": "k.cubin", "ptx": "k.ptx",
    "kernels": [{"name": "scale", "template": "rowwise", "ops": "liger.mul",
      "abi": "memref-descriptor", "grid": ["rows", 1, 1], "block": [256, 1, 1],
      "dynamic_shared_memory_bytes": 0, "vector_width": 8, "alignment_bytes": 16,
      "params": [
        {"name": "input0", "role": "input", "kind": "rows", "dtype": "bf16", "shape": ["rows", 64]},
        {"name": "output0", "role": "output", "kind": "rows", "dtype": "bf16", "shape": ["rows", 64]}
      ]}]}]})";

class FakeDriverTest : public liger::runtime::testing::BundleDirTest {
protected:
  void SetUp() override {
    ASSERT_TRUE(CudaDriver::get(&driver).isOk())
        << "LIGER_LIBCUDA should name the fake driver";
    void *fake = dlopen(std::getenv("LIGER_LIBCUDA"), RTLD_NOW | RTLD_NOLOAD);
    ASSERT_NE(fake, nullptr);
    log = reinterpret_cast<const char *(*)()>(dlsym(fake, "fakeCudaLog"));
    reset = reinterpret_cast<void (*)()>(dlsym(fake, "fakeCudaReset"));
    ASSERT_TRUE(log && reset);
    reset();
    BundleDirTest::SetUp();
    ASSERT_TRUE(openWith(kManifest, &bundle).isOk());
  }
  void TearDown() override {
    bundle.reset();
    BundleDirTest::TearDown();
  }
  Status launchOn(int device) {
    alignas(16) static char buf[2 * 64 * 2];
    return bundle->launch(
        "scale", {{buf, DType::bf16, {2, 64}}, {buf, DType::bf16, {2, 64}}},
        nullptr, device);
  }
  CUcontext primary(int device) {
    CUcontext c = nullptr;
    EXPECT_EQ(driver->cuDevicePrimaryCtxRetain(&c, device), kCudaSuccess);
    return c;
  }
  CUcontext current() {
    CUcontext c = nullptr;
    EXPECT_EQ(driver->cuCtxGetCurrent(&c), kCudaSuccess);
    return c;
  }

  const CudaDriver *driver = nullptr;
  const char *(*log)() = nullptr;
  void (*reset)() = nullptr;
  std::unique_ptr<Bundle> bundle;
};

TEST_F(FakeDriverTest, RunsInTheCurrentContextWhenItIsTheDevices) {
  ASSERT_EQ(driver->cuCtxSetCurrent(primary(0)), kCudaSuccess);
  ASSERT_TRUE(launchOn(0).isOk());
  ASSERT_TRUE(launchOn(0).isOk());
  EXPECT_STREQ(log(), "load 0;launch 0;launch 0;"); // one load per context
  EXPECT_EQ(current(), primary(0));
}

TEST_F(FakeDriverTest, PushesTheDevicesContextWhenAnotherIsCurrent) {
  ASSERT_EQ(driver->cuCtxSetCurrent(primary(0)), kCudaSuccess);
  ASSERT_TRUE(launchOn(1).isOk());
  ASSERT_TRUE(launchOn(0).isOk());
  ASSERT_TRUE(launchOn(1).isOk());
  // Device 1's kernel loads and runs in device 1's context, then device 0's
  // (current) is back; each context loads the module once.
  EXPECT_STREQ(
      log(),
      "push 1;load 1;launch 1;pop 1;load 0;launch 0;push 1;launch 1;pop 1;");
  EXPECT_EQ(current(), primary(0));
}

TEST_F(FakeDriverTest, UsesThePrimaryContextWhenNoneIsCurrent) {
  ASSERT_EQ(driver->cuCtxSetCurrent(nullptr), kCudaSuccess);
  ASSERT_TRUE(launchOn(1).isOk());
  EXPECT_STREQ(log(), "push 1;load 1;launch 1;pop 1;");
  EXPECT_EQ(current(), nullptr);
}

TEST_F(FakeDriverTest, AnUnknownDeviceIsAClearError) {
  Status s = launchOn(7);
  EXPECT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("cuDeviceGet"), std::string::npos) << s.message();
}

} // namespace
