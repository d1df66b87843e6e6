//===- Verification.cpp - shape and type rules of liger ops ---------------===//
//
// The single home of the liger dialect's shape and type rules (see
// Verification.h). Messages name the operand, the rule and what was found.
//
//===----------------------------------------------------------------------===//

#include "liger/Dialect/Liger/IR/Verification.h"
#include "liger/Dialect/Liger/IR/LigerKernelAttrs.h"

#include "mlir/IR/Operation.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace mlir::liger;

std::string mlir::liger::formatDim(int64_t size) {
  return ShapedType::isDynamic(size) ? std::string("?") : std::to_string(size);
}

/// Two sizes agree when equal or when either is dynamic (checked at run time).
static bool compatible(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

static bool isSupportedFloat(Type t) {
  return t.isBF16() || t.isF16() || t.isF32();
}

static bool isSupportedInteger(Type t) {
  return t.isSignlessInteger(32) || t.isSignlessInteger(64);
}

LogicalResult mlir::liger::verifyElementTypes(Operation *op) {
  auto check = [&](Type type, StringRef kind, unsigned index) -> LogicalResult {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor)
      return success(); // ODS operand constraints report non-tensors.
    Type element = tensor.getElementType();
    if (isa<FloatType>(element) && !isSupportedFloat(element))
      return op->emitOpError()
             << kind << " #" << index << " has element type " << element
             << "; liger supports bf16, f16 and f32 floats";
    if (isa<IntegerType>(element) && !isSupportedInteger(element))
      return op->emitOpError()
             << kind << " #" << index << " has element type " << element
             << "; liger supports i32 and i64 indices";
    return success();
  };
  for (auto [i, type] : llvm::enumerate(op->getOperandTypes()))
    if (failed(check(type, "operand", i)))
      return failure();
  for (auto [i, type] : llvm::enumerate(op->getResultTypes()))
    if (failed(check(type, "result", i)))
      return failure();
  return success();
}

LogicalResult mlir::liger::verifyDiscardableAttributes(Operation *op) {
  // Inherent attributes are checked by ODS; anything else must carry a
  // dialect prefix ("liger.note"), so a misspelled attribute ("epsilon")
  // is an error instead of being silently ignored.
  for (NamedAttribute attr : op->getDiscardableAttrs())
    if (!attr.getName().getValue().contains('.'))
      return op->emitOpError()
             << "has unknown attribute '" << attr.getName().getValue()
             << "'; extra attributes need a dialect prefix (e.g. 'liger."
             << attr.getName().getValue() << "')";
  return success();
}

LogicalResult LigerDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == KernelConfigAttr::getAttrName() &&
      !isa<KernelConfigAttr>(attr.getValue()))
    return op->emitOpError("expects '")
           << name << "' to be a #liger.kernel_config, got "
           << attr.getValue();
  if (name == KernelInfoAttr::getAttrName() &&
      !isa<KernelInfoAttr>(attr.getValue()))
    return op->emitOpError("expects '")
           << name << "' to be a #liger.kernel_info, got " << attr.getValue();
  return success();
}

static FailureOr<RankedTensorType> ranked(const RuleContext &ctx, Type type,
                                          StringRef name) {
  auto tensor = dyn_cast_or_null<RankedTensorType>(type);
  if (!tensor)
    return ctx.fail("expects '", name, "' to be a ranked tensor, got ", type);
  return tensor;
}

FailureOr<RankedTensorType>
mlir::liger::verifyHiddenOperand(const RuleContext &ctx, Type type,
                                 StringRef name) {
  FailureOr<RankedTensorType> tensor = ranked(ctx, type, name);
  if (failed(tensor))
    return failure();
  if (tensor->getRank() < 1)
    return ctx.fail("expects '", name, "' to have rank >= 1, got ", type);
  if (tensor->isDynamicDim(tensor->getRank() - 1))
    return ctx.fail("expects the last (hidden) dimension of '", name,
                    "' to be static, got ", type);
  return tensor;
}

