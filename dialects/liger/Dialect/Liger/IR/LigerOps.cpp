//===- LigerOps.cpp - liger op result-type inference ----------------------===//
//
// inferReturnTypes for every liger op. Each one applies the op's rules from
// Verification.cpp and builds the result types; the parser, the inferring
// builders and the verifier (through InferTypeOpInterface) all come here.
//
//===----------------------------------------------------------------------===//

#include "liger/Dialect/Liger/IR/LigerOps.h"
#include "liger/Dialect/Liger/IR/Verification.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace mlir::liger;

//===----------------------------------------------------------------------===//
// EnumKeyword custom directive
//
// Enum attributes appear in op formats as bare words (`casting = gemma`). A
// custom directive because the EnumAttr printer, used directly in an op
// format, adds a space of its own after the op's `=`.
//===----------------------------------------------------------------------===//

template <typename AttrT>
static ParseResult parseEnumKeyword(OpAsmParser &parser, AttrT &attr) {
  using EnumT = decltype(std::declval<AttrT>().getValue());
  SMLoc loc = parser.getCurrentLocation();
  StringRef keyword;
  if (parser.parseKeyword(&keyword))
    return failure();
  if (std::optional<EnumT> value = symbolizeEnum<EnumT>(keyword)) {
    attr = AttrT::get(parser.getContext(), *value);
    return success();
  }
  // Enum values are dense from 0; stringifyEnum returns "" past the last.
  std::string expected;
  for (uint32_t i = 0; !stringifyEnum(static_cast<EnumT>(i)).empty(); ++i)
    expected += (i ? ", " : "") + stringifyEnum(static_cast<EnumT>(i)).str();
  return parser.emitError(loc)
         << "expected one of " << expected << ", got '" << keyword << "'";
}

template <typename AttrT>
static void printEnumKeyword(OpAsmPrinter &printer, Operation *, AttrT attr) {
  printer << stringifyEnum(attr.getValue());
}

#define GET_OP_CLASSES
#include "liger/Dialect/Liger/IR/LigerOps.cpp.inc"

/// While the parser infers result types, the default-valued attributes that
/// the text omits are not yet in the op's properties (they are filled in when
/// the op is created). Returns an adaptor over a copy with the ODS defaults
/// filled in, so inference reads the same values the op will have.
template <typename OpTy>
static typename OpTy::Adaptor withDefaults(MLIRContext *context,
                                           typename OpTy::Adaptor adaptor) {
  typename OpTy::Properties props = adaptor.getProperties();
  OpTy::populateDefaultProperties(
      OperationName(OpTy::getOperationName(), context), props);
  return typename OpTy::Adaptor(adaptor.getOperands(), adaptor.getAttributes(),
                                props);
}

//===----------------------------------------------------------------------===//
// Norms
//===----------------------------------------------------------------------===//

/// Rules shared by the norms: input [..., H] with static H, weight [H];
/// returns the input type.
static FailureOr<RankedTensorType>
verifyNormOperands(const RuleContext &ctx, Value input, Value weight) {
  FailureOr<RankedTensorType> x =
      verifyHiddenOperand(ctx, input.getType(), "input");
  if (failed(x) || failed(verifyFeatureVector(ctx, weight.getType(), "weight",
                                              x->getShape().back(),
                                              "the hidden size of 'input'")))
    return failure();
  return x;
}

/// rms_norm and add_rms_norm: `copies` results of the input type (the
/// normalized value, and for add_rms_norm the residual sum), then the f32
/// rstd when requested.
template <typename Adaptor>
static LogicalResult inferRMSNormResults(const RuleContext &ctx,
                                         Adaptor adaptor, unsigned copies,
                                         SmallVectorImpl<Type> &results) {
  FailureOr<RankedTensorType> x =
      verifyNormOperands(ctx, adaptor.getInput(), adaptor.getWeight());
  if (failed(x))
    return failure();
  results.append(copies, *x);
  if (adaptor.getWithRstd())
    results.push_back(getRowStatsType(*x));
  return success();
}

