//===- PlanLoss.cpp - the liger-plan-loss pass ----------------------------===//
//
// Plans each lm_head loss group (liger.fused_linear_cross_entropy and its
// gradient) as chunked kernels: the functions of one chunk of tokens are
// written beside the group's function, and the group records the plan
// (`liger.plan`: the chunk size under a memory budget and those functions)
// for liger-compile's manifest and a runtime's chunk loop.
//
//===----------------------------------------------------------------------===//

#include "liger/Transforms/Fusion.h"
#include "liger/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Parser/Parser.h"

#include "llvm/Support/Format.h"

namespace mlir::liger {
#define GEN_PASS_DEF_PLANLOSSPASS
#include "liger/Transforms/Passes.h.inc"
} // namespace mlir::liger

using namespace mlir;
using namespace mlir::liger;

namespace {
/// Rows of one chunk: at least one, whole 128-row matmul tiles from 128 on
/// (liger.ops.fused_linear_cross_entropy_plan's rule); 0 when the budget
/// holds no row.
int64_t chunkRows(int64_t budget, int64_t rowBytes) {
  int64_t rows = budget / rowBytes;
  if (rows >= 128)
    rows -= rows % 128;
  return rows;
}

std::string printed(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  type.print(os);
  return text;
}

std::string scientific(double value) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::format("%.9e", value);
  return text;
}

/// The functions of one chunk (liger.ops.fused_linear_cross_entropy runs
/// these, compiled from its two lm_head ops): the logits of rows of x (plus
/// the bias, which the logits function then takes after W), their summed
/// loss and gradient for an incoming gradient %g (the mean's denominator
/// goes there) — for `reduction = none` each row's loss and the gradient for
/// each row's incoming gradient, both `[rows]`; with `z_loss` the z-loss
/// term apart too, after the loss —, and with the backward dx, the first
/// chunk's dW and the accumulating dW (or, `dwF32`, the f32 accumulation
/// alone). The bias's gradient, the column sums of the chunk's G, has no
/// function: the caller adds them up over the G it holds.
std::string chunkFunctions(StringRef base, FusedLinearCrossEntropyOp fwd,
                           bool backward, bool dwF32) {
  auto weight = cast<RankedTensorType>(fwd.getWeight().getType());
  std::string dt = printed(weight.getElementType());
  std::string x =
      "tensor<?x" + std::to_string(weight.getDimSize(1)) + "x" + dt + ">";
  std::string w = printed(weight);
  std::string z =
      "tensor<?x" + std::to_string(weight.getDimSize(0)) + "x" + dt + ">";
  std::string t = printed(fwd.getTarget().getType());
  bool perToken = fwd.getReduction() == Reduction::none;
  // The chunk's loss and its incoming gradient: a scalar, or one per row.
  std::string l = perToken ? "tensor<?xf32>" : "tensor<f32>";
  std::string attrs = "ignore_index = " + std::to_string(fwd.getIgnoreIndex()) +
                      " label_smoothing = " +
                      scientific(fwd.getLabelSmoothing().convertToDouble()) +
                      (perToken ? " reduction = none" : " reduction = sum");
  if (std::optional<APFloat> cap = fwd.getSoftcap())
    attrs += " softcap = " + scientific(cap->convertToDouble());
  attrs += " lse_square_scale = " +
           scientific(fwd.getLseSquareScale().convertToDouble());
  // Class weights: a parameter of the loss function before %g, read by both
  // ops.
  std::string cwParam, cwUse;
  if (Value cw = fwd.getClassWeight()) {
    std::string type = printed(cw.getType());
    cwParam = ", %cw: " + type;
    cwUse = " weight(%cw : " + type + ")";
  }
  // The bias: a parameter of the logits function after W, added by the
  // matmul's epilogue.
  std::string biasParam, biasUse;
  if (Value bias = fwd.getBias()) {
    std::string type = printed(bias.getType());
    biasParam = ", %b: " + type;
    biasUse = ", %b";
    biasUse += " : " + x + ", " + w + ", " + type;
  } else {
    biasUse = " : " + x + ", " + w;
  }
  // The z-loss term apart: a second result of the loss function.
  bool zLoss = fwd.getReturnZLoss();
  std::string zValue = zLoss ? ", %zl" : "", zType = zLoss ? ", " + l : "";
  std::string b = base.str();
  std::string text =
      "func.func @" + b + "_logits(%x: " + x + ", %w: " + w + biasParam +
      ") -> " + z + " {\n  %z = liger.linear %x, %w" + biasUse +
      "\n  return %z : " + z + "\n}\n" + "func.func @" + b + "_ce(%z: " + z +
      ", %t: " + t + cwParam + ", %g: " + l + ") -> (" + l + zType + ", " + z +
      ") {\n" + "  %l" + zValue + " = liger.cross_entropy %z, %t" + cwUse +
      " " + attrs + (zLoss ? " z_loss" : "") + " : " + z + ", " + t +
      "\n  %d = liger.cross_entropy_grad %z, %t, %g" + cwUse + " " + attrs +
      " : " + z + ", " + t + ", " + l + "\n  return %l" + zValue + ", %d : " +
      l + zType + ", " + z + "\n}\n";
  if (!backward)
    return text;
  text += "func.func @" + b + "_dx(%d: " + z + ", %w: " + w + ") -> " + x +
          " {\n  %dx = liger.linear_grad_input %d, %w : " + z + ", " + w +
          "\n  return %dx : " + x + "\n}\n";
  if (!dwF32)
    text += "func.func @" + b + "_dw0(%d: " + z + ", %x: " + x + ") -> " + w +
            " {\n  %dw = liger.linear_grad_weight %d, %x : " + z + ", " + x +
            "\n  return %dw : " + w + "\n}\n";
  // The accumulator: W's type, or f32 of W's shape.
  std::string acc = dwF32 ? "tensor<" + std::to_string(weight.getDimSize(0)) +
                                "x" + std::to_string(weight.getDimSize(1)) +
                                "xf32>"
                          : w;
  return text + "func.func @" + b + "_dw(%d: " + z + ", %x: " + x +
         ", %acc: " + acc + ") -> " + acc +
         " {\n  %dw = liger.linear_grad_weight %d, %x accumulate %acc : " + z +
         ", " + x + ", " + acc + "\n  return %dw : " + acc + "\n}\n";
}

