//===- LowerToGPU.cpp - the liger-lower-to-gpu pass -----------------------===//
//
// Wraps rowwise ops outside groups (wrap-ops), then builds one kernel per
// rowwise group into gpu.module @liger_kernels (RowKernel.cpp) and records
// each kernel's launch information for the bundle writer.
//
//===----------------------------------------------------------------------===//

#include "liger/Conversion/LigerToGPU/AttentionKernel.h"
#include "liger/Conversion/LigerToGPU/KernelConfig.h"
#include "liger/Conversion/LigerToGPU/MatmulConfig.h"
#include "liger/Conversion/LigerToGPU/MatmulKernel.h"
#include "liger/Conversion/LigerToGPU/RowKernel.h"
#include "liger/Conversion/Passes.h"
#include "liger/Runtime/KernelAbi.h"
#include "liger/Target/GpuTarget.h"
#include "liger/Transforms/Fusion.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

namespace mlir::liger {
#define GEN_PASS_DEF_LOWERTOGPUPASS
#include "liger/Conversion/Passes.h.inc"
} // namespace mlir::liger

using namespace mlir;
using namespace mlir::liger;

/// Whether `op` is a divergence (or its gradient) reduced over every token
/// to one scalar: the row program computes a loss per token (`per_token`)
/// or per element, and its caller adds the tokens up (liger.ops does), as
/// a reduction across every row is no row program step.
static bool isDivergenceReducedToScalar(Operation &op) {
  if (auto kl = dyn_cast<KLDivOp>(op))
    return kl.getReduction() != KLReduction::none && !kl.getPerToken();
  if (auto kl = dyn_cast<KLDivGradOp>(op))
    return kl.getReduction() != KLReduction::none && !kl.getPerToken();
  if (auto jsd = dyn_cast<JSDOp>(op))
    return !jsd.getPerToken();
  if (auto jsd = dyn_cast<JSDGradOp>(op))
    return !jsd.getPerToken();
  return false;
}

/// Builds `plan`'s kernel again with the narrow-tile `config` as
/// `<name>_narrow` in `kernels` and records it as `info`'s narrow variant.
/// The variant is optional: where it cannot be built, or would break the
/// kernel ABI's rules beside its kernel (verifyKernel: the same tensor
/// maps, ...), it is erased with a remark and the kernel stays alone.
static void addNarrowVariant(const MatmulPlan &plan, gpu::GPUModuleOp kernels,
                             StringRef name, const MatmulKernelConfig &config,
                             ::liger::runtime::KernelSpec &info) {
  std::string variantName = (name + "_narrow").str(), why;
  FailureOr<::liger::runtime::KernelSpec> variant;
  {
    ScopedDiagnosticHandler quiet(kernels.getContext(), [&](Diagnostic &d) {
      if (why.empty())
        why = d.str();
      return success();
    });
    variant = buildMatmulKernel(plan, kernels, variantName, config);
  }
  if (succeeded(variant)) {
    ::liger::runtime::KernelSpec candidate = info;
    // (its name and function are the bundle writer's to add, as for
    // kernel_info's own verifier)
    candidate.name = name.str();
    candidate.function = "function";
    // (the variant's launch shape; its ABI is its kernel's)
    candidate.narrow =
        static_cast<const ::liger::runtime::LaunchShape &>(*variant);
    ::liger::runtime::Status status = ::liger::runtime::verifyKernel(
        candidate, "liger-lower-to-gpu", name.str());
    if (status.isOk()) {
      info.narrow = std::move(candidate.narrow);
      return;
    }
    why = status.message();
  }
  if (auto fn = kernels.lookupSymbol<gpu::GPUFuncOp>(variantName))
    fn.erase();
  plan.group.emitRemark() << "no narrow-tile variant beside @" << name << ": "
                          << why;
}