LogicalResult RMSNormOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &results) {
  return inferRMSNormResults(RuleContext(loc, getOperationName()), adaptor,
                             /*copies=*/1, results);
}

LogicalResult AddRMSNormOp::inferReturnTypes(MLIRContext *,
                                             std::optional<Location> loc,
                                             Adaptor adaptor,
                                             SmallVectorImpl<Type> &results) {
  return inferRMSNormResults(RuleContext(loc, getOperationName()), adaptor,
                             /*copies=*/2, results);
}

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  RuleContext ctx(loc, getOperationName());
  FailureOr<RankedTensorType> x =
      verifyNormOperands(ctx, adaptor.getInput(), adaptor.getWeight());
  if (failed(x))
    return failure();
  if (Value bias = adaptor.getBias();
      bias && bias.getType() != adaptor.getWeight().getType())
    return ctx.fail("expects 'bias' to have the type of 'weight' (",
                    adaptor.getWeight().getType(), "), got ", bias.getType());
  results.push_back(*x);
  if (adaptor.getWithStats())
    results.append(2, getRowStatsType(*x)); // mean, rstd
  return success();
}

LogicalResult RMSNormGradOp::inferReturnTypes(MLIRContext *,
                                              std::optional<Location> loc,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &results) {
  RuleContext ctx(loc, getOperationName());
  FailureOr<RankedTensorType> x =
      verifyNormOperands(ctx, adaptor.getInput(), adaptor.getWeight());
  if (failed(x) || failed(verifyMatchesType(ctx, adaptor.getRstd().getType(),
                                            "rstd", getRowStatsType(*x),
                                            "the rows of 'input' in f32")))
    return failure();
  results.push_back(*x);
  results.push_back(adaptor.getWeight().getType());
  return success();
}

LogicalResult LayerNormGradOp::inferReturnTypes(MLIRContext *,
                                                std::optional<Location> loc,
                                                Adaptor adaptor,
                                                SmallVectorImpl<Type> &results) {
  RuleContext ctx(loc, getOperationName());
  FailureOr<RankedTensorType> x =
      verifyNormOperands(ctx, adaptor.getInput(), adaptor.getWeight());
  // rstd has mean's type (AllTypesMatch, checked before inference).
  if (failed(x) || failed(verifyMatchesType(ctx, adaptor.getMean().getType(),
                                            "mean", getRowStatsType(*x),
                                            "the rows of 'input' in f32")))
    return failure();
  results.push_back(*x);
  results.append(2, adaptor.getWeight().getType());
  return success();
}

//===----------------------------------------------------------------------===//
// RoPE
//===----------------------------------------------------------------------===//

LogicalResult RoPEOp::inferReturnTypes(MLIRContext *,
                                       std::optional<Location> loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &results) {
  RuleContext ctx(loc, getOperationName());
  if (failed(verifyRoPEOperands(ctx, adaptor.getQ().getType(),
                                adaptor.getK().getType(),
                                adaptor.getCos().getType(), "q", "k")))
    return failure();
  results.push_back(adaptor.getQ().getType());
  results.push_back(adaptor.getK().getType());
  return success();
}

LogicalResult RoPEGradOp::inferReturnTypes(MLIRContext *,
                                           std::optional<Location> loc,
                                           Adaptor adaptor,
                                           SmallVectorImpl<Type> &results) {
  RuleContext ctx(loc, getOperationName());
  if (failed(verifyRoPEOperands(
          ctx, adaptor.getGradQ().getType(), adaptor.getGradK().getType(),
          adaptor.getCos().getType(), "grad_q", "grad_k")))
    return failure();
  results.push_back(adaptor.getGradQ().getType());
  results.push_back(adaptor.getGradK().getType());
  return success();
}

//===----------------------------------------------------------------------===//
// Projections
//===----------------------------------------------------------------------===//

