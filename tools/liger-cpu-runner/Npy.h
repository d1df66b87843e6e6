//===- Npy.h - read and write NumPy .npy files ------------------*- C++ -*-===//
//
// The subset of the .npy format (versions 1.0, 2.0 and 3.0) that the CPU
// runner needs: little-endian, C-ordered arrays of bool, int32, int64,
// float16, float32, float64, and bfloat16 carried as uint16 bit patterns
// ('<u2'), because NumPy has no bfloat16 dtype. The header is read by a
// bounded parser (keys 'descr', 'fortran_order' and 'shape', at most 64 KiB):
// any other header is an error that says what was expected where.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_TOOLS_LIGER_CPU_RUNNER_NPY_H
#define LIGER_TOOLS_LIGER_CPU_RUNNER_NPY_H

#include "liger/Target/CPURunner.h"

#include <string>

namespace liger::npy {

/// Reads `path` into `tensor`. On failure returns false and sets `error`.
bool read(const std::string &path, mlir::liger::cpu::HostTensor &tensor,
          std::string &error);

/// Writes `tensor` to `path` (bf16 as '<u2'). On failure returns false and
/// sets `error`.
bool write(const std::string &path, const mlir::liger::cpu::HostTensor &tensor,
           std::string &error);

} // namespace liger::npy

#endif // LIGER_TOOLS_LIGER_CPU_RUNNER_NPY_H
