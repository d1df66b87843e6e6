//===- liger-opt.cpp - the liger optimizer driver -------------------------===//
//
// mlir-opt for liger: parses, verifies and transforms IR with the liger
// dialect, its passes and the upstream dialects and passes of its pipelines.
//
//===----------------------------------------------------------------------===//

#include "liger/InitAll.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::liger::registerAllDialects(registry);
  mlir::liger::registerAllPasses();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "liger optimizer driver: the liger dialect and passes\n",
      registry));
}