namespace {
struct LowerToGPUPass : mlir::liger::impl::LowerToGPUPassBase<LowerToGPUPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    std::string error;
    if (!validateGpuTarget(chip, features, error)) {
      module.emitError() << "liger-lower-to-gpu: " << error;
      return signalPassFailure();
    }
    FailureOr<MatmulSelectionOptions> matmul = readMatmulSelectionOptions(
        module, "liger-lower-to-gpu", matmulSchedule, matmulConfigTable);
    if (failed(matmul))
      return signalPassFailure();

    // Rowwise ops outside groups become groups of one (and, on a target
    // with the attention template's instructions, liger.attention and
    // liger.attention_grad).
    IRRewriter rewriter(ctx);
    std::optional<GpuTargetInfo> target = lookupGpuTarget(chip);
    bool attentionKernels = attentionTemplateRunsOn(*target);
    if (wrapOps) {
      SmallVector<Operation *> singles;
      module.walk([&](Operation *op) {
        if ((isRowwiseOp(op) || (matmulKernels && isLoneMatmulOp(op)) ||
             (attentionKernels && isa<AttentionOp, AttentionGradOp>(op))) &&
            !isInFusionGroup(op))
          singles.push_back(op);
      });
      for (Operation *op : singles) {
        std::string whyNot;
        FusionKind kind = isLoneMatmulOp(op) ? FusionKind::matmul
                          : isa<AttentionOp, AttentionGradOp>(op)
                              ? FusionKind::attention
                              : FusionKind::rowwise;
        if (failed(createFusionGroup(
                rewriter, {"liger-lower-to-gpu", kind, {op}, {}}, whyNot))) {
          op->emitOpError("cannot become a kernel: ") << whyNot;
          return signalPassFailure();
        }
      }
    }

    SmallVector<std::pair<FunctionOpInterface, FusionOp>> groups;
    module.walk([&](FunctionOpInterface fn) {
      fn.walk([&](FusionOp group) {
        if ((group.getKind() == FusionKind::rowwise ||
             group.getKind() == FusionKind::attention ||
             (matmulKernels && group.getKind() == FusionKind::matmul)) &&
            !group->hasAttr("liger.kernel"))
          groups.push_back({fn, group});
      });
    });
    if (groups.empty())
      return;

