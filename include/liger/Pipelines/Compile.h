//===- Compile.h - the compiler as a library: a module to a bundle -*- C++ -*-===//
//
// liger's compiler behind one call: a module in the liger dialect (its text)
// goes through the stages of liger-gpu-pipeline (canonicalize, fuse, lower
// the groups to GPU kernels), the lowering to NVVM, PTX and cubins, and is
// written as a kernel bundle (docs/Design/Bundle.md) that liger::runtime
// opens. liger-compile is this call behind a command line; a C++ framework
// links it as `liger::compiler` (find_package(liger COMPONENTS compiler),
// docs/install.md).
//
// The header is plain C++17: no MLIR or LLVM header, so a program that
// links the installed libliger_compiler.so needs no MLIR install to build
// (only LLVM/MLIR 22's shared libraries to run).
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_PIPELINES_COMPILE_H
#define LIGER_PIPELINES_COMPILE_H

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace liger {

/// The stages a compile can stop after (liger-compile --emit).
enum class CompileStage {
  Liger, ///< verified, canonicalized IR
  Fused, ///< after liger-fuse
  Gpu,   ///< with the gpu.module of kernels
  Llvm,  ///< kernels in the LLVM dialect
  Ptx,   ///< the PTX text of the first gpu.module
  Cubin, ///< its cubin
  Bundle ///< the bundle directory (the default)
};

/// What to compile for and how: liger-compile's flags, one field each
/// (messages name them by those flags: --target, --no-matmul-kernels, ...).
struct CompileOptions {
  /// GPU target: sm_90a (Hopper), sm_80 (compute capability 8.0, 8.7) or
  /// sm_86 (8.6, 8.9). Another is refused with the list of targets.
  std::string target = "sm_90a";
  /// PTX ISA version, as +ptxNN.
  std::string ptxFeatures = "+ptx86";
  /// Names the module in diagnostics ("<source>:3:8: error: ...") and in the
  /// manifest's `source`.
  std::string sourceName = "<module>";
  /// Run the fusion passes (off: every rowwise op is its own kernel).
  bool fuse = true;
  /// Print what fused and why the rest did not, on standard output.
  bool fusionReport = false;
  /// Fold an RMSNorm read only by projections into their matmul kernels.
  bool normPrologue = false;
  /// Compile matmul groups with the matmul templates (wgmma on sm_90a,
  /// mma.sync on sm_80/sm_86), and plan loss groups as chunks of matmul and
  /// cross-entropy kernels; off (--no-matmul-kernels), they stay uncompiled.
  bool matmulKernels = true;
  /// With matmulKernels: the schedule of wgmma matmul groups, "auto" (the
  /// selection's rule), "data-parallel", "pingpong" or "persistent" (each
  /// group that takes it).
  std::string matmulSchedule = "auto";
  /// With matmulKernels and matmulSchedule "auto": a JSON table of matmul
  /// configurations measured per shape (liger-select-kernel-config's
  /// matmul-config-table); empty: none.
  std::string matmulConfigTable;
  /// With matmulKernels: bytes one chunk of a planned loss group's logits
  /// may take; unset, liger-plan-loss's default.
  std::optional<int64_t> lossMemoryBudget;
  /// With matmulKernels: a planned loss group sums dW in an f32 buffer.
  bool lossDwF32 = false;
  /// The CUDA toolkit holding bin/ptxas; empty: $CUDA_HOME, then
  /// /usr/local/cuda.
  std::string cudaToolkit;
  /// Where not empty, every stage's result is written into this directory.
  std::string dumpDir;
  /// Where to stop; before Bundle, the stage's result is returned in
  /// CompileResult::output and no bundle is written.
  CompileStage stopAfter = CompileStage::Bundle;
  /// Where set, receives every diagnostic (errors, warnings, remarks) as it
  /// is emitted, printed as "<source>:line:col: error: ..." with the source
  /// line; errors then are not repeated in compile()'s `error`. Unset,
  /// errors go to `error` and warnings and remarks are dropped.
  std::function<void(const std::string &)> diagnosticHandler;
};

/// What a compile made.
struct CompileResult {
  /// Kernels compiled (written to the bundle).
  int numKernels = 0;
  /// Loss groups planned as chunks of those kernels.
  int numPlannedLossGroups = 0;
  /// What no kernel template compiles yet, counted: "1 liger.attention";
  /// empty where there is none.
  std::string notCompiled;
  /// Matmul and loss groups their templates left (each with a warning
  /// saying why: a dtype, an alignment), counted: "2 matmul groups".
  std::string leftByTemplates;
  /// Matmul and loss groups --no-matmul-kernels left out, counted.
  std::string leftOut;
  /// The stage's result where the compile stopped before Bundle (IR or PTX
  /// text, or the cubin's bytes).
  std::string output;
};

/// What `result` did not compile, for a message: "" or its parts, each
/// " (...)": " (not compiled yet, no kernel template: 1 liger.attention)",
/// " (left by their templates, see the warnings: 2 matmul groups)",
/// " (left out by --no-matmul-kernels: 1 loss group)".
std::string describeNotCompiled(const CompileResult &result);

/// Compiles `moduleText` (a module in the liger dialect) as `options` say;
/// at stage Bundle, writes the bundle into directory `bundleDir` (created
/// where needed). Returns false where the module or the options are
/// refused, nothing is left to compile, ptxas fails or the bundle cannot
/// be written, with the reason in `error` (a parse error with its
/// location, the targets liger supports, what waits for a kernel
/// template); `result` says what was made. Bad input never ends the
/// process. Each call has its own MLIR context.
bool compile(const std::string &moduleText, const CompileOptions &options,
             const std::string &bundleDir, CompileResult &result,
             std::string &error);

} // namespace liger

#endif // LIGER_PIPELINES_COMPILE_H
