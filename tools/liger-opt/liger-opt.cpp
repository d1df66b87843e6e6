//===- liger-opt.cpp - the liger optimizer driver -------------------------===//
//
// mlir-opt for liger: parses, verifies and transforms IR with the liger
// dialect, its passes and the upstream dialects and passes of its pipelines,
// and the test-only passes (liger-test-*) of test/lib. Its options are
// MlirOptMain's; --version prints liger's version first.
//
//===----------------------------------------------------------------------===//

#include "liger/InitAll.h"
#include "liger/Version.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::liger::test {
void registerTestMatmulPartsPasses();
} // namespace mlir::liger::test

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::liger::registerAllDialects(registry);
  mlir::liger::registerAllPasses();
  mlir::liger::test::registerTestMatmulPartsPasses();
  llvm::cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << "liger-opt " << LIGER_VERSION_STRING << " (LLVM/MLIR "
       << LLVM_VERSION_STRING << ")\n";
  });
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv,
      "liger optimizer driver: the liger dialect and passes\n\n"
      "  liger's passes and pipelines are the --liger-* entries of the pass "
      "list\n  below (--liger-fuse, --liger-gpu-pipeline, "
      "--liger-cpu-pipeline, ...);\n  the rest are MLIR's. liger-compile "
      "turns a module into a kernel bundle.\n",
      registry));
}