FailureOr<RankedTensorType> mlir::liger::verifyRank(const RuleContext &ctx,
                                                    Type type, StringRef name,
                                                    int64_t rank,
                                                    StringRef layout) {
  FailureOr<RankedTensorType> tensor = ranked(ctx, type, name);
  if (failed(tensor))
    return failure();
  if (tensor->getRank() != rank)
    return ctx.fail("expects '", name, "' to have rank ", rank, " (", layout,
                    "), got ", type);
  return tensor;
}

LogicalResult mlir::liger::verifyFeatureVector(const RuleContext &ctx,
                                               Type type, StringRef name,
                                               int64_t size, StringRef what) {
  FailureOr<RankedTensorType> tensor = ranked(ctx, type, name);
  if (failed(tensor))
    return failure();
  if (tensor->getRank() != 1 || tensor->getDimSize(0) != size)
    return ctx.fail("expects '", name, "' to have shape [", size, "] (", what,
                    "), got ", type);
  return success();
}

RankedTensorType mlir::liger::getRowStatsType(RankedTensorType input) {
  return RankedTensorType::get(input.getShape().drop_back(),
                               Float32Type::get(input.getContext()));
}

LogicalResult mlir::liger::verifyRoPEOperands(const RuleContext &ctx, Type q,
                                              Type k, Type cos, StringRef qName,
                                              StringRef kName) {
  constexpr StringLiteral qkLayout = "[batch, heads, seq, head_dim]";
  FailureOr<RankedTensorType> qT = verifyRank(ctx, q, qName, 4, qkLayout);
  if (failed(qT))
    return failure();
  FailureOr<RankedTensorType> kT = verifyRank(ctx, k, kName, 4, qkLayout);
  if (failed(kT))
    return failure();
  FailureOr<RankedTensorType> cT =
      verifyRank(ctx, cos, "cos", 3, "[batch or 1, seq, head_dim]");
  if (failed(cT))
    return failure();

  for (auto [t, name] : {std::pair{*qT, qName}, std::pair{*kT, kName}}) {
    if (t.isDynamicDim(1))
      return ctx.fail("expects the head count (dimension 1) of '", name,
                      "' to be static, got ", Type(t));
    int64_t d = t.getDimSize(3);
    if (ShapedType::isDynamic(d) || d % 2 != 0)
      return ctx.fail("expects the head dimension (dimension 3) of '", name,
                      "' to be static and even, got ", Type(t));
  }
  static constexpr StringLiteral dimNames[] = {"batch", "heads", "seq",
                                               "head_dim"};
  for (int64_t dim : {0, 2, 3})
    if (!compatible(qT->getDimSize(dim), kT->getDimSize(dim)))
      return ctx.fail("expects '", kName, "' to match '", qName,
                      "' in dimension ", dim, " (", dimNames[dim],
                      "): ", formatDim(kT->getDimSize(dim)), " vs ",
                      formatDim(qT->getDimSize(dim)));
  int64_t cosBatch = cT->getDimSize(0);
  if (!ShapedType::isDynamic(cosBatch) && cosBatch != 1 &&
      !compatible(cosBatch, qT->getDimSize(0)))
    return ctx.fail("expects dimension 0 of 'cos' to be 1 or the batch size "
                    "of '",
                    qName, "' (", formatDim(qT->getDimSize(0)), "), got ",
                    cosBatch);
  if (!compatible(cT->getDimSize(1), qT->getDimSize(2)))
    return ctx.fail("expects dimension 1 of 'cos' to be the sequence length "
                    "of '",
                    qName, "' (", formatDim(qT->getDimSize(2)), "), got ",
                    formatDim(cT->getDimSize(1)));
  if (cT->getDimSize(2) != qT->getDimSize(3))
    return ctx.fail(
        "expects dimension 2 of 'cos' to be the head dimension of '", qName,
        "' (", qT->getDimSize(3), "), got ", formatDim(cT->getDimSize(2)));
  return success();
}

