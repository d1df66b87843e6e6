//===- liger-opt.cpp - the liger optimizer driver -------------------------===//
//
// mlir-opt for liger: parses, verifies and transforms IR with the liger
// dialect, its passes and the upstream dialects and passes of its pipelines,
// and the test-only passes (liger-test-*) of test/lib.
//
//===----------------------------------------------------------------------===//

#include "liger/InitAll.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

namespace mlir::liger::test {
void registerTestMatmulPartsPasses();
} // namespace mlir::liger::test

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::liger::registerAllDialects(registry);
  mlir::liger::registerAllPasses();
  mlir::liger::test::registerTestMatmulPartsPasses();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "liger optimizer driver: the liger dialect and passes\n",
      registry));
}
