//===- liger-cpu-runner.cpp - run a liger function on .npy inputs ---------===//
//
// Compiles one function of a liger module for the CPU (liger-cpu-pipeline +
// JIT), runs it on inputs read from .npy files and writes each result to a
// .npy file. Test suites drive it from Python with NumPy:
//
//   liger-cpu-runner layer.mlir --entry=f -i x.npy -i w.npy -o y.npy
//
// With --output-dir=D, result #k goes to D/result<k>.npy; with neither -o
// nor --output-dir, the result shapes are printed.
//
// bf16 values travel as uint16 bit patterns ('<u2'), since NumPy has no
// bfloat16. Errors are diagnostics and a non-zero exit status.
//
//===----------------------------------------------------------------------===//

#include "Npy.h"

#include "liger/InitAll.h"
#include "liger/Target/CPURunner.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

namespace cl = llvm::cl;
using namespace mlir;
using namespace mlir::liger;

static cl::opt<std::string>
    inputFile(cl::Positional, cl::desc("<input .mlir file>"), cl::Required);
static cl::opt<std::string> entryName("entry", cl::desc("Function to run"),
                                      cl::value_desc("name"), cl::Required);
static cl::opt<bool> specializeShapes(
    "specialize-shapes",
    cl::desc("Compile the function for the input shapes (static shapes) "
             "instead of as written; shapes are checked either way"),
    cl::init(false));
static cl::list<std::string>
    inputs("i",
           cl::desc("Input .npy file, one per function argument, in order"),
           cl::value_desc("file"));
static cl::opt<std::string> outputDir(
    "output-dir",
    cl::desc("Write result #k to <dir>/result<k>.npy (instead of -o)"),
    cl::value_desc("dir"));
static cl::list<std::string>
    outputs("o",
            cl::desc("Output .npy file, one per function result, in order"),
            cl::value_desc("file"));

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(
      argc, argv,
      "liger CPU runner: run a function of a liger module on .npy inputs\n");

  DialectRegistry registry;
  registerAllDialects(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  // Diagnostics name the op and the rule; the op dump adds nothing for a
  // user who passed the wrong array.
  context.printOpOnDiagnostic(false);

  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> buffer = openInputFile(inputFile, &error);
  if (!buffer) {
    llvm::errs() << "liger-cpu-runner: " << error << "\n";
    return 1;
  }
  sourceMgr.AddNewSourceBuffer(std::move(buffer), llvm::SMLoc());
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return 1;

  if (!outputDir.empty() && !outputs.empty()) {
    llvm::errs() << "liger-cpu-runner: give either -o files or --output-dir, "
                    "not both\n";
    return 1;
  }
  std::vector<cpu::HostTensor> hostInputs(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!::liger::npy::read(inputs[i], hostInputs[i], error)) {
      llvm::errs() << "liger-cpu-runner: " << error << "\n";
      return 1;
    }
  }

  FailureOr<std::unique_ptr<cpu::CPUExecutable>> exe =
      cpu::CPUExecutable::compile(*module, entryName, hostInputs,
                                  {/*specializeShapes=*/specializeShapes});
  if (failed(exe))
    return 1;
  std::vector<cpu::HostTensor> results;
  if (!(*exe)->run(hostInputs, results, error)) {
    llvm::errs() << "liger-cpu-runner: " << error << "\n";
    return 1;
  }
  if (!outputs.empty() && outputs.size() != results.size()) {
    llvm::errs() << "liger-cpu-runner: '@" << entryName << "' returns "
                 << results.size() << " result(s), but " << outputs.size()
                 << " output file(s) were given\n";
    return 1;
  }
  for (size_t i = 0; i < results.size(); ++i) {
    if (!outputDir.empty()) {
      std::string path = outputDir + "/result" + std::to_string(i) + ".npy";
      if (!::liger::npy::write(path, results[i], error)) {
        llvm::errs() << "liger-cpu-runner: " << error << "\n";
        return 1;
      }
      continue;
    }
    if (outputs.empty()) {
      llvm::outs() << "result #" << i << ": " << results[i].describe() << "\n";
      continue;
    }
    if (!::liger::npy::write(outputs[i], results[i], error)) {
      llvm::errs() << "liger-cpu-runner: " << error << "\n";
      return 1;
    }
  }
  return 0;
}
