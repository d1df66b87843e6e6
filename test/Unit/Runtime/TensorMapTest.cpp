//===- TensorMapTest.cpp - TMA descriptor checks --------------------------===//
//
// Every cuTensorMapEncodeTiled requirement that encodeTensorMap checks before
// calling the driver gets a message naming what is wrong; a valid spec
// passes, and encodes where a driver is present (a clear error where not).
// And the tensor and box a kernel's tensor map describes for its arguments
// (tensorMapGeometry), for each kind of parameter a map may name.
//
//===----------------------------------------------------------------------===//

#include "liger/Runtime/TensorMap.h"
#include "liger/Runtime/CudaDriver.h"

#include <gtest/gtest.h>
#include <utility>
#include <vector>

using namespace liger::runtime;

namespace {

alignas(64) char buffer[256];

/// A [4096, 4096] bf16 weight read in 64 x 64 tiles with 128-byte swizzle:
/// the matmul kernels' K-major operand.
TensorMapSpec valid() {
  TensorMapSpec spec;
  spec.globalAddress = buffer;
  spec.dtype = DType::bf16;
  spec.shape = {4096, 4096};
  spec.box = {64, 64};
  return spec;
}

void expectInvalid(const TensorMapSpec &spec, const std::string &message) {
  Status s = validateTensorMap(spec);
  ASSERT_FALSE(s.isOk()) << message;
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find(message), std::string::npos) << s.toString();
}

TEST(TensorMapTest, ValidSpecsPass) {
  EXPECT_TRUE(validateTensorMap(valid()).isOk());
  TensorMapSpec spec = valid();
  spec.strides = {4096 + 64, 1}; // padded rows
  EXPECT_TRUE(validateTensorMap(spec).isOk());
  spec = valid();
  spec.dtype = DType::f32;
  spec.shape = {7, 3, 1000}; // rank 3, odd sizes: the box may overhang
  spec.box = {1, 8, 32};
  spec.strides = {3 * 1024, 1024, 1};
  EXPECT_TRUE(validateTensorMap(spec).isOk());
}

TEST(TensorMapTest, EachRequirementSaysWhatIsWrong) {
  TensorMapSpec spec = valid();
  spec.shape = {};
  spec.box = {};
  expectInvalid(spec, "rank must be 1 to 5, got 0");
  spec = valid();
  spec.box = {64};
  expectInvalid(spec, "the box has 1 sizes for a rank-2 tensor");
  spec = valid();
  spec.globalAddress = buffer + 8;
  expectInvalid(spec, "16-byte aligned");
  spec = valid();
  spec.shape = {0, 4096};
  expectInvalid(spec, "dimension 0 has size 0");
  spec = valid();
  spec.box = {512, 64};
  expectInvalid(spec, "dimension 0 has box size 512");
  spec = valid();
  spec.strides = {4096, 2};
  expectInvalid(spec, "the innermost stride must be 1 element, got 2");
  spec = valid();
  spec.shape = {16, 1004};
  spec.box = {16, 64};
  expectInvalid(spec, "dimension 0 has a stride of 2008 bytes; strides must "
                      "be positive multiples of 16 bytes");
  spec = valid();
  spec.box = {64, 4};
  expectInvalid(spec, "the box's innermost size is 8 bytes");
  spec = valid();
  spec.box = {64, 128};
  expectInvalid(spec, "the box's innermost size (256 bytes) exceeds the "
                      "128-byte swizzle span");
  spec.swizzle = TensorMapSwizzle::None;
  EXPECT_TRUE(validateTensorMap(spec).isOk());
  spec = valid();
  spec.dtype = DType::i32;
  spec.box = {64, 32};
  spec.zeroFill = false;
  expectInvalid(spec, "NaN fill of out-of-bounds elements needs a "
                      "floating-point dtype, got i32");
}

/// The shape and box of the tensor map `map` of `kernel` for `args`.
std::pair<Shape, Shape> geometry(const KernelSpec &kernel,
                                 const KernelTensorMap &map,
                                 const std::vector<TensorArg> &args) {
  LaunchDims dims;
  Status s = checkArgs(kernel, args, &dims);
  EXPECT_TRUE(s.isOk()) << s.toString();
  std::pair<Shape, Shape> g;
  tensorMapGeometry(kernel.params[map.param], map, args[map.param], dims,
                    &g.first, &g.second);
  return g;
}