    OpBuilder b(ctx);
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    b.getUnitAttr());
    auto kernels = module.lookupSymbol<gpu::GPUModuleOp>("liger_kernels");
    if (!kernels) {
      b.setInsertionPointToEnd(module.getBody());
      auto target = NVVM::NVVMTargetAttr::get(
          ctx, /*optLevel=*/3, "nvptx64-nvidia-cuda", chip, features);
      kernels = gpu::GPUModuleOp::create(b, module.getLoc(), "liger_kernels",
                                         b.getArrayAttr({target}));
    }
    llvm::StringMap<int> perFunction;
    // The kernel `name` built for `group`: its launch information, and the
    // group's reference to it.
    auto record = [&](FusionOp group, StringRef name,
                      const ::liger::runtime::KernelSpec &spec) {
      auto kernel = kernels.lookupSymbol<gpu::GPUFuncOp>(name);
      kernel->setAttr(KernelInfoAttr::getAttrName(),
                      KernelInfoAttr::get(ctx, spec));
      group->setAttr("liger.kernel",
                     SymbolRefAttr::get(kernels.getNameAttr(),
                                        {FlatSymbolRefAttr::get(ctx, name)}));
      ++numKernels;
    };
    for (auto [fn, group] : groups) {
      KernelConfigAttr selectedFallback;
      FailureOr<KernelConfigAttr> config = getKernelConfig(
          group, *target, matmul->selection(), &selectedFallback);
      if (failed(config))
        return signalPassFailure();
      if (config->getKernelTemplate() == KernelTemplate::attention) {
        FailureOr<AttentionPlan> plan = analyzeAttentionGroup(group);
        if (failed(plan))
          return signalPassFailure();
        std::string name =
            (fn.getName() + "_attention_" + Twine(perFunction[fn.getName()]++))
                .str();
        FailureOr<::liger::runtime::KernelSpec> info =
            buildAttentionKernel(*plan, kernels, name, *config, *target);
        if (succeeded(info)) // else warned: left for a later template
          record(group, name, *info);
        continue;
      }
      if (config->isMatmul()) {
        // The matmul templates (MatmulKernel.cpp).
        FailureOr<MatmulPlan> plan = analyzeMatmulGroup(group);
        FailureOr<MatmulKernelConfig> matmul =
            succeeded(plan) ? readMatmulKernelConfig(group, *config)
                            : FailureOr<MatmulKernelConfig>(failure());
        if (failed(matmul))
          return signalPassFailure();
        std::string name =
            (fn.getName() + "_matmul_" + Twine(perFunction[fn.getName()]++))
                .str();
        if (matmul->wgmma && parsePtxVersion(features).value_or(0) < 86) {
          group.emitWarning("left for a later matmul template: the wgmma "
                            "template's TMA copies to shared::cta need PTX "
                            "ISA 8.6 or later (features +ptx86), the target "
                            "has ")
              << features;
          continue;
        }
        FailureOr<::liger::runtime::KernelSpec> info =
            buildMatmulKernel(*plan, kernels, name, *matmul);
        if (failed(info)) // warned: left for a later template
          continue;
        // A loss plan's chunk (liger-plan-loss): few rows, known at launch;
        // a narrow-tile variant beside the kernel where it may fill the GPU
        // better.
        auto bound = fn->getAttrOfType<IntegerAttr>(kChunkRowsAttrName);
        if (bound && bound.getType().isSignlessInteger(64))
          if (std::optional<MatmulKernelConfig> narrow =
                  narrowMatmulKernelConfig(*plan, *matmul, *target,
                                           bound.getInt()))
            addNarrowVariant(*plan, kernels, name, *narrow, *info);
        record(group, name, *info);
        continue;
      }
      std::string name =
          (fn.getName() + "_rowwise_" + Twine(perFunction[fn.getName()]++))
              .str();
      // The group's spill fallback (selectKernelConfig's): recorded where
      // the configuration was chosen here, for liger-compile's check of
      // ptxas's report, and taken instead of the configuration where that
      // check named the kernel.
      if (selectedFallback && !group->hasAttr(kSpillFallbackAttrName))
        group->setAttr(kSpillFallbackAttrName, selectedFallback);
      auto fallback =
          group->getAttrOfType<KernelConfigAttr>(kSpillFallbackAttrName);
      if (fallback && llvm::is_contained(spillFallbackKernels, name)) {
        if (failed(verifyKernelConfig(group, fallback, *target)))
          return signalPassFailure();
        config = fallback;
      }
      FailureOr<RowKernelConfig> row = getRowKernelConfig(group, *config);
      if (failed(row))
        return signalPassFailure();
      for (Operation &op : group.getBody().front())
        if (isDivergenceReducedToScalar(op)) {
          op.emitOpError("cannot be lowered to a row kernel: it reduces "
                         "every token to one scalar; a row kernel computes "
                         "the per_token form, which the caller adds up");
          return signalPassFailure();
        }
      FailureOr<::liger::runtime::KernelSpec> info;
      switch (config->getKernelTemplate()) {
      case KernelTemplate::rope:
        info = buildRoPEKernel(group, kernels, name);
        break;
      case KernelTemplate::cross_entropy:
        info = buildCrossEntropyKernel(group, kernels, name, *row,
                                       target->maxSharedMemoryBytes);
        break;
      default:
        info = buildRowKernel(group, kernels, name, *row,
                              target->maxSharedMemoryBytes);
        break;
      }
      if (failed(info))
        return signalPassFailure();
      record(group, name, *info);
    }
  }
};
} // namespace
