//===- SelectKernelConfig.cpp - the liger-select-kernel-config pass -------===//
//
// Writes the default `#liger.kernel_config` (its template and tunables,
// KernelConfig.cpp's selectKernelConfig) on every rowwise and matmul group
// that has none, and checks the pinned ones (verifyKernelConfig: the
// template the group's ops need, a row's vector width, a tile against the
// target).
//
//===----------------------------------------------------------------------===//

#include "liger/Conversion/LigerToGPU/KernelConfig.h"
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
/// A group's own `liger.spill_fallback` (written by hand, or by an earlier
/// run of this pass) is a configuration like a pinned one: checked by the
/// same rules, its diagnostic naming the fallback.
LogicalResult checkSpillFallback(FusionOp group, const GpuTargetInfo &target) {
  Attribute attr = group->getAttr(kSpillFallbackAttrName);
  if (!attr)
    return success();
  if (group.getKind() != FusionKind::rowwise)
    return group.emitOpError("has a '")
           << kSpillFallbackAttrName << "', which only a rowwise group takes";
  auto fallback = dyn_cast<KernelConfigAttr>(attr);
  if (!fallback)
    return group.emitOpError("has a '")
           << kSpillFallbackAttrName
           << "' that is not a #liger.kernel_config: " << attr;
  std::string why;
  LogicalResult checked = success();
  {
    ScopedDiagnosticHandler capture(group.getContext(), [&](Diagnostic &d) {
      if (d.getSeverity() != DiagnosticSeverity::Error)
        return failure();
      why = d.str();
      return success();
    });
    checked = verifyKernelConfig(group, fallback, target);
  }
  if (succeeded(checked))
    return success();
  return group.emitOpError("has a '")
         << kSpillFallbackAttrName << "' that does not fit it: " << why;
}

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
    FailureOr<MatmulSelectionOptions> matmul = readMatmulSelectionOptions(
        getOperation(), "liger-select-kernel-config", matmulSchedule,
        matmulConfigTable);
    if (failed(matmul))
      return signalPassFailure();
    WalkResult walk = getOperation()->walk([&](FusionOp group) {
      if (group.getKind() == FusionKind::loss)
        return WalkResult::advance();
      if (failed(checkSpillFallback(group, *target)))
        return WalkResult::interrupt();
      if (auto pinned = group->getAttrOfType<KernelConfigAttr>(
              KernelConfigAttr::getAttrName()))
        return failed(verifyKernelConfig(group, pinned, *target))
                   ? WalkResult::interrupt()
                   : WalkResult::advance();
      KernelConfigAttr fallback;
      FailureOr<KernelConfigAttr> config =
          selectKernelConfig(group, *target, matmul->selection(), &fallback);
      if (failed(config))
        return WalkResult::interrupt();
      group->setAttr(KernelConfigAttr::getAttrName(), *config);
      if (fallback && !group->hasAttr(kSpillFallbackAttrName))
        group->setAttr(kSpillFallbackAttrName, fallback);
      ++numConfigured;
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      signalPassFailure();
  }
};
} // namespace
