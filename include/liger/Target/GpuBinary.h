//===- GpuBinary.h - gpu.module to PTX, cubins, bundles ---------*- C++ -*-===//
//
// The back end of `liger-compile`: lowers the gpu.module that
// liger-lower-to-gpu builds to the NVVM/LLVM dialects (with the
// dynamic-shared-memory fix every liger kernel relies on), serializes it
// through the NVVM target (LLVM NVPTX for PTX, ptxas for the cubin), and
// writes a kernel bundle: the cubin, the PTX and a manifest
// (docs/Design/Bundle.md), filled in as the runtime's kernel ABI structs
// (liger/Runtime/KernelAbi.h) and written by the runtime's own code.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_TARGET_GPUBINARY_H
#define LIGER_TARGET_GPUBINARY_H

#include "liger/Runtime/KernelAbi.h"

#include "mlir/IR/BuiltinOps.h"

#include "llvm/ADT/StringMap.h"

#include <string>
#include <vector>

namespace mlir::liger {

/// Lowers every gpu.module of `module` to the LLVM dialect: SCF to CF,
/// GPU/vector/arith/math/memref to NVVM, then gives the dynamic shared
/// memory buffer external linkage and 1024-byte alignment (upstream lowers
/// it to a 1-byte static variable that other shared memory overlaps).
LogicalResult lowerGpuModulesToNVVM(ModuleOp module);

/// A serialized gpu.module.
struct GpuBinary {
  std::string moduleName;
  std::string chip;
  /// The ptxas options the serialization passed besides the chip: -O from
  /// the #nvvm.target's O, then its "ptxas-cmd-options" flags.
  std::vector<std::string> ptxasOptions;
  std::string ptx;
  std::vector<char> cubin;
};

/// Serializes every gpu.module of `module` (already lowered) with its NVVM
/// target. `toolkitPath` is the CUDA toolkit holding bin/ptxas; empty means
/// $CUDA_HOME, then /usr/local/cuda. Fails with a diagnostic saying where
/// ptxas was looked for, or ptxas's own log.
FailureOr<std::vector<GpuBinary>> serializeGpuModules(ModuleOp module,
                                                      StringRef toolkitPath);

/// ptxas's report on `kernels` of `binary` (compiled again with -v for
/// those entries only, with the options the serialization passed,
/// `binary.ptxasOptions`): the bytes each spilled, stores and loads
/// together. Fails with a diagnostic on
/// `module` where ptxas cannot run or does not report on a kernel asked for.
FailureOr<llvm::StringMap<int64_t>> measureSpills(ModuleOp module,
                                                  const GpuBinary &binary,
                                                  ArrayRef<std::string> kernels,
                                                  StringRef toolkitPath);

/// Writes a bundle into directory `dir` (created if needed): per gpu.module
/// `<name>.<chip>.cubin` and `.ptx`, and `manifest.json` describing every
/// kernel from its `#liger.kernel_info` (KernelInfoAttr::toKernelSpec), the
/// whole manifest verified as the runtime verifies it: a bundle the runtime
/// would refuse is an error here.
/// `source` names the input; `plans` are the planned loss groups
/// (docs/Design/Bundle.md).
LogicalResult writeBundle(ModuleOp module, ArrayRef<GpuBinary> binaries,
                          StringRef dir, StringRef source,
                          ArrayRef<::liger::runtime::LossPlan> plans = {});

} // namespace mlir::liger

#endif // LIGER_TARGET_GPUBINARY_H
