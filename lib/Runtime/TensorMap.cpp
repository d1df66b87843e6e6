//===- TensorMap.cpp - TMA descriptors for the matmul kernels -------------===//

#include "liger/Runtime/TensorMap.h"
#include "liger/Runtime/CudaDriver.h"

#include <string>

using namespace liger::runtime;

namespace {
// CUtensorMapDataType, CUtensorMapInterleave, CUtensorMapL2promotion and
// CUtensorMapFloatOOBfill values (cuda.h, CUDA 12+).
constexpr int kTmaFloat16 = 6, kTmaFloat32 = 7, kTmaBFloat16 = 9, kTmaInt32 = 3,
              kTmaInt64 = 5;
constexpr int kTmaInterleaveNone = 0;
constexpr int kTmaL2Promotion128B = 2;
constexpr int kTmaOobFillNone = 0, kTmaOobFillNanRequestZeroFma = 1;

int tmaDataType(DType dtype) {
  switch (dtype) {
  case DType::bf16:
    return kTmaBFloat16;
  case DType::f16:
    return kTmaFloat16;
  case DType::f32:
    return kTmaFloat32;
  case DType::i32:
    return kTmaInt32;
  case DType::i64:
    return kTmaInt64;
  }
  return -1;
}

Status invalid(const std::string &what) {
  return LIGER_MAKE_STATUS(StatusCode::kInvalidArgument, "tensor map: " + what);
}
} // namespace

Status liger::runtime::validateTensorMap(const TensorMapSpec &spec) {
  size_t rank = spec.shape.size();
  if (rank < 1 || rank > 5)
    return invalid("rank must be 1 to 5, got " + std::to_string(rank));
  if (spec.box.size() != rank)
    return invalid("the box has " + std::to_string(spec.box.size()) +
                   " sizes for a rank-" + std::to_string(rank) + " tensor");
  if (!spec.strides.empty() && spec.strides.size() != rank)
    return invalid("the strides have " + std::to_string(spec.strides.size()) +
                   " entries for a rank-" + std::to_string(rank) + " tensor");
  if (!spec.globalAddress ||
      reinterpret_cast<uintptr_t>(spec.globalAddress) % 16 != 0)
    return invalid("the global address must be non-null and 16-byte aligned");
  int64_t elem = static_cast<int64_t>(dtypeSize(spec.dtype));
  int64_t contiguous = 1;
  for (size_t i = rank; i-- > 0;) {
    std::string dim = "dimension " + std::to_string(i);
    if (spec.shape[i] < 1 || spec.shape[i] > (int64_t(1) << 32))
      return invalid(dim + " has size " + std::to_string(spec.shape[i]) +
                     "; sizes must be in [1, 2^32]");
    if (spec.box[i] < 1 || spec.box[i] > 256)
      return invalid(dim + " has box size " + std::to_string(spec.box[i]) +
                     "; box sizes must be in [1, 256]");
    int64_t stride = spec.strides.empty() ? contiguous : spec.strides[i];
    contiguous *= spec.shape[i];
    if (i + 1 == rank) {
      if (stride != 1)
        return invalid("the innermost stride must be 1 element, got " +
                       std::to_string(stride));
      continue;
    }
    int64_t bytes = stride * elem;
    if (bytes % 16 != 0 || bytes <= 0 || bytes >= (int64_t(1) << 40))
      return invalid(dim + " has a stride of " + std::to_string(bytes) +
                     " bytes; strides must be positive multiples of 16 bytes "
                     "under 2^40 (pad the rows)");
  }
  std::string box =
      tensorMapBoxProblem(spec.dtype, spec.box.back(), spec.swizzle);
  if (!box.empty())
    return invalid(box);
  if (!spec.zeroFill && spec.dtype != DType::bf16 && spec.dtype != DType::f16 &&
      spec.dtype != DType::f32)
    return invalid("NaN fill of out-of-bounds elements needs a floating-point "
                   "dtype, got " +
                   std::string(dtypeName(spec.dtype)));
  return Status::ok();
}

Status liger::runtime::encodeTensorMap(const TensorMapSpec &spec,
                                       TensorMap *map) {
  LIGER_RETURN_IF_ERROR(validateTensorMap(spec));
  const CudaDriver *driver = nullptr;
  LIGER_RETURN_IF_ERROR(CudaDriver::get(&driver));
  // The driver's order: innermost dimension first, strides in bytes for
  // dimensions 1..rank-1.
  size_t rank = spec.shape.size();
  unsigned long long dims[5], strides[4]; // cuuint64_t
  uint32_t box[5], elementStrides[5];
  int64_t elem = static_cast<int64_t>(dtypeSize(spec.dtype));
  int64_t contiguous = 1;
  for (size_t d = 0; d < rank; ++d) {
    size_t i = rank - 1 - d; // our index, outermost first
    dims[d] = static_cast<unsigned long long>(spec.shape[i]);
    box[d] = static_cast<uint32_t>(spec.box[i]);
    elementStrides[d] = 1;
    int64_t stride = spec.strides.empty() ? contiguous : spec.strides[i];
    contiguous *= spec.shape[i];
    if (d > 0)
      strides[d - 1] = static_cast<unsigned long long>(stride * elem);
  }
  LIGER_CUDA_RETURN_IF_ERROR(
      *driver,
      cuTensorMapEncodeTiled(
          map, tmaDataType(spec.dtype), static_cast<uint32_t>(rank),
          spec.globalAddress, dims, strides, box, elementStrides,
          kTmaInterleaveNone, static_cast<int>(spec.swizzle),
          kTmaL2Promotion128B,
          spec.zeroFill ? kTmaOobFillNone : kTmaOobFillNanRequestZeroFma));
  return Status::ok();
}