struct PlanLossPass : liger::impl::PlanLossPassBase<PlanLossPass> {
  using Base::Base;

  /// Why `group` cannot be planned, or "" (and its ops).
  std::string check(FusionOp group, FusedLinearCrossEntropyOp &fwd,
                    FusedLinearCrossEntropyGradOp &bwd) {
    for (Operation &op : group.getBody().front()) {
      if (auto f = dyn_cast<FusedLinearCrossEntropyOp>(op); f && !fwd)
        fwd = f;
      else if (auto g = dyn_cast<FusedLinearCrossEntropyGradOp>(op); g && !bwd)
        bwd = g;
      else if (!isa<YieldOp>(op))
        return "it holds '" + op.getName().getStringRef().str() +
               "' beside a fused linear cross-entropy and its gradient";
    }
    if (!fwd)
      return "it has no liger.fused_linear_cross_entropy";
    Type elem =
        cast<RankedTensorType>(fwd.getWeight().getType()).getElementType();
    if (!elem.isBF16() && !elem.isF16())
      return "its matmul kernels take bf16 or f16, not " + printed(elem);
    if (fwd.getClassWeight() && fwd.getLseSquareScale().isNonZero() &&
        fwd.getReduction() == Reduction::mean)
      return "class weights with a z-loss and reduction = mean divide the "
             "two terms by different totals (a chunk's one incoming-gradient "
             "scale cannot)";
    if (bwd) {
      if (bwd.getHidden() != fwd.getHidden() ||
          bwd.getWeight() != fwd.getWeight() ||
          bwd.getTarget() != fwd.getTarget() ||
          bwd.getBias() != fwd.getBias() ||
          bwd.getClassWeight() != fwd.getClassWeight())
        return "the gradient is not of the loss in the group (other "
               "operands)";
      if (StringRef attr = differingLossAttribute(fwd, bwd); !attr.empty())
        return ("the gradient's " + attr + " differs from the loss's").str();
    }
    return "";
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<std::pair<func::FuncOp, FusionOp>> groups;
    module.walk([&](func::FuncOp fn) {
      fn.walk([&](FusionOp group) {
        if (group.getKind() == FusionKind::loss &&
            !group->hasAttr("liger.plan"))
          groups.push_back({fn, group});
      });
    });
    llvm::StringMap<int> perFunction;
    MLIRContext *ctx = &getContext();
    for (auto [fn, group] : groups) {
      FusedLinearCrossEntropyOp fwd;
      FusedLinearCrossEntropyGradOp bwd;
      std::string why = check(group, fwd, bwd);
      auto weight = fwd ? cast<RankedTensorType>(fwd.getWeight().getType())
                        : RankedTensorType();
      int64_t rows = 0;
      if (why.empty()) {
        int64_t rowBytes =
            weight.getDimSize(0) *
            std::max<int64_t>(1, weight.getElementTypeBitWidth() / 8);
        rows = chunkRows(memoryBudget, rowBytes);
        if (rows < 1)
          why = "memory-budget=" + std::to_string(memoryBudget) +
                " holds no row of logits (" + std::to_string(rowBytes) +
                " bytes)";
      }
      if (!why.empty()) {
        group.emitWarning() << "liger-plan-loss: left for later: " << why;
        continue;
      }
      std::string base =
          (fn.getSymName() + "_loss" + Twine(perFunction[fn.getSymName()]++))
              .str();
      std::string text = chunkFunctions(base, fwd, bool(bwd), dwF32);
      OwningOpRef<ModuleOp> parsed = parseSourceString<ModuleOp>(text, ctx);
      if (!parsed) {
        group.emitError() << "liger-plan-loss: internal error: the chunk "
                             "functions do not parse:\n"
                          << text;
        return signalPassFailure();
      }
      NamedAttrList plan;
      plan.append("chunk_tokens",
                  IntegerAttr::get(IntegerType::get(ctx, 64), rows));
      plan.append("memory_budget",
                  IntegerAttr::get(IntegerType::get(ctx, 64), memoryBudget));
      plan.append("mean",
                  BoolAttr::get(ctx, fwd.getReduction() == Reduction::mean));
      plan.append("ignore_index", fwd.getIgnoreIndexAttr());
      plan.append("class_weight",
                  BoolAttr::get(ctx, fwd.getClassWeight() != nullptr));
      if (bwd)
        plan.append("dw_f32", BoolAttr::get(ctx, dwF32));
      for (func::FuncOp f :
           llvm::make_early_inc_range(parsed->getOps<func::FuncOp>())) {
        if (module.lookupSymbol(f.getSymName())) {
          group.emitError() << "liger-plan-loss: '@" << f.getSymName()
                            << "' already exists in the module";
          return signalPassFailure();
        }
        StringRef stage = f.getSymName().drop_front(base.size() + 1);
        plan.append(stage, FlatSymbolRefAttr::get(f.getSymNameAttr()));
        // Its launches have at most a chunk's rows (liger-lower-to-gpu may
        // give its kernels a narrow-tile variant).
        f->setAttr(kChunkRowsAttrName,
                   IntegerAttr::get(IntegerType::get(ctx, 64), rows));
        f->remove();
        module.push_back(f);
      }
      group->setAttr("liger.plan", plan.getDictionary(ctx));
      ++numPlanned;
    }
  }
};
} // namespace