TEST(TensorMapTest, RowsAndMatricesAre2DHeadsOneSequencePerHead) {
  KernelSpec k;
  k.name = "k";
  k.params = {{"x", ParamRole::Input, ParamKind::Rows, DType::bf16, 64, 0},
              {"w", ParamRole::Input, ParamKind::Matrix, DType::bf16, 64, 512},
              {"y", ParamRole::Output, ParamKind::Rows, DType::bf16, 512, 0}};
  std::vector<TensorArg> args = {{buffer, DType::bf16, {3, 5, 64}},
                                 {buffer, DType::bf16, {512, 64}},
                                 {buffer, DType::bf16, {3, 5, 512}}};
  KernelTensorMap map{0, 128, 64, TensorMapSwizzle::B128, true};
  // A rows tensor's leading dimensions are its rows.
  EXPECT_EQ(geometry(k, map, args),
            (std::pair<Shape, Shape>{{15, 64}, {128, 64}}));
  map = {1, 256, 64, TensorMapSwizzle::B128, true};
  EXPECT_EQ(geometry(k, map, args),
            (std::pair<Shape, Shape>{{512, 64}, {256, 64}}));

  // [batch, heads, seq, D] is [batch * heads, seq, D], each box within
  // one (batch, head): rows 77 to 127 of a box are out of bounds.
  k.params = {{"q", ParamRole::Input, ParamKind::Heads, DType::bf16, 128, 8},
              {"o", ParamRole::Output, ParamKind::Heads, DType::bf16, 128, 8}};
  args = {{buffer, DType::bf16, {2, 8, 77, 128}},
          {buffer, DType::bf16, {2, 8, 77, 128}}};
  map = {0, 128, 64, TensorMapSwizzle::B128, true};
  std::pair<Shape, Shape> heads = geometry(k, map, args);
  EXPECT_EQ(heads, (std::pair<Shape, Shape>{{16, 77, 128}, {1, 128, 64}}));
  TensorMapSpec spec;
  spec.globalAddress = buffer;
  spec.shape = heads.first;
  spec.box = heads.second;
  EXPECT_TRUE(validateTensorMap(spec).isOk());
  // An empty batch or sequence is a size of 0, which no map has (such a
  // launch has no rows: nothing is launched).
  args[0].shape = args[1].shape = {2, 8, 0, 128};
  spec.shape = geometry(k, map, args).first;
  EXPECT_EQ(spec.shape, (Shape{16, 0, 128}));
  expectInvalid(spec, "dimension 1 has size 0");
}

TEST(TensorMapTest, EncodesOrSaysThereIsNoDriver) {
  TensorMap map;
  const CudaDriver *driver = nullptr;
  if (CudaDriver::get(&driver).isOk()) {
    // The descriptor points at device memory of the current context, as the
    // matmul kernels' operands do.
    CUdevice device = 0;
    CUcontext context = nullptr;
    unsigned long long pointer = 0;
    ASSERT_EQ(driver->cuDeviceGet(&device, 0), 0);
    ASSERT_EQ(driver->cuDevicePrimaryCtxRetain(&context, device), 0);
    ASSERT_EQ(driver->cuCtxSetCurrent(context), 0);
    ASSERT_EQ(driver->cuMemAlloc_v2(&pointer, 4096 * 4096 * 2), 0);
    TensorMapSpec spec = valid();
    spec.globalAddress = reinterpret_cast<void *>(pointer);
    Status s = encodeTensorMap(spec, &map);
    EXPECT_TRUE(s.isOk()) << s.toString();
    bool written = false;
    for (uint64_t word : map.opaque)
      written |= word != 0;
    EXPECT_TRUE(written);
    EXPECT_EQ(driver->cuMemFree_v2(pointer), 0);
  } else {
    Status s = encodeTensorMap(valid(), &map);
    EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.toString();
  }
  // A malformed spec fails before the driver is touched, with or without one.
  TensorMapSpec bad = valid();
  bad.box = {64, 4};
  EXPECT_EQ(encodeTensorMap(bad, &map).code(), StatusCode::kInvalidArgument);
}

} // namespace