static Type typeOrNull(Value v) { return v ? v.getType() : Type(); }

LogicalResult LinearOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  RuleContext ctx(loc, getOperationName());
  FailureOr<RankedTensorType> y = inferLinearType(
      ctx, adaptor.getInput().getType(), adaptor.getWeight().getType(),
      typeOrNull(adaptor.getBias()), Type(), Type());
  if (failed(y))
    return failure();
  results.push_back(*y);
  return success();
}

LogicalResult LoRALinearOp::inferReturnTypes(MLIRContext *,
                                             std::optional<Location> loc,
                                             Adaptor adaptor,
                                             SmallVectorImpl<Type> &results) {
  RuleContext ctx(loc, getOperationName());
  FailureOr<RankedTensorType> y = inferLinearType(
      ctx, adaptor.getInput().getType(), adaptor.getWeight().getType(),
      typeOrNull(adaptor.getBias()), adaptor.getLoraA().getType(),
      adaptor.getLoraB().getType());
  if (failed(y))
    return failure();
  results.push_back(*y);
  return success();
}

LogicalResult LinearGradInputOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  RuleContext ctx(loc, getOperationName());
  FailureOr<RankedTensorType> dx = inferLinearGradInputType(
      ctx, adaptor.getGrad().getType(), adaptor.getWeight().getType());
  if (failed(dx))
    return failure();
  results.push_back(*dx);
  return success();
}

LogicalResult LinearGradWeightOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  RuleContext ctx(loc, getOperationName());
  FailureOr<RankedTensorType> dw = inferLinearGradWeightType(
      ctx, adaptor.getGrad().getType(), adaptor.getInput().getType(),
      typeOrNull(adaptor.getAccumulate()));
  if (failed(dw))
    return failure();
  results.push_back(*dw);
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise ops (result types come from SameOperandsAndResultType)
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxOp::verify() {
  RuleContext ctx(getLoc(), getOperationName());
  return verifyHiddenOperand(ctx, getInput().getType(), "input");
}

LogicalResult SwiGLUGradOp::inferReturnTypes(MLIRContext *,
                                             std::optional<Location>,
                                             Adaptor adaptor,
                                             SmallVectorImpl<Type> &results) {
  // AllTypesMatch checks grad/gate/up; both gradients have their type.
  results.append(2, adaptor.getGate().getType());
  return success();
}

LogicalResult GEGLUGradOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location>,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  // AllTypesMatch checks grad/gate/up; both gradients have their type.
  results.append(2, adaptor.getGate().getType());
  return success();
}

