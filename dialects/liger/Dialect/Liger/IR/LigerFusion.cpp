//===- LigerFusion.cpp - liger.fusion: builder and verifier ---------------===//
//
// The fusion-group op. Its region verifier checks that the body is something
// the kernel template named by `kind` implements (LigerFusion.td lists the
// rules); fusion passes rely on it instead of re-checking.
//
//===----------------------------------------------------------------------===//

#include "liger/Dialect/Liger/IR/LigerOps.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::liger;

void FusionOp::build(OpBuilder &builder, OperationState &state, FusionKind kind,
                     TypeRange resultTypes, ValueRange inputs) {
  state.addAttribute(getKindAttrName(state.name),
                     FusionKindAttr::get(builder.getContext(), kind));
  state.addOperands(inputs);
  state.addTypes(resultTypes);
  Region *body = state.addRegion();
  Block *block = new Block();
  for (Value input : inputs)
    block->addArgument(input.getType(), input.getLoc());
  body->push_back(block);
}

YieldOp FusionOp::getYield() {
  return cast<YieldOp>(getBody().front().getTerminator());
}

bool mlir::liger::isRowwiseOp(Operation *op) {
  return isa<RMSNormOp, AddRMSNormOp, LayerNormOp, RoPEOp, RoPEGradOp, SiLUOp,
             GELUOp, SwiGLUOp, GEGLUOp, AddOp, MulOp, SoftmaxOp, CrossEntropyOp,
             CrossEntropyGradOp, KLDivOp, KLDivGradOp, JSDOp, JSDGradOp,
             RMSNormGradOp, LayerNormGradOp, SwiGLUGradOp, GEGLUGradOp,
             SoftmaxGradOp, ScaleOp>(op);
}

bool mlir::liger::isMatmulElementwiseOp(Operation *op) {
  // (The gated activations' gradients: after dx = dy · W_down, they give
  // dgate and dup.)
  return isa<SiLUOp, GELUOp, SwiGLUOp, GEGLUOp, SwiGLUGradOp, GEGLUGradOp,
             AddOp, MulOp>(op);
}

Operation *mlir::liger::getMNMajorWeightTranspose(Value weight) {
  auto t = weight.getDefiningOp<linalg::TransposeOp>();
  if (!t || t.getPermutation() != ArrayRef<int64_t>{1, 0} ||
      !weight.hasOneUse())
    return nullptr;
  auto init = t.getInit().getDefiningOp<tensor::EmptyOp>();
  return init && init->hasOneUse() ? t.getOperation() : nullptr;
}

/// Ops a matmul kernel implements in its epilogue, besides the projections
/// and the norm prologue: the elementwise ones, RoPE and the layout ops.
static bool isMatmulEpilogueOp(Operation *op) {
  return op->hasTrait<OpTrait::ConstantLike>() || isMatmulElementwiseOp(op) ||
         isa<RoPEOp, tensor::ExpandShapeOp, tensor::CollapseShapeOp,
             tensor::EmptyOp, tensor::DimOp, linalg::TransposeOp>(op);
}

/// The activation a projection reads.
static Value getProjectionInput(Operation *op) {
  if (auto linear = dyn_cast<LinearOp>(op))
    return linear.getInput();
  if (auto lora = dyn_cast<LoRALinearOp>(op))
    return lora.getInput();
  return {};
}

