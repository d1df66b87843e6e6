//===- Compile.cpp - a liger module to a kernel bundle --------------------===//
//
// liger::compile (liger/Pipelines/Compile.h): the stages of
// liger-gpu-pipeline (liger/Pipelines/Pipelines.h), the lowering to NVVM,
// PTX and cubins, and the bundle with its manifest (liger/Target/GpuBinary.h).
// liger-compile and liger::compiler's users reach this one code path.
//
//===----------------------------------------------------------------------===//

#include "liger/Pipelines/Compile.h"

#include "liger/Conversion/LigerToGPU/KernelConfig.h"
#include "liger/Conversion/LigerToGPU/MatmulConfigTable.h"
#include "liger/Conversion/LigerToGPU/MatmulPlan.h"
#include "liger/Dialect/Liger/IR/LigerOps.h"
#include "liger/InitAll.h"
#include "liger/Pipelines/Pipelines.h"
#include "liger/Target/GpuBinary.h"
#include "liger/Target/GpuTarget.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

using namespace mlir;
using namespace mlir::liger;
using ::liger::CompileOptions;
using ::liger::CompileResult;
using ::liger::CompileStage;

namespace {
/// Writes `text` to file `path`, or says why not in `error`.
bool writeFile(StringRef path, StringRef text, std::string &error) {
  auto out = openOutputFile(path, &error);
  if (!out)
    return false;
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

/// The options that only make sense together, checked before anything
/// runs; the message names them by liger-compile's flags.
std::optional<std::string> checkOptions(const CompileOptions &options) {
  std::string error;
  if (!validateGpuTarget(options.target, options.ptxFeatures, error))
    return error;
  if ((options.lossMemoryBudget || options.lossDwF32) &&
      (!options.matmulKernels || !options.fuse))
    return std::string(options.lossDwF32 ? "--loss-dw-f32"
                                         : "--loss-memory-budget") +
           " plans loss groups, which " +
           (options.fuse ? "--no-matmul-kernels" : "--no-fuse") +
           " leaves uncompiled";
  if (!parseMatmulScheduleChoice(options.matmulSchedule))
    return badMatmulScheduleChoice("--matmul-schedule", options.matmulSchedule);
  // A schedule or a table also shapes the matmul groups a module holds
  // (--no-fuse compiles those).
  if (options.matmulSchedule != "auto" && !options.matmulKernels)
    return "--matmul-schedule chooses how matmul groups compile, which "
           "--no-matmul-kernels leaves uncompiled";
  if (!options.matmulConfigTable.empty()) {
    if (!options.matmulKernels)
      return "--matmul-config-table chooses how matmul groups compile, "
             "which --no-matmul-kernels leaves uncompiled";
    if (options.matmulSchedule != "auto")
      return conflictingMatmulSelection("--matmul-schedule",
                                        "--matmul-config-table");
    std::string error;
    if (!MatmulConfigTable::read(options.matmulConfigTable, error))
      return error;
  }
  if (options.lossMemoryBudget && *options.lossMemoryBudget <= 0)
    return "--loss-memory-budget must be positive, got " +
           std::to_string(*options.lossMemoryBudget);
  return std::nullopt;
}

/// Prints a diagnostic as the tools do (location, message, source line,
/// notes), into the stream it was made with.
struct DiagnosticPrinter : SourceMgrDiagnosticHandler {
  using SourceMgrDiagnosticHandler::emitDiagnostic;
  using SourceMgrDiagnosticHandler::SourceMgrDiagnosticHandler;
};

/// One compile: the module, its diagnostics and where its stages go.
class Compilation {
public:
  Compilation(const CompileOptions &options, CompileResult &result,
              std::string &error)
      : options(options), result(result), error(error),
        context(registry()), printer(sourceMgr, &context, diagnosticStream),
        forward(&context, [this](Diagnostic &diag) {
          printer.emitDiagnostic(diag);
          if (this->options.diagnosticHandler)
            this->options.diagnosticHandler(diagnosticText);
          else if (diag.getSeverity() == DiagnosticSeverity::Error)
            this->error += diagnosticText;
          diagnosticText.clear();
          return success();
        }) {
    context.loadAllAvailableDialects();
    context.printOpOnDiagnostic(false);
  }

  bool run(StringRef moduleText, StringRef bundleDir);

private:
  static DialectRegistry registry() {
    DialectRegistry registry;
    registerAllDialects(registry);
    return registry;
  }

  /// Fails with `message` (an error that is not a diagnostic).
  bool fail(const Twine &message) {
    error = message.str();
    return false;
  }

  /// Writes `text` as `name` into the dump directory, where there is one.
  bool dump(StringRef name, StringRef text) {
    if (options.dumpDir.empty())
      return true;
    SmallString<256> path(options.dumpDir);
    llvm::sys::path::append(path, name);
    return writeFile(path, text, error);
  }

  /// Runs one stage of liger-gpu-pipeline and dumps it; false where it
  /// fails. `stopped`: the compile ends after this stage, as asked, with
  /// the stage's IR in the result.
  bool runStage(void (*build)(OpPassManager &, const GpuPipelineOptions &),
                StringRef dumpName, CompileStage stage, bool &stopped) {
    PassManager pm(&context);
    build(pm, pipelineOptions);
    if (failed(pm.run(*module)) || !dump(dumpName, printed(*module)))
      return false;
    if (options.stopAfter == stage) {
      result.output = printed(*module);
      stopped = true;
    }
    return true;
  }

  bool compileKernels(std::vector<::liger::runtime::LossPlan> &plans,
                      std::vector<GpuBinary> &binaries, bool &stopped);
  FailureOr<std::vector<std::string>>
  spilledWithFallback(ArrayRef<GpuBinary> binaries);

  /// Counts what is in the bundle, what is left for other kernel
  /// templates, and the manifest's record of each planned loss group.
  bool survey(std::vector<::liger::runtime::LossPlan> &plans);

  const CompileOptions &options;
  CompileResult &result;
  std::string &error;
  GpuPipelineOptions pipelineOptions;
  MLIRContext context;
  llvm::SourceMgr sourceMgr;
  std::string diagnosticText;
  llvm::raw_string_ostream diagnosticStream{diagnosticText};
  DiagnosticPrinter printer;
  ScopedDiagnosticHandler forward;
  OwningOpRef<ModuleOp> module;
};

bool Compilation::survey(std::vector<::liger::runtime::LossPlan> &plans) {
  // Per list (no template; left by a template; left out): what -> count.
  std::map<std::string, int> notCompiled, leftByTemplates, leftOut;
  bool planFailed = false;
  module->walk([&](Operation *op) {
    if (auto group = dyn_cast<FusionOp>(op)) {
      if (group->hasAttr("liger.kernel"))
        ++result.numKernels;
      else if (auto plan = group->getAttrOfType<DictionaryAttr>("liger.plan")) {
        ++result.numPlannedLossGroups;
        FailureOr<::liger::runtime::LossPlan> entry =
            planManifest(*module, group, plan);
        if (failed(entry))
          planFailed = true;
        else
          plans.push_back(std::move(*entry));
      } else {
        // Matmul and loss groups are the matmul templates' (each left with
        // a warning, or all left out by the options); others have none.
        // An attention group is the attention template's, whatever the
        // options.
        bool templated = group.getKind() == FusionKind::matmul ||
                         group.getKind() == FusionKind::loss;
        bool attention = group.getKind() == FusionKind::attention;
        auto &list = attention               ? leftByTemplates
                     : !templated            ? notCompiled
                     : options.matmulKernels ? leftByTemplates
                                             : leftOut;
        ++list[(stringifyFusionKind(group.getKind()) + " group").str()];
      }
      return;
    }
    if (isa_and_nonnull<LigerDialect>(op->getDialect()) &&
        !op->getParentOfType<FusionOp>() && !isa<YieldOp>(op))
      ++(!options.matmulKernels && isLoneMatmulOp(op)
             ? leftOut
             : notCompiled)[op->getName().getStringRef().str()];
  });
  // "1 liger.attention, 2 matmul groups".
  auto counted = [](const std::map<std::string, int> &list) {
    std::string text;
    for (auto &[what, count] : list)
      text += (text.empty() ? "" : ", ") + std::to_string(count) + " " +
              what +
              (count > 1 && StringRef(what).ends_with("group") ? "s" : "");
    return text;
  };
  result.notCompiled = counted(notCompiled);
  result.leftByTemplates = counted(leftByTemplates);
  result.leftOut = counted(leftOut);
  return !planFailed;
}

/// The kernel stage, the lowering to NVVM and the serialization of
/// `module` (the fused module): its loss plans and binaries. `stopped`: the
/// compile ends at the GPU or LLVM stage, as asked.
bool Compilation::compileKernels(std::vector<::liger::runtime::LossPlan> &plans,
                                 std::vector<GpuBinary> &binaries,
                                 bool &stopped) {
  if (!runStage(buildGpuKernelStage, "02-gpu.mlir", CompileStage::Gpu,
                stopped) ||
      stopped)
    return stopped;
  if (!survey(plans))
    return false;
  // llvm.
  if (result.numKernels && failed(lowerGpuModulesToNVVM(*module)))
    return false;
  if (!dump("03-llvm.mlir", printed(*module)))
    return false;
  if (options.stopAfter == CompileStage::Llvm) {
    result.output = printed(*module);
    stopped = true;
    return true;
  }
  if (!result.numKernels)
    return fail("no kernel to compile in " + options.sourceName +
                describeNotCompiled(result));

  // ptx and cubin.
  FailureOr<std::vector<GpuBinary>> serialized =
      serializeGpuModules(*module, options.cudaToolkit);
  if (failed(serialized))
    return false;
  binaries = std::move(*serialized);
  for (const GpuBinary &binary : binaries)
    if (!dump(binary.moduleName + "." + binary.chip + ".ptx", binary.ptx) ||
        !dump(binary.moduleName + "." + binary.chip + ".cubin",
              StringRef(binary.cubin.data(), binary.cubin.size())))
      return false;
  return true;
}

/// The kernels of the lowered module whose group has a
/// `liger.spill_fallback` (selectKernelConfig's) and that ptxas compiled
/// with spills.
FailureOr<std::vector<std::string>>
Compilation::spilledWithFallback(ArrayRef<GpuBinary> binaries) {
  // Per gpu.module: its kernels to check.
  llvm::StringMap<std::vector<std::string>> kernels;
  module->walk([&](FusionOp group) {
    auto ref = group->getAttrOfType<SymbolRefAttr>("liger.kernel");
    if (ref && group.getKind() == FusionKind::rowwise &&
        group->hasAttr(kSpillFallbackAttrName))
      kernels[ref.getRootReference().getValue()].push_back(
          ref.getLeafReference().getValue().str());
  });
  std::vector<std::string> spilled;
  for (const GpuBinary &binary : binaries) {
    auto it = kernels.find(binary.moduleName);
    if (it == kernels.end())
      continue;
    FailureOr<llvm::StringMap<int64_t>> bytes =
        measureSpills(*module, binary, it->second, options.cudaToolkit);
    if (failed(bytes))
      return failure();
    for (const std::string &kernel : it->second)
      if (bytes->lookup(kernel) > 0)
        spilled.push_back(kernel);
  }
  return spilled;
}

bool Compilation::run(StringRef moduleText, StringRef bundleDir) {
  if (std::optional<std::string> refused = checkOptions(options))
    return fail(*refused);
  if (options.stopAfter == CompileStage::Bundle && bundleDir.empty())
    return fail("no bundle directory to write the bundle into");
  if (!options.dumpDir.empty())
    if (std::error_code ec =
            llvm::sys::fs::create_directories(options.dumpDir))
      return fail("cannot create " + options.dumpDir + ": " + ec.message());
  pipelineOptions.chip = options.target;
  pipelineOptions.features = options.ptxFeatures;
  pipelineOptions.fuse = options.fuse;
  pipelineOptions.report = options.fusionReport;
  pipelineOptions.normPrologue = options.normPrologue;
  pipelineOptions.matmulKernels = options.matmulKernels;
  pipelineOptions.matmulSchedule = options.matmulSchedule;
  pipelineOptions.matmulConfigTable = options.matmulConfigTable;
  if (options.lossMemoryBudget)
    pipelineOptions.lossMemoryBudget = *options.lossMemoryBudget;
  pipelineOptions.lossDwF32 = options.lossDwF32;

  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(moduleText, options.sourceName),
      llvm::SMLoc());
  module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return false;
  bool stopped = false;
  if (!runStage(buildGpuCanonicalizeStage, "00-liger.mlir", CompileStage::Liger,
                stopped) ||
      stopped ||
      !runStage(buildGpuFusionStage, "01-fused.mlir", CompileStage::Fused,
                stopped) ||
      stopped)
    return stopped;
  // The fused module, for compiling groups again at their spill fallback.
  OwningOpRef<ModuleOp> fused = module->clone();
  std::vector<::liger::runtime::LossPlan> plans;
  std::vector<GpuBinary> binaries;
  if (!compileKernels(plans, binaries, stopped) || stopped)
    return stopped;
  FailureOr<std::vector<std::string>> spilled = spilledWithFallback(binaries);
  if (failed(spilled))
    return false;
  if (!spilled->empty()) {
    // Those kernels at their groups' fallback, from the fused module: the
    // kernel stage names every kernel as it did (in the order of the
    // groups and of the ops it wraps).
    module = std::move(fused);
    result = CompileResult();
    plans.clear();
    binaries.clear();
    pipelineOptions.spillFallbackKernels = ArrayRef<std::string>(*spilled);
    // The same groups warn as they did the first time: once is enough.
    ScopedDiagnosticHandler onlyErrors(&context, [](Diagnostic &diag) {
      return success(diag.getSeverity() == DiagnosticSeverity::Warning ||
                     diag.getSeverity() == DiagnosticSeverity::Remark);
    });
    if (!compileKernels(plans, binaries, stopped) || stopped)
      return stopped;
  }
  if (options.stopAfter == CompileStage::Ptx) {
    result.output = binaries.front().ptx;
    return true;
  }
  if (options.stopAfter == CompileStage::Cubin) {
    const std::vector<char> &cubin = binaries.front().cubin;
    result.output.assign(cubin.begin(), cubin.end());
    return true;
  }

  // bundle.
  return succeeded(writeBundle(*module, binaries, bundleDir,
                               llvm::sys::path::filename(options.sourceName),
                               plans));
}
} // namespace

namespace liger {
std::string describeNotCompiled(const CompileResult &result) {
  std::string text;
  if (!result.notCompiled.empty())
    text += " (not compiled yet, no kernel template: " + result.notCompiled +
            ")";
  if (!result.leftByTemplates.empty())
    text += " (left by their templates, see the warnings: " +
            result.leftByTemplates + ")";
  if (!result.leftOut.empty())
    text += " (left out by --no-matmul-kernels: " + result.leftOut + ")";
  return text;
}
} // namespace liger

bool ::liger::compile(const std::string &moduleText,
                    const CompileOptions &options, const std::string &bundleDir,
                    CompileResult &result, std::string &error) {
  result = CompileResult();
  error.clear();
  Compilation compilation(options, result, error);
  if (compilation.run(moduleText, bundleDir))
    return true;
  if (error.empty() && !options.diagnosticHandler)
    error = "the compile of " + options.sourceName + " failed";
  return false;
}