LogicalResult SoftmaxGradOp::inferReturnTypes(MLIRContext *,
                                              std::optional<Location> loc,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &results) {
  RuleContext ctx(loc, getOperationName());
  FailureOr<RankedTensorType> output =
      verifyHiddenOperand(ctx, adaptor.getOutput().getType(), "output");
  if (failed(output))
    return failure();
  results.push_back(*output);
  return success();
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

static constexpr StringLiteral kLogitsLayout = "[tokens, vocab]";

/// The rules of the ops that read logits [N, V], target [N] and optional
/// class weights [V]; returns the logits type.
template <typename Adaptor>
static FailureOr<RankedTensorType> verifyLogitsOperands(const RuleContext &ctx,
                                                        Adaptor adaptor) {
  FailureOr<RankedTensorType> logits = verifyTokenMatrix(
      ctx, adaptor.getLogits().getType(), "logits", kLogitsLayout);
  if (failed(logits) || failed(verifyCrossEntropyOperands(
                            ctx, *logits, adaptor.getTarget().getType(),
                            typeOrNull(adaptor.getWeight()),
                            adaptor.getIgnoreIndexAttr())))
    return failure();
  return logits;
}

/// Pushes the loss type and, when requested, the z-loss type.
static void pushLossTypes(MLIRContext *context, Reduction reduction,
                          int64_t tokens, bool withZLoss,
                          SmallVectorImpl<Type> &results) {
  RankedTensorType loss = getLossType(context, reduction, tokens);
  results.push_back(loss);
  if (withZLoss)
    results.push_back(loss);
}

/// The incoming gradient of a cross-entropy loss over `tokens` rows: the
/// loss's own type (one f32 per token, or a scalar for a reduced loss).
template <typename Adaptor>
static LogicalResult verifyGradLoss(const RuleContext &ctx,
                                    MLIRContext *context, Adaptor adaptor,
                                    int64_t tokens) {
  Reduction reduction = adaptor.getReduction();
  return verifyMatchesType(ctx, adaptor.getGradLoss().getType(), "grad_loss",
                           getLossType(context, reduction, tokens),
                           reduction == Reduction::none
                               ? "one f32 gradient per token"
                               : "a scalar for a reduced loss");
}

LogicalResult CrossEntropyOp::inferReturnTypes(MLIRContext *context,
                                               std::optional<Location> loc,
                                               Adaptor adaptor,
                                               SmallVectorImpl<Type> &results) {
  adaptor = withDefaults<CrossEntropyOp>(context, adaptor);
  RuleContext ctx(loc, getOperationName());
  FailureOr<RankedTensorType> logits = verifyLogitsOperands(ctx, adaptor);
  if (failed(logits))
    return failure();
  pushLossTypes(context, adaptor.getReduction(), logits->getDimSize(0),
                adaptor.getReturnZLoss(), results);
  return success();
}

/// The virtual logits hidden · weightᵀ + bias of the lm_head ops, by the
/// linear rules, checked against the targets.
template <typename Adaptor>
static FailureOr<RankedTensorType> verifyLinearLogits(RuleContext &ctx,
                                                      Adaptor adaptor) {
  FailureOr<RankedTensorType> hidden = verifyTokenMatrix(
      ctx, adaptor.getHidden().getType(), "hidden", "[tokens, hidden]");
  if (failed(hidden))
    return failure();
  FailureOr<RankedTensorType> logits =
      inferLinearType(ctx, *hidden, adaptor.getWeight().getType(),
                      typeOrNull(adaptor.getBias()), Type(), Type(), "hidden");
  if (failed(logits) ||
      failed(verifyCrossEntropyOperands(ctx, *logits,
                                        adaptor.getTarget().getType(),
                                        typeOrNull(adaptor.getClassWeight()),
                                        adaptor.getIgnoreIndexAttr(),
                                        "class_weight")))
    return failure();
  return logits;
}

LogicalResult FusedLinearCrossEntropyOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  adaptor = withDefaults<FusedLinearCrossEntropyOp>(context, adaptor);
  RuleContext ctx(loc, getOperationName());
  FailureOr<RankedTensorType> logits = verifyLinearLogits(ctx, adaptor);
  if (failed(logits))
    return failure();
  pushLossTypes(context, adaptor.getReduction(), logits->getDimSize(0),
                adaptor.getReturnZLoss(), results);
  return success();
}

LogicalResult FusedLinearCrossEntropyGradOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  adaptor = withDefaults<FusedLinearCrossEntropyGradOp>(context, adaptor);
  RuleContext ctx(loc, getOperationName());
  // The forward's rules, then the incoming gradient cross_entropy_grad's.
  FailureOr<RankedTensorType> logits = verifyLinearLogits(ctx, adaptor);
  if (failed(logits) ||
      failed(verifyGradLoss(ctx, context, adaptor, logits->getDimSize(0))))
    return failure();
  results.push_back(adaptor.getHidden().getType());
  results.push_back(adaptor.getWeight().getType());
  if (Value bias = adaptor.getBias())
    results.push_back(bias.getType());
  return success();
}