/// A [rows, cols] weight with static sizes.
static FailureOr<RankedTensorType> verifyMatrix(const RuleContext &ctx,
                                                Type type, StringRef name,
                                                StringRef layout) {
  FailureOr<RankedTensorType> tensor = verifyRank(ctx, type, name, 2, layout);
  if (failed(tensor))
    return failure();
  if (!tensor->hasStaticShape())
    return ctx.fail("expects '", name, "' to have a static shape, got ", type);
  return tensor;
}

FailureOr<RankedTensorType> mlir::liger::inferLinearType(const RuleContext &ctx,
                                                         Type input,
                                                         Type weight, Type bias,
                                                         Type loraA, Type loraB,
                                                         StringRef inputName) {
  FailureOr<RankedTensorType> x = verifyHiddenOperand(ctx, input, inputName);
  if (failed(x))
    return failure();
  FailureOr<RankedTensorType> w =
      verifyMatrix(ctx, weight, "weight", "[out_features, in_features]");
  if (failed(w))
    return failure();
  int64_t k = x->getShape().back();
  int64_t n = w->getDimSize(0);
  if (w->getDimSize(1) != k)
    return ctx.fail("expects dimension 1 (in_features) of 'weight' to be ", k,
                    " (the last dimension of '", inputName, "'), got ",
                    w->getDimSize(1));
  if (loraA || loraB) {
    FailureOr<RankedTensorType> a =
        verifyMatrix(ctx, loraA, "lora_a", "[rank, in_features]");
    if (failed(a))
      return failure();
    FailureOr<RankedTensorType> b =
        verifyMatrix(ctx, loraB, "lora_b", "[out_features, rank]");
    if (failed(b))
      return failure();
    int64_t r = a->getDimSize(0);
    if (r < 1)
      return ctx.fail("expects the rank (dimension 0) of 'lora_a' to be >= 1, "
                      "got ",
                      r);
    if (a->getDimSize(1) != k)
      return ctx.fail("expects dimension 1 of 'lora_a' to be ", k,
                      " (the last dimension of '", inputName, "'), got ",
                      a->getDimSize(1));
    if (b->getDimSize(0) != n || b->getDimSize(1) != r)
      return ctx.fail("expects 'lora_b' to have shape [", n, ", ", r,
                      "] ([out_features, rank]), got ", loraB);
  }
  if (bias) {
    if (failed(verifyFeatureVector(ctx, bias, "bias", n, "out_features")))
      return failure();
    Type biasElement = cast<RankedTensorType>(bias).getElementType();
    if (biasElement != x->getElementType())
      return ctx.fail("expects 'bias' to have the element type of '", inputName,
                      "' (", x->getElementType(), "), got ", biasElement);
  }
  SmallVector<int64_t> shape(x->getShape());
  shape.back() = n;
  return RankedTensorType::get(shape, x->getElementType());
}

FailureOr<RankedTensorType>
mlir::liger::inferLinearGradInputType(const RuleContext &ctx, Type grad,
                                      Type weight) {
  FailureOr<RankedTensorType> dy = verifyHiddenOperand(ctx, grad, "grad");
  if (failed(dy))
    return failure();
  FailureOr<RankedTensorType> w =
      verifyMatrix(ctx, weight, "weight", "[out_features, in_features]");
  if (failed(w))
    return failure();
  if (w->getDimSize(0) != dy->getShape().back())
    return ctx.fail("expects dimension 0 (out_features) of 'weight' to be ",
                    dy->getShape().back(), " (the last dimension of 'grad'), "
                    "got ", w->getDimSize(0));
  SmallVector<int64_t> shape(dy->getShape());
  shape.back() = w->getDimSize(1);
  return RankedTensorType::get(shape, dy->getElementType());
}

