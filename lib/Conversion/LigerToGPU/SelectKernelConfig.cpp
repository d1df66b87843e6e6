//===- SelectKernelConfig.cpp - the liger-select-kernel-config pass -------===//
//
// Writes the default launch configuration on every rowwise group
// (RowKernel.cpp's selectRowKernelConfig) and every matmul group
// (MatmulConfig.cpp) that has none, and checks the pinned configurations:
// a rowwise group's against its row (getRowKernelConfig, the same vector
// width rule the default follows), a matmul group's against the target.
//
//===----------------------------------------------------------------------===//

#include "liger/Conversion/LigerToGPU/MatmulConfig.h"
#include "liger/Conversion/LigerToGPU/RowKernel.h"
#include "liger/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace mlir::liger {
#define GEN_PASS_DEF_SELECTKERNELCONFIGPASS
#include "liger/Conversion/Passes.h.inc"
} // namespace mlir::liger

using namespace mlir;
using namespace mlir::liger;

namespace {
struct SelectKernelConfigPass
    : mlir::liger::impl::SelectKernelConfigPassBase<SelectKernelConfigPass> {
  using Base::Base;

  void runOnOperation() override {
    std::optional<GpuTargetInfo> target = lookupGpuTarget(chip);
    if (!target) {
      std::string error;
      (void)validateGpuTarget(chip, "+ptx86", error);
      getOperation()->emitError() << "liger-select-kernel-config: " << error;
      return signalPassFailure();
    }
    WalkResult walk = getOperation()->walk([&](FusionOp group) {
      auto pinned = group->getAttrOfType<DictionaryAttr>("liger.kernel_config");
      if (group.getKind() == FusionKind::rowwise) {
        if (pinned)
          return failed(getRowKernelConfig(group)) ? WalkResult::interrupt()
                                                   : WalkResult::advance();
        group->setAttr("liger.kernel_config",
                       getRowKernelConfigAttr(&getContext(),
                                              selectRowKernelConfig(group)));
        ++numConfigured;
        return WalkResult::advance();
      }
      if (group.getKind() != FusionKind::matmul)
        return WalkResult::advance();
      FailureOr<MatmulPlan> plan = analyzeMatmulGroup(group);
      if (failed(plan))
        return WalkResult::interrupt();
      if (pinned) {
        FailureOr<MatmulKernelConfig> config =
            readMatmulKernelConfig(group, pinned);
        if (failed(config) ||
            failed(verifyMatmulKernelConfig(*config, *plan, *target)))
          return WalkResult::interrupt();
        return WalkResult::advance();
      }
      group->setAttr("liger.kernel_config",
                     getMatmulKernelConfigAttr(
                         &getContext(),
                         selectMatmulKernelConfig(*plan, *target)));
      ++numConfigured;
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      signalPassFailure();
  }
};
} // namespace
