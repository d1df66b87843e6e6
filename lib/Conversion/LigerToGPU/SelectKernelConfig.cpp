//===- SelectKernelConfig.cpp - the liger-select-kernel-config pass -------===//
//
// Writes the default launch configuration on every rowwise group that has
// none (RowKernel.cpp's selectRowKernelConfig).
//
//===----------------------------------------------------------------------===//

#include "liger/Conversion/LigerToGPU/RowKernel.h"
#include "liger/Conversion/Passes.h"

namespace mlir::liger {
#define GEN_PASS_DEF_SELECTKERNELCONFIGPASS
#include "liger/Conversion/Passes.h.inc"
} // namespace mlir::liger

using namespace mlir;
using namespace mlir::liger;

namespace {
struct SelectKernelConfigPass
    : liger::impl::SelectKernelConfigPassBase<SelectKernelConfigPass> {
  void runOnOperation() override {
    getOperation()->walk([&](FusionOp group) {
      if (group.getKind() != FusionKind::rowwise ||
          group->hasAttr("liger.kernel_config"))
        return;
      group->setAttr(
          "liger.kernel_config",
          getRowKernelConfigAttr(&getContext(), selectRowKernelConfig(group)));
      ++numConfigured;
    });
  }
};
} // namespace