LogicalResult FusionOp::verifyRegions() {
  Block &body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError("expects the body to take one argument per input (")
           << getInputs().size() << "), got " << body.getNumArguments();
  for (auto [i, pair] :
       llvm::enumerate(llvm::zip(getInputs(), body.getArguments()))) {
    auto [input, arg] = pair;
    if (input.getType() != arg.getType())
      return emitOpError("expects body argument #")
             << i << " to have the type of input #" << i << " ("
             << input.getType() << "), got " << arg.getType();
  }
  YieldOp yield = getYield();
  if (yield.getValues().getTypes() != getResultTypes())
    return emitOpError("expects 'liger.yield' to return the result types "
                       "of the group");

  StringRef kind = stringifyFusionKind(getKind());
  SmallVector<Operation *> projections;
  SmallVector<Operation *> norms;
  SmallVector<Operation *> gradients; // linear_grad_input / _weight
  int numLosses = 0, numLossGrads = 0, numAttention = 0;
  for (Operation &op : body.without_terminator()) {
    auto reject = [&](StringRef why) {
      return emitOpError("of kind ")
             << kind << " cannot contain '" << op.getName() << "': " << why;
    };
    if (isa<FusionOp>(op))
      return reject("fusion groups do not nest");
    switch (getKind()) {
    case FusionKind::rowwise:
      if (!isRowwiseOp(&op))
        return reject("a rowwise kernel computes row-local ops only (no "
                      "matrix product, no layout change)");
      break;
    case FusionKind::matmul:
      if (isa<LinearOp, LoRALinearOp>(op))
        projections.push_back(&op);
      else if (isa<LinearGradInputOp, LinearGradWeightOp>(op))
        gradients.push_back(&op);
      else if (isa<RMSNormOp>(op))
        norms.push_back(&op);
      else if (!isMatmulEpilogueOp(&op))
        return reject("a matmul kernel takes projections, an RMSNorm "
                      "prologue and an elementwise, RoPE or layout epilogue");
      break;
    case FusionKind::attention:
      if (!isa<AttentionOp, AttentionGradOp>(op))
        return reject("an attention kernel implements one liger.attention "
                      "or one liger.attention_grad");
      ++numAttention;
      break;
    case FusionKind::loss:
      if (isa<FusedLinearCrossEntropyGradOp>(op)) {
        ++numLossGrads;
        break;
      }
      if (!isa<FusedLinearCrossEntropyOp>(op))
        return reject("a loss kernel implements one "
                      "liger.fused_linear_cross_entropy (and its "
                      "liger.fused_linear_cross_entropy_grad)");
      ++numLosses;
      break;
    }
  }
  if (getKind() == FusionKind::attention && numAttention != 1)
    return emitOpError("of kind attention expects exactly one "
                       "'liger.attention' or 'liger.attention_grad', got ")
           << numAttention;
  if (getKind() == FusionKind::loss && numLosses != 1)
    return emitOpError("of kind loss expects exactly one "
                       "'liger.fused_linear_cross_entropy', got ")
           << numLosses;
  if (getKind() == FusionKind::loss && numLossGrads > 1)
    return emitOpError("of kind loss expects at most one "
                       "'liger.fused_linear_cross_entropy_grad', got ")
           << numLossGrads;
  if (getKind() != FusionKind::matmul)
    return success();
  if (!gradients.empty()) {
    // dW = dyᵀ · x alone; dx = dy · W alone or with an elementwise
    // epilogue (never with a projection or a prologue).
    Operation *gradient = gradients.front();
    if (isa<LinearGradWeightOp>(gradient) &&
        (gradients.size() != 1 || body.getOperations().size() != 2))
      return emitOpError("of kind matmul computes a gradient product ('")
             << gradient->getName()
             << "') alone: one op, no prologue or epilogue";
    if (gradients.size() != 1 || !projections.empty() || !norms.empty())
      return emitOpError("of kind matmul computes one gradient product ('")
             << gradient->getName()
             << "') with at most an elementwise epilogue: no other product, "
                "no prologue";
    return success();
  }
  if (projections.empty())
    return emitOpError("of kind matmul expects at least one projection "
                       "('liger.linear' or 'liger.lora_linear') or one "
                       "gradient product");
  Value activation = getProjectionInput(projections.front());
  for (Operation *projection : projections)
    if (getProjectionInput(projection) != activation)
      return emitOpError("of kind matmul expects every projection to read "
                         "the same activation (one GEMM over concatenated "
                         "weights)");
  if (norms.size() > 1)
    return emitOpError("of kind matmul expects at most one RMSNorm "
                       "prologue, got ")
           << norms.size();
  if (!norms.empty()) {
    auto norm = cast<RMSNormOp>(norms.front());
    if (norm.getResult() != activation)
      return emitOpError("of kind matmul expects its RMSNorm to produce the "
                         "activation of the projections");
    if (!isa<BlockArgument>(norm.getInput()))
      return emitOpError("of kind matmul expects its RMSNorm prologue to "
                         "read a group input");
  }
  return success();
}