LogicalResult CrossEntropyGradOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  adaptor = withDefaults<CrossEntropyGradOp>(context, adaptor);
  RuleContext ctx(loc, getOperationName());
  FailureOr<RankedTensorType> logits = verifyLogitsOperands(ctx, adaptor);
  if (failed(logits) ||
      failed(verifyGradLoss(ctx, context, adaptor, logits->getDimSize(0))))
    return failure();
  results.push_back(*logits);
  return success();
}

/// The result of a divergence (kl_div, jsd) over `input` [N, V], and so the
/// type of its incoming gradient: [N, V] f32 pointwise (kl_div's
/// reduction = none), [N] f32 per token, else a scalar.
static RankedTensorType getDivergenceType(MLIRContext *context,
                                          RankedTensorType input,
                                          bool pointwise, bool perToken) {
  Type f32 = Float32Type::get(context);
  if (pointwise)
    return input.clone(f32);
  if (perToken)
    return RankedTensorType::get({input.getDimSize(0)}, f32);
  return RankedTensorType::get({}, f32);
}

/// kl_div's operand and attributes: a [tokens, vocab] matrix, and
/// per_token only with a reduction that adds tokens up. Returns the result
/// type.
static FailureOr<RankedTensorType>
verifyKLDiv(const RuleContext &ctx, MLIRContext *context, Type matrix,
            StringRef name, KLReduction reduction, bool perToken) {
  FailureOr<RankedTensorType> input =
      verifyTokenMatrix(ctx, matrix, name, kLogitsLayout);
  if (failed(input))
    return failure();
  if (perToken && reduction == KLReduction::none)
    return ctx.fail("expects 'per_token' with a reduction over tokens (sum, "
                    "mean or batchmean), got reduction = none");
  return getDivergenceType(context, *input, reduction == KLReduction::none,
                           perToken);
}

/// The incoming gradient of a divergence: the forward result's type.
static LogicalResult verifyDivergenceGrad(const RuleContext &ctx, Type grad,
                                          RankedTensorType expected) {
  return verifyMatchesType(ctx, grad, "grad_loss", expected,
                           expected.getRank() == 2   ? "one f32 per element"
                           : expected.getRank() == 1 ? "one f32 per token"
                                                     : "a scalar for a reduced "
                                                       "loss");
}

LogicalResult KLDivOp::inferReturnTypes(MLIRContext *context,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &results) {
  adaptor = withDefaults<KLDivOp>(context, adaptor);
  RuleContext ctx(loc, getOperationName());
  FailureOr<RankedTensorType> result =
      verifyKLDiv(ctx, context, adaptor.getInput().getType(), "input",
                  adaptor.getReduction(), adaptor.getPerToken());
  if (failed(result))
    return failure();
  results.push_back(*result);
  return success();
}

LogicalResult KLDivGradOp::inferReturnTypes(MLIRContext *context,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  adaptor = withDefaults<KLDivGradOp>(context, adaptor);
  RuleContext ctx(loc, getOperationName());
  FailureOr<RankedTensorType> loss =
      verifyKLDiv(ctx, context, adaptor.getTarget().getType(), "target",
                  adaptor.getReduction(), adaptor.getPerToken());
  if (failed(loss) ||
      failed(verifyDivergenceGrad(ctx, adaptor.getGradLoss().getType(), *loss)))
    return failure();
  results.push_back(adaptor.getTarget().getType());
  return success();
}

LogicalResult ScaleOp::inferReturnTypes(MLIRContext *context,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &results) {
  RuleContext ctx(loc, getOperationName());
  FailureOr<RankedTensorType> input = verifyTokenMatrix(
      ctx, adaptor.getInput().getType(), "input", "[rows, hidden]");
  if (failed(input))
    return failure();
  // One factor for every row (a scalar), or one per row.
  Type factor = adaptor.getFactor().getType();
  Type f32 = Float32Type::get(context);
  auto perRow = RankedTensorType::get({input->getDimSize(0)}, f32);
  auto tensor = dyn_cast<RankedTensorType>(factor);
  if (!tensor || tensor.getRank() != 0 || tensor.getElementType() != f32) {
    if (failed(verifyMatchesType(ctx, factor, "factor", perRow,
                                 "one f32 per row, or tensor<f32> for "
                                 "every row")))
      return failure();
  }
  results.push_back(*input);
  return success();
}

