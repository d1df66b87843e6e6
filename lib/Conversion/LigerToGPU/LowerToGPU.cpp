//===- LowerToGPU.cpp - the liger-lower-to-gpu pass -----------------------===//
//
// Wraps rowwise ops outside groups (wrap-ops), then builds one kernel per
// rowwise group into gpu.module @liger_kernels (RowKernel.cpp) and records
// each kernel's launch information for the bundle writer.
//
//===----------------------------------------------------------------------===//

#include "liger/Conversion/LigerToGPU/MatmulKernel.h"
#include "liger/Conversion/LigerToGPU/RowKernel.h"
#include "liger/Conversion/Passes.h"
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

static StringRef stringifyParamKind(RowParamKind kind) {
  switch (kind) {
  case RowParamKind::Rows:
    return "rows";
  case RowParamKind::RowScalars:
    return "row_scalars";
  case RowParamKind::Feature:
    return "feature";
  case RowParamKind::Scalar:
    return "scalar";
  case RowParamKind::Heads:
    return "heads";
  case RowParamKind::Tables:
    return "tables";
  case RowParamKind::Partials:
    return "partials";
  case RowParamKind::Matrix:
    return "matrix";
  }
  llvm_unreachable("unknown kind");
}

/// The kernel's launch information as an attribute the bundle writer reads.
static DictionaryAttr getKernelInfoAttr(OpBuilder &b,
                                        const RowKernelInfo &info) {
  SmallVector<Attribute> params;
  for (const RowKernelParam &p : info.params)
    params.push_back(b.getDictionaryAttr({
        b.getNamedAttr("name", b.getStringAttr(p.name)),
        b.getNamedAttr("role", b.getStringAttr(p.isWorkspace ? "workspace"
                                               : p.isOutput  ? "output"
                                                             : "input")),
        b.getNamedAttr("kind", b.getStringAttr(stringifyParamKind(p.kind))),
        b.getNamedAttr("dtype", TypeAttr::get(p.elementType)),
        b.getNamedAttr("length", b.getI64IntegerAttr(p.hidden)),
        b.getNamedAttr("heads", b.getI64IntegerAttr(p.heads)),
    }));
  SmallVector<NamedAttribute> finish;
  if (!info.finishName.empty())
    finish = {
        b.getNamedAttr("finish",
                       b.getDictionaryAttr({
                           b.getNamedAttr("name",
                                          b.getStringAttr(info.finishName)),
                           b.getNamedAttr("grid", b.getI64IntegerAttr(
                                                      info.finishGrid)),
                           b.getNamedAttr("threads", b.getI64IntegerAttr(
                                                         info.finishThreads)),
                           b.getNamedAttr("shared_memory_bytes",
                                          b.getI64IntegerAttr(
                                              info.finishSharedMemoryBytes)),
                       })),
        b.getNamedAttr("ctas_per_sm", b.getI64IntegerAttr(info.ctasPerSm))};
  if (!info.tensorMaps.empty()) {
    SmallVector<Attribute> maps;
    for (const ::liger::runtime::KernelTensorMap &m : info.tensorMaps)
      maps.push_back(b.getDictionaryAttr({
          b.getNamedAttr("param", b.getI64IntegerAttr(m.param)),
          b.getNamedAttr("box", b.getDenseI64ArrayAttr({m.boxRows, m.boxCols})),
          b.getNamedAttr("swizzle", b.getI64IntegerAttr(
                                        ::liger::runtime::swizzleBytes(m.swizzle))),
      }));
    finish.push_back(b.getNamedAttr("tensor_maps", b.getArrayAttr(maps)));
  }
  return b.getDictionaryAttr(llvm::to_vector(llvm::concat<NamedAttribute>(
      finish, SmallVector<NamedAttribute>{
      b.getNamedAttr("template",
                     b.getStringAttr(!info.templateName.empty()
                                         ? StringRef(info.templateName)
                                     : info.grid == "tokens" ? "rope"
                                                             : "rowwise")),
      b.getNamedAttr(
          "grid",
          info.gridDims.empty()
              ? Attribute(b.getStringAttr(info.grid))
              : Attribute(b.getArrayAttr(llvm::to_vector(llvm::map_range(
                    info.gridDims,
                    [&](const std::string &d) -> Attribute {
                      return b.getStringAttr(d);
                    }))))),
      b.getNamedAttr("threads", b.getI64IntegerAttr(info.config.threads)),
      b.getNamedAttr("vector_width",
                     b.getI64IntegerAttr(info.config.vectorWidth)),
      b.getNamedAttr("hidden", b.getI64IntegerAttr(info.hidden)),
      b.getNamedAttr("shared_memory_bytes",
                     b.getI64IntegerAttr(info.sharedMemoryBytes)),
      b.getNamedAttr("ops", b.getStringAttr(info.opChain)),
      b.getNamedAttr("params", b.getArrayAttr(params)),
  })));
}

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

