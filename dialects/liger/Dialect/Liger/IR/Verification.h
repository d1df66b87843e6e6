//===- Verification.h - shape and type rules of liger ops -------*- C++ -*-===//
//
// Every shape/type rule of the liger dialect that ODS cannot express is
// implemented once here. The ops' inferReturnTypes (and through it the
// parser, the inferring builders and the verifier) call these functions, and
// so can fusion matchers that need to ask "would this op be valid?" without
// building it.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_DIALECT_LIGER_IR_VERIFICATION_H
#define LIGER_DIALECT_LIGER_IR_VERIFICATION_H

#include "liger/Dialect/Liger/IR/LigerDialect.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"

#include <optional>

namespace mlir::liger {

/// Where a rule reports a violation: the op's location (absent when the
/// caller only wants a yes/no answer) and the op name used as the message
/// prefix, so messages read like emitOpError's: "'liger.linear' op ...".
class RuleContext {
public:
  RuleContext(std::optional<Location> loc, StringRef opName)
      : loc(loc), opName(opName) {}

  /// Emits "'<op>' op <message>" at the location (if any); returns failure.
  template <typename... Args> LogicalResult fail(Args &&...args) const {
    if (loc) {
      InFlightDiagnostic diag = emitError(*loc);
      diag << "'" << opName << "' op ";
      (diag << ... << std::forward<Args>(args));
    }
    return failure();
  }

private:
  std::optional<Location> loc;
  StringRef opName;
};

/// Renders a dimension size, "?" when dynamic.
std::string formatDim(int64_t size);

/// `type` must be a ranked tensor of rank >= 1 with a static last (hidden)
/// dimension. Returns it, or fails naming `name`.
FailureOr<RankedTensorType> verifyHiddenOperand(const RuleContext &ctx,
                                                Type type, StringRef name);

/// `type` must be a ranked tensor of exactly `rank` dimensions; `layout`
/// (e.g. "[batch, heads, seq, head_dim]") is quoted in the message.
FailureOr<RankedTensorType> verifyRank(const RuleContext &ctx, Type type,
                                       StringRef name, int64_t rank,
                                       StringRef layout);

/// `type` must be a rank-1 tensor of exactly `size` elements (a per-feature
/// vector such as a norm weight or a bias). `what` describes `size`.
LogicalResult verifyFeatureVector(const RuleContext &ctx, Type type,
                                  StringRef name, int64_t size, StringRef what);

/// The f32 row-statistics type of a [..., H] input: [...] in f32 (RMSNorm's
/// rstd, a per-token loss, the log-sum-exp of attention's query rows).
RankedTensorType getRowStatsType(RankedTensorType input);

/// Rules of liger.rope / liger.rope_grad: q [B, Hq, T, D], k [B, Hkv, T, D],
/// cos/sin [B or 1, T, D] with static heads and even static D.
LogicalResult verifyRoPEOperands(const RuleContext &ctx, Type q, Type k,
                                 Type cos, StringRef qName, StringRef kName);

/// Rules of liger.linear / liger.lora_linear; returns the [..., N] result.
/// `bias`, `loraA` and `loraB` may be null. `inputName` names the activation
/// operand in messages.
FailureOr<RankedTensorType> inferLinearType(const RuleContext &ctx, Type input,
                                            Type weight, Type bias, Type loraA,
                                            Type loraB,
                                            StringRef inputName = "input");

/// Rules of liger.linear_grad_input: grad [..., N], weight [N, K]; returns
/// the [..., K] gradient of the input.
FailureOr<RankedTensorType> inferLinearGradInputType(const RuleContext &ctx,
                                                     Type grad, Type weight);

/// Rules of liger.linear_grad_weight: grad [T, N], input [T, K], the
/// optional f32 [N, K] accumulator (null when absent); returns [N, K] in the
/// input dtype, or f32 when accumulating.
FailureOr<RankedTensorType> inferLinearGradWeightType(const RuleContext &ctx,
                                                      Type grad, Type input,
                                                      Type accumulate);

/// `type` must be a [tokens, features] matrix whose feature dimension is
/// static (logits [N, V], hidden states [N, H]); tokens may be dynamic.
FailureOr<RankedTensorType> verifyTokenMatrix(const RuleContext &ctx, Type type,
                                              StringRef name, StringRef layout);

/// `type` must have the shape of `expected` (dynamic sizes match anything)
/// and its element type. `what` explains `expected` in the message.
LogicalResult verifyMatchesType(const RuleContext &ctx, Type type,
                                StringRef name, RankedTensorType expected,
                                StringRef what);

/// Rules shared by the cross-entropy ops on logits [N, V], target [N] and the
/// optional class weights [V] (null when absent), an operand named
/// `weightName`; `ignoreIndex` by verifyIgnoreIndex.
LogicalResult verifyCrossEntropyOperands(const RuleContext &ctx,
                                         RankedTensorType logits, Type target,
                                         Type classWeight,
                                         IntegerAttr ignoreIndex,
                                         StringRef weightName = "weight");

/// `ignore_index` must be a value of the labels' integer type (the operand
/// `labelsName`, of type `labels`): the kernels compare it with each label
/// in that type, where an index out of its range would wrap and match real
/// labels. A null `ignoreIndex` is the op's default (-100), which i32 and i64
/// labels (the dialect's index types) hold.
LogicalResult verifyIgnoreIndex(const RuleContext &ctx, Type labels,
                                StringRef labelsName, IntegerAttr ignoreIndex);

/// The f32 loss type for `reduction` over `tokens` tokens: tensor<f32> for
/// mean/sum, tensor<Nxf32> for none.
RankedTensorType getLossType(MLIRContext *context, Reduction reduction,
                             int64_t tokens);

/// Rules of liger.attention; returns the [B, Hq, T, Dv] result.
FailureOr<RankedTensorType> inferAttentionType(const RuleContext &ctx, Type q,
                                               Type k, Type v);

/// The attention's (and its gradient's) `window` rule: a sliding window
/// bounds the keys below a query's diagonal, so it comes with `causal`.
LogicalResult verifyAttentionWindow(const RuleContext &ctx, bool causal,
                                    std::optional<int64_t> window);

/// Rules of liger.attention_grad's saved forward values (each null when
/// absent), given the attention's [B, Hq, T, Dv] output `expected` and the
/// incoming gradient `grad` (already checked against it): `out` and `lse`
/// come together, `out` has the type of `grad`, and `lse` is f32 [B, Hq, T]
/// (sizes compared where `expected`, `grad` or `lse` has them static).
LogicalResult verifyAttentionSaved(const RuleContext &ctx,
                                   RankedTensorType expected, Type grad,
                                   Type out, Type lse);

} // namespace mlir::liger

#endif // LIGER_DIALECT_LIGER_IR_VERIFICATION_H
