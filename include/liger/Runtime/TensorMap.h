//===- TensorMap.h - TMA descriptors for the matmul kernels -----*- C++ -*-===//
//
// A Hopper TMA descriptor (the driver's CUtensorMap) describes a tiled view
// of a global tensor that `cp.async.bulk.tensor` loads into shared memory.
// encodeTensorMap checks every constraint the driver documents for
// cuTensorMapEncodeTiled first (so a bad shape is a message that names the
// dimension, not CUDA_ERROR_INVALID_VALUE), then encodes through the driver
// loaded at run time. Shapes are given row-major, outermost dimension first
// (as PyTorch gives them); the driver's innermost-first order is internal.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_RUNTIME_TENSORMAP_H
#define LIGER_RUNTIME_TENSORMAP_H

#include "liger/Runtime/KernelAbi.h"

#include <cstdint>

namespace liger::runtime {

/// The opaque 128-byte descriptor, 64-byte aligned as the driver requires.
struct alignas(64) TensorMap {
  uint64_t opaque[16] = {};
};

struct TensorMapSpec {
  void *globalAddress = nullptr;
  DType dtype = DType::bf16;
  Shape shape;   ///< sizes, outermost first; rank 1 to 5
  Shape strides; ///< in elements, outermost first; the innermost must be 1;
                 ///< empty: contiguous
  Shape box;     ///< the tile, outermost first; each in [1, 256]
  TensorMapSwizzle swizzle = TensorMapSwizzle::B128;
  /// Out-of-bounds elements of a tile read as zero (false: as a NaN that
  /// makes FMAs produce zero; floating-point dtypes only).
  bool zeroFill = true;
};

/// Checks `spec` against cuTensorMapEncodeTiled's requirements (no driver).
Status validateTensorMap(const TensorMapSpec &spec);

/// validateTensorMap, then the driver's encoding into `*map`.
Status encodeTensorMap(const TensorMapSpec &spec, TensorMap *map);

} // namespace liger::runtime

#endif // LIGER_RUNTIME_TENSORMAP_H
