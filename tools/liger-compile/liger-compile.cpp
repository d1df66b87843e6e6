//===- liger-compile.cpp - liger module in, kernel bundle out -------------===//
//
// Compiles a module in the liger dialect to a kernel bundle: the command
// line of liger::compile (liger/Pipelines/Compile.h: the stages of
// liger-gpu-pipeline, the lowering to NVVM, PTX and a cubin, and the bundle
// with its manifest). --emit stops after any stage; --dump-dir writes every
// stage.
//
//   liger-compile layer.mlir -o layer.bundle [--target=sm_90a]
//       [--emit=liger|fused|gpu|llvm|ptx|cubin|bundle] [--dump-dir=DIR]
//       [--fusion-report] [--no-fuse] [--no-matmul-kernels] [--norm-prologue]
//       [--matmul-schedule=auto|data-parallel|pingpong|persistent]
//       [--matmul-config-table=<file>]
//
//===----------------------------------------------------------------------===//

#include "liger/Pipelines/Compile.h"
#include "liger/Transforms/Passes.h"
#include "liger/Version.h"

#include "mlir/Support/FileUtilities.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

namespace cl = llvm::cl;
using namespace mlir;
using ::liger::CompileStage;

namespace {
/// liger::compile's defaults, which the flags start from.
const ::liger::CompileOptions kDefaults;

/// liger-compile's own options: the only ones --help lists (LLVM's are
/// behind --help-hidden and --help-list-hidden).
cl::OptionCategory ligerCategory("liger-compile options");

cl::opt<std::string> inputFile(cl::Positional, cl::desc("<input .mlir>"),
                               cl::Required, cl::cat(ligerCategory));
cl::opt<std::string> outputPath("o",
                                cl::desc("Output (bundle directory, or "
                                         "file for --emit stages)"),
                                cl::value_desc("path"), cl::init(""),
                                cl::cat(ligerCategory));
cl::opt<std::string>
    targetChip("target",
               cl::desc("GPU target: sm_90a (Hopper), sm_80 (compute "
                        "capability 8.0, 8.7) or sm_86 (8.6, 8.9)"),
               cl::init(kDefaults.target), cl::cat(ligerCategory));
cl::opt<std::string> ptxFeatures("ptx-features",
                                 cl::desc("PTX ISA version (+ptxNN)"),
                                 cl::init(kDefaults.ptxFeatures), cl::cat(ligerCategory));
cl::opt<CompileStage> emit(
    "emit", cl::desc("Stop after this stage and write its result"),
    cl::values(
        clEnumValN(CompileStage::Liger, "liger", "verified, canonicalized IR"),
        clEnumValN(CompileStage::Fused, "fused", "after liger-fuse"),
        clEnumValN(CompileStage::Gpu, "gpu",
                   "with the gpu.module of kernels (as selected, before "
                   "ptxas's spill check of looped row kernels)"),
        clEnumValN(CompileStage::Llvm, "llvm",
                   "kernels in the LLVM dialect (before the spill check)"),
        clEnumValN(CompileStage::Ptx, "ptx", "PTX text"),
        clEnumValN(CompileStage::Cubin, "cubin", "the cubin"),
        clEnumValN(CompileStage::Bundle, "bundle", "the bundle (default)")),
    cl::init(CompileStage::Bundle), cl::cat(ligerCategory));
cl::opt<std::string> dumpDir("dump-dir",
                             cl::desc("Write every stage's result here (those "
                                      "compiled again at a spill fallback "
                                      "overwrite the first)"),
                             cl::init(""), cl::cat(ligerCategory));
cl::opt<bool>
    fusionReport("fusion-report",
                 cl::desc("Print what fused and why the rest did not"),
                 cl::init(false), cl::cat(ligerCategory));
cl::opt<bool> noFuse("no-fuse", cl::desc("Compile each rowwise op alone"),
                     cl::init(false), cl::cat(ligerCategory));
cl::opt<bool> noMatmulKernels(
    "no-matmul-kernels",
    cl::desc("Leave matmul groups (projections with their epilogues, LoRA, "
             "the gated MLP's pair, gradients) and loss groups uncompiled; "
             "by default the wgmma (sm_90a) or mma.sync template compiles "
             "them"),
    cl::init(false), cl::cat(ligerCategory));
cl::opt<bool> matmulKernels(
    "matmul-kernels",
    cl::desc("Compile matmul groups (the default; kept for scripts that "
             "name it; =false is --no-matmul-kernels)"),
    cl::init(false), cl::Hidden, cl::cat(ligerCategory));
cl::opt<bool> normPrologue(
    "norm-prologue",
    cl::desc("Fold an RMSNorm read only by projections into their matmul "
             "kernels (row statistics from the A tiles) instead of "
             "compiling it as a rowwise kernel before them; the rowwise "
             "kernel measured faster on sm_90a (docs/benchmarks.md)"),
    cl::init(false), cl::cat(ligerCategory));
cl::opt<std::string> matmulSchedule(
    "matmul-schedule",
    cl::desc("How wgmma matmul kernels take their tiles: auto (the "
             "default rule), data-parallel (one CTA per tile), pingpong "
             "(one CTA per SM, two consumer warpgroups taking turns, one's "
             "epilogue under the other's main loop) or persistent (one CTA "
             "per SM, the data-parallel tile, the next tile's stages filled "
             "during the epilogue; for each group that takes it)"),
    cl::value_desc("auto|data-parallel|pingpong|persistent"), cl::init("auto"),
    cl::cat(ligerCategory));
cl::opt<std::string> matmulConfigTable(
    "matmul-config-table",
    cl::desc("A JSON table of matmul configurations measured per shape "
             "(bench/matmul_config_sweep.py writes one): a matmul group an "
             "entry matches takes its tile, stages and schedule, the others "
             "the default rule's"),
    cl::value_desc("file"), cl::init(""), cl::cat(ligerCategory));
cl::opt<int64_t> lossMemoryBudget(
    "loss-memory-budget",
    cl::desc("Bytes one chunk of a planned loss "
             "group's logits may take (liger-plan-loss)"),
    cl::init(mlir::liger::kDefaultLossMemoryBudget), cl::cat(ligerCategory));
cl::opt<bool> lossDwF32(
    "loss-dw-f32",
    cl::desc("A planned loss group sums dW across chunks in an f32 "
             "buffer (liger-plan-loss{dw-f32})"),
    cl::init(false), cl::cat(ligerCategory));
cl::opt<std::string> cudaToolkit("cuda-toolkit",
                                 cl::desc("CUDA toolkit holding bin/ptxas"),
                                 cl::init(""), cl::cat(ligerCategory));

int fail(const Twine &message) {
  llvm::errs() << "liger-compile: " << message << "\n";
  return 1;
}

/// Writes `text` to `path` ("-" or empty: stdout).
bool writeText(StringRef path, StringRef text) {
  std::string error;
  auto out = openOutputFile(path.empty() ? "-" : path, &error);
  if (!out) {
    llvm::errs() << "liger-compile: " << error << "\n";
    return false;
  }
  out->os() << text;
  out->keep();
  return true;
}
} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << "liger-compile " << LIGER_VERSION_STRING << " (LLVM/MLIR "
       << LLVM_VERSION_STRING << ")\n";
  });
  // LLVM's options stay, hidden: --help-hidden lists them after ours.
  for (auto &entry : cl::getRegisteredOptions()) {
    cl::Option *option = entry.second;
    bool generic = llvm::any_of(option->Categories, [](cl::OptionCategory *c) {
      return c->getName() == "Generic Options";
    });
    if (!generic && !llvm::is_contained(option->Categories, &ligerCategory) &&
        option->getOptionHiddenFlag() == cl::NotHidden)
      option->setHiddenFlag(cl::Hidden);
  }
  cl::ParseCommandLineOptions(argc, argv,
                              "liger-compile: a liger module to a kernel "
                              "bundle (cubins, PTX, manifest)\n");
  if (emit == CompileStage::Cubin && (outputPath.empty() || outputPath == "-"))
    return fail("--emit=cubin needs -o <file>");
  // --matmul-kernels[=true] is the default; --matmul-kernels=false says
  // --no-matmul-kernels.
  bool matmulOff = noMatmulKernels ||
                   (matmulKernels.getNumOccurrences() && !matmulKernels);
  if (matmulKernels.getNumOccurrences() && matmulKernels && noMatmulKernels)
    return fail("--matmul-kernels and --no-matmul-kernels contradict each "
                "other (matmul groups compile by default)");
  ::liger::CompileOptions options;
  options.target = targetChip;
  options.ptxFeatures = ptxFeatures;
  options.sourceName = inputFile;
  options.fuse = !noFuse;
  options.fusionReport = fusionReport;
  options.normPrologue = normPrologue;
  options.matmulKernels = !matmulOff;
  options.matmulSchedule = matmulSchedule;
  options.matmulConfigTable = matmulConfigTable;
  if (lossMemoryBudget.getNumOccurrences())
    options.lossMemoryBudget = lossMemoryBudget;
  options.lossDwF32 = lossDwF32;
  options.cudaToolkit = cudaToolkit;
  options.dumpDir = dumpDir;
  options.stopAfter = emit;
  options.diagnosticHandler = [](const std::string &diagnostic) {
    llvm::errs() << diagnostic;
  };

  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> buffer = openInputFile(inputFile, &error);
  if (!buffer)
    return fail(error);
  std::string dir = outputPath;
  if (dir.empty())
    dir = (llvm::sys::path::stem(inputFile) + ".bundle").str();
  ::liger::CompileResult result;
  if (!::liger::compile(buffer->getBuffer().str(), options, dir, result,
                        error))
    return error.empty() ? 1 : fail(error);
  if (emit != CompileStage::Bundle)
    return writeText(outputPath, result.output) ? 0 : 1;

  llvm::outs() << "liger-compile: " << result.numKernels << " kernel"
               << (result.numKernels == 1 ? "" : "s") << " for " << targetChip
               << " in " << dir;
  if (result.numPlannedLossGroups)
    llvm::outs() << " (" << result.numPlannedLossGroups << " loss group"
                 << (result.numPlannedLossGroups == 1 ? "" : "s")
                 << " planned as chunks of them)";
  llvm::outs() << ::liger::describeNotCompiled(result) << "\n";
  return 0;
}
