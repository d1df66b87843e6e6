//===- liger-compile.cpp - liger module in, kernel bundle out -------------===//
//
// Compiles a module in the liger dialect to a kernel bundle: the stages of
// liger-gpu-pipeline (canonicalize, fuse, lower the groups to GPU kernels;
// liger/Pipelines/Pipelines.h), then the lowering to NVVM, PTX and a cubin,
// and the bundle with its manifest (liger/Target/GpuBinary.h). --emit stops
// after any stage; --dump-dir writes every stage.
//
//   liger-compile layer.mlir -o layer.bundle [--target=sm_90a]
//       [--emit=liger|fused|gpu|llvm|ptx|cubin|bundle] [--dump-dir=DIR]
//       [--fusion-report] [--no-fuse] [--matmul-kernels] [--norm-prologue]
//
//===----------------------------------------------------------------------===//

#include "liger/Dialect/Liger/IR/LigerOps.h"
#include "liger/InitAll.h"
#include "liger/Pipelines/Pipelines.h"
#include "liger/Target/GpuBinary.h"
#include "liger/Target/GpuTarget.h"
#include "liger/Version.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

namespace cl = llvm::cl;
using namespace mlir;
using namespace mlir::liger;

namespace {
enum class Stage { Liger, Fused, GPU, LLVM, PTX, Cubin, Bundle };

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
               cl::init("sm_90a"), cl::cat(ligerCategory));
cl::opt<std::string> ptxFeatures("ptx-features",
                                 cl::desc("PTX ISA version (+ptxNN)"),
                                 cl::init("+ptx86"), cl::cat(ligerCategory));
cl::opt<Stage> emit(
    "emit", cl::desc("Stop after this stage and write its result"),
    cl::values(clEnumValN(Stage::Liger, "liger", "verified, canonicalized IR"),
               clEnumValN(Stage::Fused, "fused", "after liger-fuse"),
               clEnumValN(Stage::GPU, "gpu", "with the gpu.module of kernels"),
               clEnumValN(Stage::LLVM, "llvm", "kernels in the LLVM dialect"),
               clEnumValN(Stage::PTX, "ptx", "PTX text"),
               clEnumValN(Stage::Cubin, "cubin", "the cubin"),
               clEnumValN(Stage::Bundle, "bundle", "the bundle (default)")),
    cl::init(Stage::Bundle), cl::cat(ligerCategory));
cl::opt<std::string> dumpDir("dump-dir",
                             cl::desc("Write every stage's result here"),
                             cl::init(""), cl::cat(ligerCategory));
cl::opt<bool>
    fusionReport("fusion-report",
                 cl::desc("Print what fused and why the rest did not"),
                 cl::init(false), cl::cat(ligerCategory));
cl::opt<bool> noFuse("no-fuse", cl::desc("Compile each rowwise op alone"),
                     cl::init(false), cl::cat(ligerCategory));
cl::opt<bool> matmulKernels(
    "matmul-kernels",
    cl::desc("Experimental: also compile matmul groups (one liger.linear "
             "or a gate/up pair, with an elementwise epilogue) with the "
             "wgmma (sm_90a) or mma.sync template"),
    cl::init(false), cl::cat(ligerCategory));
cl::opt<bool> normPrologue(
    "norm-prologue",
    cl::desc("Fold an RMSNorm read only by projections into their matmul "
             "kernels (row statistics from the A tiles) instead of "
             "compiling it as a rowwise kernel before them; the rowwise "
             "kernel measured faster on sm_90a (docs/benchmarks.md)"),
    cl::init(false), cl::cat(ligerCategory));
cl::opt<int64_t> lossMemoryBudget(
    "loss-memory-budget",
    cl::desc("With --matmul-kernels: bytes one chunk of a planned loss "
             "group's logits may take (liger-plan-loss)"),
    cl::init(kDefaultLossMemoryBudget), cl::cat(ligerCategory));