FailureOr<RankedTensorType>
mlir::liger::inferLinearGradWeightType(const RuleContext &ctx, Type grad,
                                       Type input, Type accumulate) {
  FailureOr<RankedTensorType> dy =
      verifyTokenMatrix(ctx, grad, "grad", "[tokens, out_features]");
  if (failed(dy))
    return failure();
  FailureOr<RankedTensorType> x =
      verifyTokenMatrix(ctx, input, "input", "[tokens, in_features]");
  if (failed(x))
    return failure();
  if (!compatible(dy->getDimSize(0), x->getDimSize(0)))
    return ctx.fail("expects 'grad' and 'input' to have the same tokens, got ",
                    formatDim(dy->getDimSize(0)), " and ",
                    formatDim(x->getDimSize(0)));
  auto dw = RankedTensorType::get({dy->getDimSize(1), x->getDimSize(1)},
                                  x->getElementType());
  if (!accumulate)
    return dw;
  // A buffer of the input's dtype (the sum rounded once per accumulation)
  // or an f32 one.
  if (accumulate == Type(dw))
    return dw;
  auto f32 = RankedTensorType::get(dw.getShape(),
                                   Float32Type::get(grad.getContext()));
  if (failed(verifyMatchesType(ctx, accumulate, "accumulate", f32,
                               "an f32 [out_features, in_features] buffer, "
                               "or one of the input's dtype")))
    return failure();
  return f32;
}

FailureOr<RankedTensorType>
mlir::liger::verifyTokenMatrix(const RuleContext &ctx, Type type,
                               StringRef name, StringRef layout) {
  FailureOr<RankedTensorType> tensor = verifyRank(ctx, type, name, 2, layout);
  if (failed(tensor))
    return failure();
  if (tensor->isDynamicDim(1))
    return ctx.fail("expects dimension 1 of '", name, "' to be static, got ",
                    type);
  return tensor;
}

LogicalResult mlir::liger::verifyMatchesType(const RuleContext &ctx, Type type,
                                             StringRef name,
                                             RankedTensorType expected,
                                             StringRef what) {
  auto tensor = dyn_cast_or_null<RankedTensorType>(type);
  if (!tensor || tensor.getElementType() != expected.getElementType() ||
      failed(verifyCompatibleShape(tensor.getShape(), expected.getShape())))
    return ctx.fail("expects '", name, "' to be ", Type(expected), " (", what,
                    "), got ", type);
  return success();
}

LogicalResult mlir::liger::verifyCrossEntropyOperands(const RuleContext &ctx,
                                                      RankedTensorType logits,
                                                      Type target,
                                                      Type classWeight,
                                                      IntegerAttr ignoreIndex,
                                                      StringRef weightName) {
  FailureOr<RankedTensorType> t =
      verifyRank(ctx, target, "target", 1, "[tokens]");
  if (failed(t) || failed(verifyIgnoreIndex(ctx, *t, "target", ignoreIndex)))
    return failure();
  if (!compatible(t->getDimSize(0), logits.getDimSize(0)))
    return ctx.fail("expects 'target' to have one entry per token (",
                    formatDim(logits.getDimSize(0)), "), got ",
                    formatDim(t->getDimSize(0)));
  if (classWeight &&
      failed(verifyFeatureVector(ctx, classWeight, weightName,
                                 logits.getDimSize(1), "one weight per class")))
    return failure();
  return success();
}

LogicalResult mlir::liger::verifyIgnoreIndex(const RuleContext &ctx,
                                             Type labels, StringRef labelsName,
                                             IntegerAttr ignoreIndex) {
  auto element =
      dyn_cast<IntegerType>(cast<ShapedType>(labels).getElementType());
  if (!ignoreIndex || !element || element.getWidth() >= 64)
    return success();
  unsigned width = element.getWidth();
  int64_t value = ignoreIndex.getInt();
  int64_t lo = llvm::minIntN(width), hi = llvm::maxIntN(width);
  if (value >= lo && value <= hi)
    return success();
  std::string type;
  llvm::raw_string_ostream(type) << element;
  return ctx.fail("expects 'ignore_index' to fit the ", type, " labels of '",
                  labelsName, "' (in [", lo, ", ", hi,
                  "]: they are compared with it in that type), got ", value);
}

RankedTensorType mlir::liger::getLossType(MLIRContext *context,
                                          Reduction reduction, int64_t tokens) {
  Type f32 = Float32Type::get(context);
  if (reduction == Reduction::none)
    return RankedTensorType::get({tokens}, f32);
  return RankedTensorType::get({}, f32);
}