/// Ops outside groups that become matmul kernels of one op: projections
/// and the gradient products.
static bool isMatmulOp(Operation *op) {
  return isa<LinearOp, LinearGradInputOp, LinearGradWeightOp>(op);
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

    // Rowwise ops outside groups become groups of one.
    IRRewriter rewriter(ctx);
    if (wrapOps) {
      SmallVector<Operation *> singles;
      module.walk([&](Operation *op) {
        if ((isRowwiseOp(op) || (matmulKernels && isMatmulOp(op))) &&
            !isInFusionGroup(op))
          singles.push_back(op);
      });
      for (Operation *op : singles) {
        std::string whyNot;
        FusionKind kind =
            isMatmulOp(op) ? FusionKind::matmul : FusionKind::rowwise;
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
    std::optional<GpuTargetInfo> target = lookupGpuTarget(chip);
    // The kernel `name` built for `group`: its launch information, and the
    // group's reference to it.
    auto record = [&](FusionOp group, StringRef name,
                      const RowKernelInfo &info) {
      auto kernel = kernels.lookupSymbol<gpu::GPUFuncOp>(name);
      kernel->setAttr("liger.kernel_info", getKernelInfoAttr(b, info));
      group->setAttr("liger.kernel",
                     SymbolRefAttr::get(kernels.getNameAttr(),
                                        {FlatSymbolRefAttr::get(ctx, name)}));
      ++numKernels;
    };
    for (auto [fn, group] : groups) {
      if (group.getKind() == FusionKind::matmul) {
        // The experimental matmul template (MatmulKernel.cpp).
        FailureOr<MatmulPlan> plan = analyzeMatmulGroup(group);
        if (failed(plan))
          return signalPassFailure();
        auto dict = group->getAttrOfType<DictionaryAttr>("liger.kernel_config");
        FailureOr<MatmulKernelConfig> config =
            dict ? readMatmulKernelConfig(group, dict)
                 : FailureOr<MatmulKernelConfig>(
                       selectMatmulKernelConfig(*plan, *target));
        if (failed(config) ||
            failed(verifyMatmulKernelConfig(*config, *plan, *target)))
          return signalPassFailure();
        std::string name =
            (fn.getName() + "_matmul_" + Twine(perFunction[fn.getName()]++))
                .str();
        if (config->wgmma && parsePtxVersion(features).value_or(0) < 86) {
          group.emitWarning("left for a later matmul template: the wgmma "
                            "template's TMA copies to shared::cta need PTX "
                            "ISA 8.6 or later (features +ptx86), the target "
                            "has ")
              << features;
          continue;
        }
        FailureOr<RowKernelInfo> info =
            buildMatmulKernel(*plan, kernels, name, *config);
        if (succeeded(info)) // else warned: left for a later template
          record(group, name, *info);
        continue;
      }
      FailureOr<RowKernelConfig> config = getRowKernelConfig(group);
      if (failed(config))
        return signalPassFailure();
      std::string name =
          (fn.getName() + "_rowwise_" + Twine(perFunction[fn.getName()]++))
              .str();
      Operation &first = group.getBody().front().front();
      for (Operation &op : group.getBody().front())
        if (isDivergenceReducedToScalar(op)) {
          op.emitOpError("cannot be lowered to a row kernel: it reduces "
                         "every token to one scalar; a row kernel computes "
                         "the per_token form, which the caller adds up");
          return signalPassFailure();
        }
      FailureOr<RowKernelInfo> info =
          isa<RoPEOp, RoPEGradOp>(first)
              ? buildRoPEKernel(group, kernels, name)
          : isa<CrossEntropyOp, CrossEntropyGradOp>(first)
              ? buildCrossEntropyKernel(group, kernels, name, *config,
                                        target->maxSharedMemoryBytes)
              : buildRowKernel(group, kernels, name, *config);
      if (failed(info))
        return signalPassFailure();
      record(group, name, *info);
    }
  }
};
} // namespace
