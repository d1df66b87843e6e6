//===- FakeDriverTest.cpp - where a launch runs, without a GPU ------------===//
//
// The runtime against a stand-in CUDA driver (FakeCuda.c, through
// LIGER_LIBCUDA; its own executable, since the driver loads once per
// process): a kernel runs in its device's context whatever context is
// current, loads its module once per context, and leaves the caller's
// context current; a bundle is compared with a device (arch, shared
// memory) before its first launch there; a launch passes the grid,
// block, shared memory, memref descriptors and tensor maps of the kernel
// ABI; and every workspace is zero-filled before the kernel runs.
//
//===----------------------------------------------------------------------===//

#include "BundleDir.h"
#include "TestManifests.h"
#include "liger/Runtime/Bundle.h"
#include "liger/Runtime/CudaDriver.h"

#include <cstdlib>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <memory>
#include <string>

using namespace liger::runtime;
using liger::runtime::testing::moduleManifest;
using liger::runtime::testing::rowwiseKernel;

namespace {

/// One kernel of each launch shape: rows, a weight gradient with its
/// workspace and finishing kernel, a matmul with tensor maps.
Manifest kernels(const std::string &arch) {
  KernelSpec rows = rowwiseKernel(
      "scale", "liger.mul",
      {{"input0", ParamRole::Input, ParamKind::Rows, DType::bf16, 64, 0},
       {"input1", ParamRole::Input, ParamKind::Feature, DType::bf16, 64, 0},
       {"output0", ParamRole::Output, ParamKind::RowScalars, DType::f32, 0,
        0}});
  KernelSpec grad = rows;
  grad.name = "grad";
  grad.grid[0] = {GridDim::Ctas, 1};
  grad.ctasPerSm = 2;
  grad.finish = {"grad_finish", 5, {128, 1, 1}, 512};
  grad.params = {
      {"input0", ParamRole::Input, ParamKind::Rows, DType::bf16, 64, 0},
      {"output0", ParamRole::Output, ParamKind::Feature, DType::bf16, 64, 0},
      {"workspace0", ParamRole::Workspace, ParamKind::Partials, DType::f32, 64,
       0}};
  KernelSpec proj = rows;
  proj.name = "proj";
  proj.kernelTemplate = KernelTemplate::Matmul;
  proj.grid[0] = {GridDim::Const, 4};
  proj.grid[1] = {GridDim::Rows, 128};
  proj.block[0] = 384;
  proj.dynamicSharedMemoryBytes = 200000;
  proj.params = {
      {"input0", ParamRole::Input, ParamKind::Rows, DType::bf16, 64, 0},
      {"input1", ParamRole::Input, ParamKind::Matrix, DType::bf16, 64, 512},
      {"output0", ParamRole::Output, ParamKind::Rows, DType::bf16, 512, 0}};
  proj.tensorMaps = {{0, 128, 64, TensorMapSwizzle::B128, true},
                     {1, 256, 64, TensorMapSwizzle::B128, true}};
  return moduleManifest(arch, {rows, grad, proj});
}

class FakeDriverTest : public liger::runtime::testing::BundleDirTest {
protected:
  void SetUp() override {
    ASSERT_TRUE(CudaDriver::get(&driver).isOk())
        << "LIGER_LIBCUDA should name the fake driver";
    void *fake = dlopen(std::getenv("LIGER_LIBCUDA"), RTLD_NOW | RTLD_NOLOAD);
    ASSERT_NE(fake, nullptr);
    log = reinterpret_cast<const char *(*)()>(dlsym(fake, "fakeCudaLog"));
    reset = reinterpret_cast<void (*)()>(dlsym(fake, "fakeCudaReset"));
    capture = reinterpret_cast<void (*)(int)>(dlsym(fake, "fakeCudaCapture"));
    lastLaunch = reinterpret_cast<const unsigned *(*)()>(
        dlsym(fake, "fakeCudaLastLaunch"));
    lastWords = reinterpret_cast<const long long *(*)()>(
        dlsym(fake, "fakeCudaLastWords"));
    lastMap = reinterpret_cast<const long long *(*)()>(
        dlsym(fake, "fakeCudaLastTensorMap"));
    memsetsOf = reinterpret_cast<const long long(*(*)(int *))[4]>(
        dlsym(fake, "fakeCudaMemsets"));
    ASSERT_TRUE(log && reset && capture && lastLaunch && lastWords && lastMap &&
                memsetsOf);
    reset();
    BundleDirTest::SetUp();
    ASSERT_TRUE(reopen(kernels("sm_90a")).isOk());
  }
  void TearDown() override {
    bundle.reset();
    BundleDirTest::TearDown();
  }
  Status launchOn(int device) {
    alignas(16) static char buf[2 * 64 * 2];
    return bundle->launch("scale",
                          {{buf, DType::bf16, {2, 64}},
                           {buf, DType::bf16, {64}},
                           {buf, DType::f32, {2}}},
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

  /// Writes `manifest` as the bundle's, with a cubin whose kernels have
  /// `staticSharedBytes` of static shared memory, and opens it.
  Status reopen(const Manifest &manifest, uint64_t staticSharedBytes = 0) {
    std::string text;
    LIGER_RETURN_IF_ERROR(writeManifest(manifest, "test", &text));
    return openWith(text, &bundle, {}, staticSharedBytes);
  }
  /// The launch's grid, block and shared memory.
  std::vector<unsigned> launched() {
    return std::vector<unsigned>(lastLaunch(), lastLaunch() + 7);
  }
  std::vector<long long> words(int n) {
    return std::vector<long long>(lastWords(), lastWords() + n);
  }
  /// The memsets since the last reset: {pointer, value, count, stream}
  /// each (the stand-in keeps the first 8).
  std::vector<std::vector<long long>> memsets() {
    int n = 0;
    const long long(*m)[4] = memsetsOf(&n);
    std::vector<std::vector<long long>> all;
    for (int i = 0; i < n && i < 8; ++i)
      all.push_back({m[i][0], m[i][1], m[i][2], m[i][3]});
    return all;
  }

  const CudaDriver *driver = nullptr;
  const char *(*log)() = nullptr;
  void (*reset)() = nullptr;
  void (*capture)(int) = nullptr;
  const unsigned *(*lastLaunch)() = nullptr;
  const long long *(*lastWords)() = nullptr;
  const long long *(*lastMap)() = nullptr;
  const long long (*(*memsetsOf)(int *))[4] = nullptr;
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

TEST_F(FakeDriverTest, AnArchSpecificBundleRunsOnItsGpuOnly) {
  ASSERT_TRUE(reopen(kernels("sm_90a")).isOk());
  EXPECT_TRUE(bundle->checkDevice(0).isOk());
  Status s = bundle->checkDevice(2);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            dir + ": kernel 'scale' of module 'liger_kernels' is compiled for "
                  "sm_90a, but device 2 has compute capability 8.0 (sm_90a "
                  "runs on 9.0 only); rebuild the bundle for this GPU "
                  "(liger-compile --target)");
  // A launch there fails the same way, before any module loads.
  ASSERT_EQ(driver->cuCtxSetCurrent(nullptr), kCudaSuccess);
  alignas(16) static char buf[4096];
  Status l = bundle->launch("scale",
                            {{buf, DType::bf16, {2, 64}},
                             {buf, DType::bf16, {64}},
                             {buf, DType::f32, {2}}},
                            nullptr, 2);
  EXPECT_EQ(l.message(), s.message());
  EXPECT_STREQ(log(), "");
}

TEST_F(FakeDriverTest, AnSm80BundleRunsOnEvery8x) {
  Manifest m = kernels("sm_80");
  m.modules[0].kernels.pop_back(); // the matmul's shared memory: below
  ASSERT_TRUE(reopen(m).isOk());
  EXPECT_TRUE(bundle->checkDevice(2).isOk());
  EXPECT_TRUE(bundle->checkDevice(3).isOk());
  EXPECT_EQ(bundle->checkDevice(0).message(),
            dir + ": kernel 'scale' of module 'liger_kernels' is compiled for "
                  "sm_80, but device 0 has compute capability 9.0 (sm_80 runs "
                  "on 8.0 to 8.x); rebuild the bundle for this GPU "
                  "(liger-compile --target)");
  m.modules[0].arch = "sm_86";
  ASSERT_TRUE(reopen(m).isOk());
  EXPECT_TRUE(bundle->checkDevice(3).isOk());
  EXPECT_EQ(bundle->checkDevice(2).message(),
            dir + ": kernel 'scale' of module 'liger_kernels' is compiled for "
                  "sm_86, but device 2 has compute capability 8.0 (sm_86 runs "
                  "on 8.6 to 8.x); rebuild the bundle for this GPU "
                  "(liger-compile --target)");
}

TEST_F(FakeDriverTest, SharedMemoryMustFitTheDevice) {
  Manifest m = kernels("sm_80");
  ASSERT_TRUE(reopen(m).isOk());
  Status s = bundle->checkDevice(2); // 166912 bytes per block at most
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            dir + ": kernel 'proj' needs 200000 bytes of shared memory per "
                  "block (200000 dynamic and 0 static), but device 2 allows "
                  "at most 166912; rebuild the bundle for this GPU "
                  "(liger-compile --target)");
  m.modules[0].kernels.pop_back();
  m.modules[0].kernels[1].finish.dynamicSharedMemoryBytes = 120000;
  ASSERT_TRUE(reopen(m).isOk());
  EXPECT_TRUE(bundle->checkDevice(2).isOk());
  EXPECT_EQ(bundle->checkDevice(3).message(),
            dir + ": kernel 'grad_finish' needs 120000 bytes of shared "
                  "memory per block (120000 dynamic and 0 static), but device "
                  "3 allows at most 101376; rebuild the bundle for this GPU "
                  "(liger-compile --target)");
}

// The static shared memory the cubin records counts too (ptxas gives each
// sm_90 kernel 1 KiB).
TEST_F(FakeDriverTest, StaticSharedMemoryCounts) {
  Manifest m = kernels("sm_80");
  m.modules[0].kernels[2].dynamicSharedMemoryBytes = 166912 - 512;
  ASSERT_TRUE(reopen(m).isOk());
  EXPECT_TRUE(bundle->checkDevice(2).isOk());
  ASSERT_TRUE(reopen(m, 1024).isOk());
  EXPECT_EQ(bundle->checkDevice(2).message(),
            dir + ": kernel 'proj' needs 167424 bytes of shared memory per "
                  "block (166400 dynamic and 1024 static), but device 2 "
                  "allows at most 166912; rebuild the bundle for this GPU "
                  "(liger-compile --target)");
}

TEST_F(FakeDriverTest, ALaunchPassesTheKernelAbi) {
  ASSERT_TRUE(reopen(kernels("sm_90a")).isOk());
  ASSERT_EQ(driver->cuCtxSetCurrent(primary(0)), kCudaSuccess);
  alignas(16) static char buf[4096];
  auto ptr = static_cast<long long>(reinterpret_cast<intptr_t>(buf));
  capture(15);
  std::vector<TensorArg> args = {{buf, DType::bf16, {2, 3, 64}},
                                 {buf, DType::bf16, {64}},
                                 {buf, DType::f32, {2, 3}}};
  ASSERT_TRUE(bundle
                  ->launch(bundle->kernelIndex("scale"), args.data(),
                           args.size(), nullptr, 0)
                  .isOk());
  EXPECT_EQ(launched(), (std::vector<unsigned>{6, 1, 1, 256, 1, 1, 36}));
  EXPECT_EQ(words(15), (std::vector<long long>{ptr, ptr, 0, 6, 64, 64, 1, ptr,
                                               ptr, 0, 64, 1, ptr, ptr, 0}));

  // Workspaces: the kernel on `ctas` CTAs, then its finishing kernel.
  reset(); // clears the context stack too
  ASSERT_EQ(driver->cuCtxSetCurrent(primary(0)), kCudaSuccess);
  capture(19);
  args = {{buf, DType::bf16, {7, 64}},
          {buf, DType::bf16, {64}},
          {buf, DType::f32, {3, 64}}};
  ASSERT_TRUE(bundle->launch("grad", args, nullptr, 0).isOk());
  // The module is loaded; the workspace is zero-filled first.
  EXPECT_STREQ(log(), "memset 0;launch 0;launch 0;");
  EXPECT_EQ(launched(), (std::vector<unsigned>{5, 1, 1, 128, 1, 1, 512}));
  EXPECT_EQ(words(19),
            (std::vector<long long>{ptr, ptr, 0, 7, 64, 64, 1, ptr, ptr, 0, 64,
                                    1, ptr, ptr, 0, 3, 64, 64, 1}));

  // A matmul: a tile grid, and a TMA descriptor per tensor map after the
  // memrefs, of the rows' actual count.
  reset();
  args = {{buf, DType::bf16, {300, 64}},
          {buf, DType::bf16, {512, 64}},
          {buf, DType::bf16, {300, 512}}};
  ASSERT_TRUE(bundle->launch("proj", args, nullptr, 0).isOk());
  EXPECT_EQ(launched(), (std::vector<unsigned>{4, 3, 1, 384, 1, 1, 200000}));
  // The last map: input1, [512, 64] in 256 x 64 boxes, innermost first.
  EXPECT_EQ(std::vector<long long>(lastMap(), lastMap() + 8),
            (std::vector<long long>{2, 64, 512, 0, 64, 256, 0, 3}));
}

// A tensor map of a [batch, heads, seq, D] tensor is 3-D, [batch * heads,
// seq, D] in [1, rows, cols] boxes, so that no box reaches from one head
// into the next; an empty batch or sequence launches nothing (no map).
TEST_F(FakeDriverTest, AHeadsTensorMapHasOneSequencePerHead) {
  KernelSpec attn = rowwiseKernel(
      "attn", "liger.attention",
      {{"input0", ParamRole::Input, ParamKind::Heads, DType::bf16, 128, 8},
       {"output0", ParamRole::Output, ParamKind::Heads, DType::bf16, 128, 8}});
  attn.kernelTemplate = KernelTemplate::Attention;
  attn.grid[0] = {GridDim::Rows, 128};
  attn.tensorMaps = {{0, 128, 64, TensorMapSwizzle::B128, true}};
  ASSERT_TRUE(reopen(moduleManifest("sm_90a", {attn})).isOk());
  ASSERT_EQ(driver->cuCtxSetCurrent(primary(0)), kCudaSuccess);
  alignas(16) static char buf[4096];
  Shape shape = {2, 8, 77, 128};
  ASSERT_TRUE(
      bundle
          ->launch("attn",
                   {{buf, DType::bf16, shape}, {buf, DType::bf16, shape}},
                   nullptr, 0)
          .isOk());
  EXPECT_EQ(launched()[0], 2u); // 2 x 77 tokens in 128-row tiles
  // Innermost first: D in 64-column boxes, 128 positions of the sequence
  // (77 in bounds), one of the 16 (batch, head) pairs.
  EXPECT_EQ(std::vector<long long>(lastMap(), lastMap() + 8),
            (std::vector<long long>{3, 128, 77, 16, 64, 128, 1, 3}));
  reset();
  for (Shape empty : {Shape{0, 8, 77, 128}, Shape{2, 8, 0, 128}})
    EXPECT_TRUE(
        bundle
            ->launch("attn",
                     {{buf, DType::bf16, empty}, {buf, DType::bf16, empty}},
                     nullptr, 0)
            .isOk())
        << shapeString(empty);
  EXPECT_STREQ(log(), "");
}

TEST_F(FakeDriverTest, APersistentKernelHasOneCtaPerSmOfItsDevice) {
  Manifest m = kernels("sm_90a");
  KernelSpec &proj = m.modules.at(0).kernels.at(2);
  proj.grid[0] = {GridDim::Sms, 1};
  proj.grid[1] = {};
  ASSERT_TRUE(reopen(m).isOk());
  alignas(16) static char buf[4096];
  std::vector<TensorArg> args = {{buf, DType::bf16, {300, 64}},
                                 {buf, DType::bf16, {512, 64}},
                                 {buf, DType::bf16, {300, 512}}};
  // Devices 0 and 1 (both sm_90) have 132 and 114 SMs; the rows do not
  // change the grid.
  for (auto [device, sms] : {std::pair{0, 132u}, {1, 114u}, {0, 132u}}) {
    ASSERT_TRUE(bundle->launch("proj", args, nullptr, device).isOk());
    EXPECT_EQ(launched(), (std::vector<unsigned>{sms, 1, 1, 384, 1, 1, 200000}))
        << "device " << device;
  }
  args[0].shape = {1, 64};
  args[2].shape = {1, 512};
  ASSERT_TRUE(bundle->launch("proj", args, nullptr, 1).isOk());
  EXPECT_EQ(launched()[0], 114u);
}

// A matmul kernel's narrow-tile variant runs where its grid fills the
// device better (chooseNarrow), with its own grid, block, shared memory and
// TMA boxes; elsewhere the kernel runs.
TEST_F(FakeDriverTest, ANarrowVariantRunsWhereItFillsTheDevice) {
  Manifest m = kernels("sm_90a");
  KernelSpec &proj = m.modules.at(0).kernels.at(2);
  proj.narrow.name = "proj_narrow";
  proj.narrow.grid[0] = {GridDim::Const, 4};
  proj.narrow.grid[1] = {GridDim::Rows, 64};
  proj.narrow.block[0] = 256;
  proj.narrow.dynamicSharedMemoryBytes = 150000;
  proj.narrow.tensorMaps = {{0, 64, 64, TensorMapSwizzle::B128, true},
                            {1, 128, 64, TensorMapSwizzle::B128, true}};
  ASSERT_TRUE(reopen(m).isOk());
  alignas(16) static char buf[4096];
  auto launch = [&](int64_t rows, int device) {
    std::vector<TensorArg> args = {{buf, DType::bf16, {rows, 64}},
                                   {buf, DType::bf16, {512, 64}},
                                   {buf, DType::bf16, {rows, 512}}};
    Status s = bundle->launch("proj", args, nullptr, device);
    EXPECT_TRUE(s.isOk()) << s.toString();
    return launched();
  };
  // 300 rows: 12 CTAs of 128 rows or 20 of 64 on 132 SMs, one wave each.
  EXPECT_EQ(launch(300, 0),
            (std::vector<unsigned>{4, 5, 1, 256, 1, 1, 150000}));
  // The narrow variant's boxes: the last map is input1's, 128 x 64.
  EXPECT_EQ(std::vector<long long>(lastMap(), lastMap() + 8),
            (std::vector<long long>{2, 64, 512, 0, 64, 128, 0, 3}));
  // 4096 rows: 128 CTAs (one wave) against 256 (two): the kernel.
  EXPECT_EQ(launch(4096, 0),
            (std::vector<unsigned>{4, 32, 1, 384, 1, 1, 200000}));
  EXPECT_EQ(std::vector<long long>(lastMap(), lastMap() + 8),
            (std::vector<long long>{2, 64, 512, 0, 64, 256, 0, 3}));
  // One row tile either way: the kernel.
  EXPECT_EQ(launch(64, 0)[3], 384u);
  // The device's SMs count: 1920 rows are 60 CTAs against 120, which fit
  // one wave of 132 SMs (the narrow tile) but not of 114 (the kernel).
  EXPECT_EQ(launch(1920, 0)[3], 256u);
  EXPECT_EQ(launch(1920, 1)[3], 384u);
}

TEST_F(FakeDriverTest, ZeroRowsLaunchNothingButAFinishingKernel) {
  ASSERT_TRUE(reopen(kernels("sm_90a")).isOk());
  ASSERT_EQ(driver->cuCtxSetCurrent(primary(0)), kCudaSuccess);
  alignas(16) static char buf[4096];
  ASSERT_TRUE(bundle
                  ->launch("scale",
                           {{buf, DType::bf16, {0, 64}},
                            {buf, DType::bf16, {64}},
                            {buf, DType::f32, {0}}},
                           nullptr, 0)
                  .isOk());
  EXPECT_STREQ(log(), "");
  ASSERT_TRUE(bundle
                  ->launch("grad",
                           {{buf, DType::bf16, {0, 64}},
                            {buf, DType::bf16, {64}},
                            {buf, DType::f32, {1, 64}}},
                           nullptr, 0)
                  .isOk());
  EXPECT_STREQ(log(), "load 0;memset 0;launch 0;launch 0;");
}

// Every workspace, partials and heads alike, is zero-filled on the
// launch's stream before the kernel runs: the attention backward
// accumulates dq into a heads workspace with f32 atomics. A launch
// without workspaces sets no memory.
TEST_F(FakeDriverTest, WorkspacesAreZeroFilledBeforeTheKernel) {
  KernelSpec bwd = rowwiseKernel(
      "attn_bwd", "liger.attention_grad",
      {{"input0", ParamRole::Input, ParamKind::Heads, DType::bf16, 64, 8},
       {"input1", ParamRole::Input, ParamKind::HeadScalars, DType::f32, 0, 8},
       {"output0", ParamRole::Output, ParamKind::Heads, DType::bf16, 64, 8},
       {"workspace0", ParamRole::Workspace, ParamKind::Heads, DType::f32, 64,
        8}});
  bwd.kernelTemplate = KernelTemplate::Attention;
  bwd.grid[0] = {GridDim::Sms, 1};
  bwd.ctasPerSm = 1;
  bwd.finish = {"attn_bwd_finish", 64, {256, 1, 1}, 0};
  // Rows and row_scalars workspaces (a LoRA projection's x · Aᵀ and its
  // flags), with no finishing kernel.
  KernelSpec lora = rowwiseKernel(
      "lora", "liger.lora_linear",
      {{"input0", ParamRole::Input, ParamKind::Rows, DType::bf16, 64, 0},
       {"output0", ParamRole::Output, ParamKind::Rows, DType::bf16, 64, 0},
       {"workspace0", ParamRole::Workspace, ParamKind::Rows, DType::f32, 16,
        0},
       {"workspace1", ParamRole::Workspace, ParamKind::RowScalars,
        DType::f32, 0, 0}});
  Manifest m = kernels("sm_90a");
  m.modules[0].kernels.push_back(bwd);
  m.modules[0].kernels.push_back(lora);
  ASSERT_TRUE(reopen(m).isOk());
  ASSERT_EQ(driver->cuCtxSetCurrent(primary(0)), kCudaSuccess);
  alignas(16) static char q[64], lse[64], dq[64], acc[64];
  auto at = [](const char *p) {
    return static_cast<long long>(reinterpret_cast<intptr_t>(p));
  };
  auto stream = reinterpret_cast<CUstream>(uintptr_t{0x5000});
  capture(42);
  ASSERT_TRUE(bundle
                  ->launch("attn_bwd",
                           {{q, DType::bf16, {2, 8, 77, 64}},
                            {lse, DType::f32, {2, 8, 77}},
                            {dq, DType::bf16, {2, 8, 77, 64}},
                            {acc, DType::f32, {2, 8, 77, 64}}},
                           stream, 0)
                  .isOk());
  EXPECT_STREQ(log(), "load 0;memset 0;launch 0;launch 0;");
  EXPECT_EQ(memsets(), (std::vector<std::vector<long long>>{
                           {at(acc), 0, 2 * 8 * 77 * 64, 0x5000}}));
  // The head scalars are a rank-3 memref after q's rank-4 one.
  std::vector<long long> w = words(42);
  EXPECT_EQ(
      std::vector<long long>(w.begin() + 11, w.begin() + 20),
      (std::vector<long long>{at(lse), at(lse), 0, 2, 8, 77, 616, 77, 1}));
  EXPECT_EQ(std::vector<long long>(w.begin() + 31, w.begin() + 34),
            (std::vector<long long>{at(acc), at(acc), 0}));

  // A partials workspace: [ctas, H] words.
  reset();
  ASSERT_EQ(driver->cuCtxSetCurrent(primary(0)), kCudaSuccess);
  ASSERT_TRUE(bundle
                  ->launch("grad",
                           {{q, DType::bf16, {7, 64}},
                            {dq, DType::bf16, {64}},
                            {acc, DType::f32, {3, 64}}},
                           stream, 0)
                  .isOk());
  EXPECT_STREQ(log(), "memset 0;launch 0;launch 0;");
  EXPECT_EQ(memsets(), (std::vector<std::vector<long long>>{
                           {at(acc), 0, 3 * 64, 0x5000}}));

  // Rows workspaces: zero-filled, then the kernel alone; with no rows,
  // nothing at all.
  alignas(16) static char t[64], flags[64];
  auto launchLora = [&](int64_t rows) {
    reset();
    EXPECT_EQ(driver->cuCtxSetCurrent(primary(0)), kCudaSuccess);
    return bundle
        ->launch("lora",
                 {{q, DType::bf16, {rows, 64}},
                  {dq, DType::bf16, {rows, 64}},
                  {t, DType::f32, {rows, 16}},
                  {flags, DType::f32, {rows}}},
                 stream, 0)
        .isOk();
  };
  ASSERT_TRUE(launchLora(7));
  EXPECT_STREQ(log(), "memset 0;memset 0;launch 0;");
  EXPECT_EQ(memsets(), (std::vector<std::vector<long long>>{
                           {at(t), 0, 7 * 16, 0x5000},
                           {at(flags), 0, 7, 0x5000}}));
  ASSERT_TRUE(launchLora(0));
  EXPECT_STREQ(log(), "");

  // No workspace, no memset.
  reset();
  ASSERT_EQ(driver->cuCtxSetCurrent(primary(0)), kCudaSuccess);
  ASSERT_TRUE(launchOn(0).isOk());
  EXPECT_STREQ(log(), "launch 0;");
  EXPECT_TRUE(memsets().empty());
}

} // namespace
