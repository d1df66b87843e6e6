//===- CPURunner.h - run liger functions on the CPU -------------*- C++ -*-===//
//
// Compiles one function of a liger module for the host CPU (the CPU
// pipeline, then LLVM's JIT through MLIR's ExecutionEngine) and runs it on
// host buffers. This is the numerical oracle of the test suite and the CPU
// fallback; `liger-cpu-runner` wraps it for .npy files.
//
// Shapes: the function is compiled for the shapes of the inputs it is given.
// Its argument types are refined to those shapes and the liger ops' types
// re-inferred, so an input whose shape does not fit the function (a static
// size, or two dynamic sizes the ops need equal) is a diagnostic at compile
// time, never an out-of-bounds read at run time.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_TARGET_CPURUNNER_H
#define LIGER_TARGET_CPURUNNER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mlir {
class ExecutionEngine;
} // namespace mlir

namespace mlir::liger::cpu {

/// Element types a host tensor can hold.
enum class DType { bf16, f16, f32, f64, i1, i32, i64 };

/// Bytes per element of `dtype`.
size_t getElementSize(DType dtype);

/// "bf16", "f32", ...
StringRef stringifyDType(DType dtype);

/// The DType of an MLIR element type, or failure for any other type.
FailureOr<DType> getDType(Type elementType);

/// A dense, row-major host tensor that owns its bytes.
struct HostTensor {
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;

  int64_t getNumElements() const;
  /// "3x8xbf16".
  std::string describe() const;
};

/// How CPUExecutable::compile treats the input shapes.
struct CPUCompileOptions {
  /// Compile the function specialized to the input shapes (static shapes
  /// throughout). Off by default: the shapes are then only checked (on a
  /// specialized copy) and the function is compiled as written, dynamic
  /// sizes included, which is the code path other shapes take too.
  bool specializeShapes = false;
};

/// A function compiled for one set of input shapes.
class CPUExecutable {
public:
  /// Compiles `entry` of `module` (which is cloned, not changed) for inputs
  /// with the dtypes and shapes of `inputs` (their data is not read).
  /// Errors are emitted as diagnostics on the module's context.
  static FailureOr<std::unique_ptr<CPUExecutable>>
  compile(ModuleOp module, StringRef entry, ArrayRef<HostTensor> inputs,
          const CPUCompileOptions &options = {});

  ~CPUExecutable();

  /// Runs on `inputs`, which must have the dtypes and shapes the function
  /// was compiled for; appends one tensor per function result to
  /// `results`. On failure returns false and sets `error`.
  bool run(ArrayRef<HostTensor> inputs, std::vector<HostTensor> &results,
           std::string &error) const;

private:
  CPUExecutable() = default;

  std::unique_ptr<ExecutionEngine> engine;
  std::string entry;
  std::vector<HostTensor> inputSpecs; // dtypes and shapes, no data
  std::vector<DType> resultDTypes;
  std::vector<int64_t> resultRanks;
};

/// Checks `inputs` against the signature of `func` (count, dtype, rank,
/// static sizes), then refines the argument types to the input shapes and
/// re-infers the result types of the liger ops, reporting any op whose
/// shape rules the inputs break. Ops of other dialects keep their types
/// (tensor.cast bridges the refined values to them).
LogicalResult specializeToInputs(Operation *func, ArrayRef<HostTensor> inputs);

} // namespace mlir::liger::cpu

#endif // LIGER_TARGET_CPURUNNER_H