FailureOr<RankedTensorType>
mlir::liger::inferAttentionType(const RuleContext &ctx, Type q, Type k,
                                Type v) {
  constexpr StringLiteral layout = "[batch, heads, seq, head_dim]";
  FailureOr<RankedTensorType> qT = verifyRank(ctx, q, "q", 4, layout);
  if (failed(qT))
    return failure();
  FailureOr<RankedTensorType> kT = verifyRank(ctx, k, "k", 4, layout);
  if (failed(kT))
    return failure();
  FailureOr<RankedTensorType> vT = verifyRank(ctx, v, "v", 4, layout);
  if (failed(vT))
    return failure();
  for (auto [t, name] :
       {std::pair{*qT, "q"}, std::pair{*kT, "k"}, std::pair{*vT, "v"}}) {
    if (t.isDynamicDim(1) || t.isDynamicDim(3))
      return ctx.fail("expects the head count and head dimension of '", name,
                      "' to be static, got ", Type(t));
    if (t.getDimSize(1) < 1 || t.getDimSize(3) < 1)
      return ctx.fail("expects at least one head and one head dimension in '",
                      name, "', got ", Type(t));
  }
  int64_t hq = qT->getDimSize(1), hkv = kT->getDimSize(1);
  if (hq % hkv != 0)
    return ctx.fail("expects the head count of 'q' (", hq,
                    ") to be a multiple of that of 'k' (", hkv, ")");
  if (vT->getDimSize(1) != hkv)
    return ctx.fail("expects 'v' to have the head count of 'k' (", hkv,
                    "), got ", vT->getDimSize(1));
  if (kT->getDimSize(3) != qT->getDimSize(3))
    return ctx.fail("expects 'k' to have the head dimension of 'q' (",
                    qT->getDimSize(3), "), got ", kT->getDimSize(3));
  if (!compatible(kT->getDimSize(2), vT->getDimSize(2)))
    return ctx.fail("expects 'v' to have the sequence length of 'k' (",
                    formatDim(kT->getDimSize(2)), "), got ",
                    formatDim(vT->getDimSize(2)));
  for (auto [t, name] : {std::pair{*kT, "k"}, std::pair{*vT, "v"}})
    if (!compatible(t.getDimSize(0), qT->getDimSize(0)))
      return ctx.fail("expects '", name, "' to have the batch size of 'q' (",
                      formatDim(qT->getDimSize(0)), "), got ",
                      formatDim(t.getDimSize(0)));
  return RankedTensorType::get(
      {qT->getDimSize(0), hq, qT->getDimSize(2), vT->getDimSize(3)},
      qT->getElementType());
}

LogicalResult
mlir::liger::verifyAttentionWindow(const RuleContext &ctx, bool causal,
                                   std::optional<int64_t> window) {
  if (window && !causal)
    return ctx.fail("expects 'causal' with 'window' (a sliding window bounds "
                    "the keys below each query's diagonal), got window = ",
                    *window, " without it");
  return success();
}

LogicalResult mlir::liger::verifyAttentionSaved(const RuleContext &ctx,
                                                RankedTensorType expected,
                                                Type grad, Type out, Type lse) {
  if (!out && !lse)
    return success();
  if (!out || !lse)
    return ctx.fail("expects the saved 'out' and 'lse' together (the "
                    "forward's output and log-sum-exp), got only '",
                    out ? "out" : "lse", "'");
  if (out != grad)
    return ctx.fail("expects 'out' to have the type of 'grad' (", grad,
                    "), got ", out);
  // The rows of the output, each size static where q's or grad's is.
  SmallVector<int64_t> rows(expected.getShape().drop_back());
  for (auto [size, fromGrad] :
       llvm::zip(rows, cast<RankedTensorType>(grad).getShape()))
    if (ShapedType::isDynamic(size))
      size = fromGrad;
  return verifyMatchesType(
      ctx, lse, "lse",
      RankedTensorType::get(rows, Float32Type::get(grad.getContext())),
      "the forward's log-sum-exp: f32 [batch, heads, seq] of 'q'");
}