cl::opt<bool> lossDwF32(
    "loss-dw-f32",
    cl::desc("With --matmul-kernels: a planned loss group sums dW across "
             "chunks in an f32 buffer (liger-plan-loss{dw-f32})"),
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

std::string printed(ModuleOp module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module.print(os);
  return text;
}

/// The kernel ABI's record of a planned loss group (liger-plan-loss): its
/// chunk size and the kernel of each of its chunk functions.
FailureOr<::liger::runtime::LossPlan>
planManifest(ModuleOp module, FusionOp group, DictionaryAttr plan) {
  ::liger::runtime::LossPlan entry;
  for (NamedAttribute stage : plan) {
    auto ref = dyn_cast<FlatSymbolRefAttr>(stage.getValue());
    if (!ref)
      continue;
    ::liger::runtime::LossStage which;
    if (!::liger::runtime::parseLossStage(stage.getName().getValue(), &which))
      return group.emitError()
             << "liger-compile: the plan's '" << stage.getName().getValue()
             << "' is not a stage of a loss plan";
    auto fn = module.lookupSymbol<func::FuncOp>(ref.getValue());
    std::string &kernel = entry.kernels[static_cast<int>(which)];
    if (fn)
      fn.walk([&](FusionOp g) {
        if (auto k = g->getAttrOfType<SymbolRefAttr>("liger.kernel"))
          kernel = k.getLeafReference().str();
      });
    if (kernel.empty())
      return group.emitError()
             << "liger-compile: the plan's '" << stage.getName().getValue()
             << "' (@" << ref.getValue() << ") has no kernel";
  }
  auto integer = [&](StringRef name) {
    return plan.getAs<IntegerAttr>(name).getInt();
  };
  auto dwF32 = plan.getAs<BoolAttr>("dw_f32"); // a plan with dW has it
  entry.function = group->getParentOfType<func::FuncOp>().getSymName().str();
  entry.chunkTokens = integer("chunk_tokens");
  entry.memoryBudget = integer("memory_budget");
  entry.mean = plan.getAs<BoolAttr>("mean").getValue();
  entry.ignoreIndex = integer("ignore_index");
  entry.classWeight = plan.getAs<BoolAttr>("class_weight").getValue();
  entry.dwF32 = dwF32 && dwF32.getValue();
  return entry;
}

bool dump(StringRef name, StringRef text) {
  if (dumpDir.empty())
    return true;
  SmallString<256> path(dumpDir);
  llvm::sys::path::append(path, name);
  return writeText(path, text);
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
  std::string error;
  if (!validateGpuTarget(targetChip, ptxFeatures, error))
    return fail(error);
  if (!dumpDir.empty())
    if (std::error_code ec = llvm::sys::fs::create_directories(dumpDir))
      return fail("cannot create " + dumpDir + ": " + ec.message());

  DialectRegistry registry;
  registerAllDialects(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  context.printOpOnDiagnostic(false);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  std::unique_ptr<llvm::MemoryBuffer> buffer = openInputFile(inputFile, &error);
  if (!buffer)
    return fail(error);
  sourceMgr.AddNewSourceBuffer(std::move(buffer), llvm::SMLoc());
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return 1;

  // The options of the pipeline's stages; the flags that only make sense
  // together are checked before anything runs.
  if ((lossMemoryBudget.getNumOccurrences() || lossDwF32) &&
      (!matmulKernels || noFuse))
    return fail(Twine(lossDwF32 ? "--loss-dw-f32" : "--loss-memory-budget") +
                " plans loss groups, which takes --matmul-kernels (and "
                "fusion)");
  if (matmulKernels && !noFuse && lossMemoryBudget <= 0)
    return fail("--loss-memory-budget must be positive, got " +
                Twine(int64_t(lossMemoryBudget)));
  GpuPipelineOptions options;
  options.chip = targetChip;
  options.features = ptxFeatures;
  options.fuse = !noFuse;
  options.report = fusionReport;
  options.normPrologue = normPrologue;
  options.matmulKernels = matmulKernels;
  options.lossMemoryBudget = lossMemoryBudget;
  options.lossDwF32 = lossDwF32;
  // Runs one stage of liger-gpu-pipeline, writes it to the dump directory,
  // and tells whether compilation goes on (`exitCode` says how it ends
  // otherwise: after a failure, or with the stage written as asked).
  int exitCode = 0;
  auto runStage =
      [&](void (*build)(OpPassManager &, const GpuPipelineOptions &),
          StringRef dumpName, Stage stage) {
        PassManager pm(&context);
        build(pm, options);
        if (failed(pm.run(*module)) || !dump(dumpName, printed(*module))) {
          exitCode = 1;
          return false;
        }
        if (emit != stage)
          return true;
        exitCode = writeText(outputPath, printed(*module)) ? 0 : 1;
        return false;
      };
  if (!runStage(buildGpuCanonicalizeStage, "00-liger.mlir", Stage::Liger) ||
      !runStage(buildGpuFusionStage, "01-fused.mlir", Stage::Fused) ||
      !runStage(buildGpuKernelStage, "02-gpu.mlir", Stage::GPU))
    return exitCode;

  // What is in the bundle, and what is left for other kernel templates.
  int numKernels = 0, numPlanned = 0;
  std::map<std::string, int> notCompiled;
  std::vector<::liger::runtime::LossPlan> plans;
  bool planFailed = false;
  module->walk([&](Operation *op) {
    if (auto group = dyn_cast<FusionOp>(op)) {
      if (group->hasAttr("liger.kernel"))
        ++numKernels;
      else if (auto plan = group->getAttrOfType<DictionaryAttr>("liger.plan")) {
        ++numPlanned;
        FailureOr<::liger::runtime::LossPlan> entry =
            planManifest(*module, group, plan);
        if (failed(entry))
          planFailed = true;
        else
          plans.push_back(std::move(*entry));
      } else
        ++notCompiled[(stringifyFusionKind(group.getKind()) + " group").str()];
      return;
    }
    if (isa_and_nonnull<LigerDialect>(op->getDialect()) &&
        !op->getParentOfType<FusionOp>() && !isa<YieldOp>(op))
      ++notCompiled[op->getName().getStringRef().str()];
  });

  if (planFailed)
    return 1;

  // llvm.
  if (numKernels && failed(lowerGpuModulesToNVVM(*module)))
    return 1;
  if (!dump("03-llvm.mlir", printed(*module)))
    return 1;
  if (emit == Stage::LLVM)
    return writeText(outputPath, printed(*module)) ? 0 : 1;
  // "1 liger.attention, 2 matmul groups": what no template compiled.
  std::string left;
  for (auto &[what, count] : notCompiled)
    left += (left.empty() ? "" : ", ") + std::to_string(count) + " " + what +
            (count > 1 && StringRef(what).ends_with("group") ? "s" : "");
  if (!numKernels)
    return fail("no kernel to compile in " + inputFile +
                (left.empty() ? std::string()
                              : " (not compiled yet, no kernel template: " +
                                    left + ")"));

  // ptx and cubin.
  FailureOr<std::vector<GpuBinary>> binaries =
      serializeGpuModules(*module, cudaToolkit);
  if (failed(binaries))
    return 1;
  for (const GpuBinary &binary : *binaries) {
    if (!dump(binary.moduleName + "." + binary.chip + ".ptx", binary.ptx) ||
        !dump(binary.moduleName + "." + binary.chip + ".cubin",
              StringRef(binary.cubin.data(), binary.cubin.size())))
      return 1;
  }
  if (emit == Stage::PTX)
    return writeText(outputPath, binaries->front().ptx) ? 0 : 1;
  if (emit == Stage::Cubin) {
    if (outputPath.empty() || outputPath == "-")
      return fail("--emit=cubin needs -o <file>");
    const std::vector<char> &cubin = binaries->front().cubin;
    return writeText(outputPath, StringRef(cubin.data(), cubin.size())) ? 0 : 1;
  }

  // bundle.
  std::string dir = outputPath;
  if (dir.empty())
    dir = (llvm::sys::path::stem(inputFile) + ".bundle").str();
  if (failed(writeBundle(*module, *binaries, dir,
                         llvm::sys::path::filename(inputFile), plans)))
    return 1;
  llvm::outs() << "liger-compile: " << numKernels << " kernel"
               << (numKernels == 1 ? "" : "s") << " for " << targetChip
               << " in " << dir;
  if (numPlanned)
    llvm::outs() << " (" << numPlanned << " loss group"
                 << (numPlanned == 1 ? "" : "s")
                 << " planned as chunks of them)";
  if (!left.empty())
    llvm::outs() << " (not compiled yet, no kernel template: " << left << ")";
  llvm::outs() << "\n";
  return 0;
}