/// jsd's operands: a [tokens, vocab] input and, if given, one label per
/// token. Returns the input's type.
template <typename Adaptor>
static FailureOr<RankedTensorType> verifyJSDOperands(const RuleContext &ctx,
                                                     MLIRContext *context,
                                                     Adaptor adaptor) {
  FailureOr<RankedTensorType> input = verifyTokenMatrix(
      ctx, adaptor.getInput().getType(), "input", kLogitsLayout);
  if (failed(input))
    return failure();
  if (Value labels = adaptor.getShiftLabels()) {
    auto shaped = dyn_cast<ShapedType>(labels.getType());
    Type element =
        shaped ? shaped.getElementType() : IntegerType::get(context, 64);
    RankedTensorType expected =
        RankedTensorType::get({input->getDimSize(0)}, element);
    if (failed(verifyMatchesType(ctx, labels.getType(), "shift_labels",
                                 expected, "one label per token")) ||
        failed(verifyIgnoreIndex(ctx, labels.getType(), "shift_labels",
                                 adaptor.getIgnoreIndexAttr())))
      return failure();
  }
  return input;
}

LogicalResult JSDOp::inferReturnTypes(MLIRContext *context,
                                      std::optional<Location> loc,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &results) {
  RuleContext ctx(loc, getOperationName());
  FailureOr<RankedTensorType> input = verifyJSDOperands(ctx, context, adaptor);
  if (failed(input))
    return failure();
  results.push_back(getDivergenceType(context, *input, /*pointwise=*/false,
                                      adaptor.getPerToken()));
  return success();
}

LogicalResult JSDGradOp::inferReturnTypes(MLIRContext *context,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &results) {
  RuleContext ctx(loc, getOperationName());
  FailureOr<RankedTensorType> input = verifyJSDOperands(ctx, context, adaptor);
  if (failed(input) ||
      failed(verifyDivergenceGrad(ctx, adaptor.getGradLoss().getType(),
                                  getDivergenceType(context, *input,
                                                    /*pointwise=*/false,
                                                    adaptor.getPerToken()))))
    return failure();
  results.push_back(*input);
  return success();
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  RuleContext ctx(loc, getOperationName());
  FailureOr<RankedTensorType> out =
      inferAttentionType(ctx, adaptor.getQ().getType(),
                         adaptor.getK().getType(), adaptor.getV().getType());
  if (failed(out) || failed(verifyAttentionWindow(ctx, adaptor.getCausal(),
                                                  adaptor.getWindow())))
    return failure();
  results.push_back(*out);
  if (adaptor.getReturnLse())
    results.push_back(getRowStatsType(*out));
  return success();
}

LogicalResult
AttentionGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                  Adaptor adaptor,
                                  SmallVectorImpl<Type> &results) {
  RuleContext ctx(loc, getOperationName());
  FailureOr<RankedTensorType> out =
      inferAttentionType(ctx, adaptor.getQ().getType(),
                         adaptor.getK().getType(), adaptor.getV().getType());
  if (failed(out) ||
      failed(verifyAttentionWindow(ctx, adaptor.getCausal(),
                                   adaptor.getWindow())) ||
      failed(verifyMatchesType(ctx, adaptor.getGrad().getType(), "grad", *out,
                               "the attention's output")) ||
      failed(verifyAttentionSaved(ctx, *out, adaptor.getGrad().getType(),
                                  typeOrNull(adaptor.getOut()),
                                  typeOrNull(adaptor.getLse()))))
    return failure();
  results.push_back(adaptor.getQ().getType());
  results.push_back(adaptor.getK().getType());
  results.push_back(adaptor.getV().getType());
  return success();
}
