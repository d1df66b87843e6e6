//===- Fusion.h - fusion groups: candidates, policy, report -----*- C++ -*-===//
//
// What every fusion pass shares: the candidate a pattern proposes, the
// control callback (policy) that accepts or refuses it, the report that says
// what fused and why a chain was left alone, the builder that turns a
// candidate into a liger.fusion group, and the populate functions of the
// fusion patterns (one source file per pass in lib/Transforms/).
//
// docs/adding-a-fusion-pass.md walks through writing a new pass.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_TRANSFORMS_FUSION_H
#define LIGER_TRANSFORMS_FUSION_H

#include "liger/Dialect/Liger/IR/LigerOps.h"

#include "mlir/IR/PatternMatch.h"

#include "llvm/ADT/StringSet.h"

#include <functional>
#include <memory>
#include <string>

namespace mlir::liger {

/// The discardable attribute liger-plan-loss sets on each chunk function of
/// a loss plan: the most rows a launch of it has (an i64), which
/// liger-lower-to-gpu reads to give its matmul kernels a narrow-tile
/// variant.
inline constexpr llvm::StringLiteral kChunkRowsAttrName = "liger.chunk_rows";

/// A group a fusion pattern proposes.
struct FusionCandidate {
  /// The pass (flag) proposing it, for the report.
  StringRef pass;
  /// The kernel template.
  FusionKind kind = FusionKind::rowwise;
  /// The ops to group; an existing liger.fusion among them is merged (its
  /// body joins the new group).
  SmallVector<Operation *> ops;
  /// Results of `ops` that are also read outside the group and become extra
  /// results (written once more by the kernel).
  SmallVector<Value> extraOutputs;
};

/// The policy: returns true to form the group. A refusal is reported with
/// the reason "refused by the policy".
using ControlFusionFn = std::function<bool(const FusionCandidate &)>;

/// Collects what the fusion passes did, for `report=true`: one line per
/// group formed and one per chain left alone, with the reason.
class FusionReport {
public:
  /// Records a group formed by `pass` from the ops `what` (see
  /// describeOps), taken before the ops were replaced.
  void recordFused(StringRef pass, StringRef what, FusionOp group,
                   size_t numExtraOutputs);
  /// Number of groups recorded.
  int64_t getNumFused() const { return numFused; }
  /// Records that `pass` left the chain rooted at `op` alone, and why. A
  /// chain is reported once per pass however often the driver revisits it.
  void recordLeftAlone(StringRef pass, Operation *op, const Twine &why);
  /// Prints the recorded lines in order.
  void print(raw_ostream &os) const;
  bool empty() const { return lines.empty(); }

private:
  SmallVector<std::string> lines;
  llvm::StringSet<> seen;
  int64_t numFused = 0;
};

/// Options every fusion pattern takes.
struct FusionOptions {
  /// The policy; null accepts every legal candidate.
  ControlFusionFn control;
  /// Where decisions are recorded; may be null.
  FusionReport *report = nullptr;
  /// Whether an intermediate read outside the group may become an extra
  /// result. When false, such a chain is left alone.
  bool allowExtraOutputs = true;
};

/// The results of `ops` other than `natural` that ops outside `ops` read:
/// what a group of `ops` would have to return in addition.
SmallVector<Value> getExtraOutputs(ArrayRef<Operation *> ops,
                                   ArrayRef<Value> natural);

/// "liger.linear, liger.linear, liger.swiglu": the ops of a candidate, for
/// the report.
std::string describeOps(ArrayRef<Operation *> ops);

/// Whether `op` is inside a liger.fusion body.
bool isInFusionGroup(Operation *op);

/// The first cross-entropy attribute (ignore_index, label_smoothing,
/// reduction, softcap, lse_square_scale) in which two loss ops differ
/// (cross_entropy, fused_linear_cross_entropy or their gradients), or ""
/// when they compute with the same ones.
template <typename OpA, typename OpB>
StringRef differingLossAttribute(OpA a, OpB b) {
  if (a.getIgnoreIndex() != b.getIgnoreIndex())
    return "ignore_index";
  if (a.getLabelSmoothing() != b.getLabelSmoothing())
    return "label_smoothing";
  if (a.getReduction() != b.getReduction())
    return "reduction";
  if (a.getSoftcap() != b.getSoftcap())
    return "softcap";
  if (a.getLseSquareScale() != b.getLseSquareScale())
    return "lse_square_scale";
  return "";
}

/// The value `v` stands for outside every liger.fusion body: a group's
/// block argument resolves to the group's input (through nested groups);
/// any other value is itself.
Value valueOutsideGroups(Value v);

/// Builds the group of `candidate` at the position of its last op: inputs
/// are the values its ops read from outside, results the values read
/// outside (in program order). Fails without changing the IR, setting
/// `whyNot`, when the ops are not in one block or an outside op reads an
/// intermediate before the last op of the group.
FailureOr<FusionOp> createFusionGroup(RewriterBase &rewriter,
                                      const FusionCandidate &candidate,
                                      std::string &whyNot);

/// The common tail of every fusion pattern: asks the policy, checks the
/// extra-output option, builds the group and records the decision. Returns
/// failure (and records why) when the group is not formed.
FailureOr<FusionOp> tryFuse(RewriterBase &rewriter, Operation *root,
                            const FusionCandidate &candidate,
                            const FusionOptions &options);

/// Builds the group of `candidate` when the pattern has already checked that
/// it can be formed (the policy asked, every reader of an intermediate after
/// the last op) and records it as made from `what` (describeOps of the ops
/// before the pattern rewrote them).
FusionOp commitFusion(RewriterBase &rewriter, const FusionCandidate &candidate,
                      StringRef what, const FusionOptions &options);

/// Records that `pass` left `op` alone because of `why` (when reporting) and
/// returns failure, for use as a pattern's early exit.
LogicalResult leaveAlone(const FusionOptions &options, StringRef pass,
                         Operation *op, const Twine &why);

/// The body of every fusion pass: runs the patterns `populate` adds on `op`
/// with the pass's options, prints the report to stdout when `report` is
/// set, and returns the number of groups formed.
int64_t runFusionPatterns(
    Operation *op, bool report, bool allowExtraOutputs,
    function_ref<void(RewritePatternSet &, const FusionOptions &)> populate);

//===----------------------------------------------------------------------===//
// Patterns (one file per pass in lib/Transforms/)
//===----------------------------------------------------------------------===//

/// liger.add then liger.rms_norm of the sum -> a rowwise group holding one
/// liger.add_rms_norm (normed value and new residual).
void populateFuseAddRMSNormPatterns(RewritePatternSet &patterns,
                                    const FusionOptions &options);

/// Elementwise ops and gated activations into the rowwise group (or op) that
/// produces their operand: chains of elementwise ops and norm -> elementwise.
/// With `intoMatmul`, also into a matmul group's epilogue.
void populateFuseElementwisePatterns(RewritePatternSet &patterns,
                                     const FusionOptions &options,
                                     bool intoMatmul);

/// Gate and up liger.linear of one activation -> liger.swiglu/geglu: one
/// matmul group computing both projections and the activation.
void populateFuseGatedMLPPatterns(RewritePatternSet &patterns,
                                  const FusionOptions &options);

/// liger.linear_grad_input (dh = dy · W_down) -> liger.swiglu_grad/
/// geglu_grad: one matmul group, the gradient in the dx product's epilogue.
void populateFuseGatedMLPGradPatterns(RewritePatternSet &patterns,
                                      const FusionOptions &options);

/// liger.linear -> liger.cross_entropy -> a loss group holding one
/// liger.fused_linear_cross_entropy; a lone fused_linear_cross_entropy is
/// wrapped too.
void populateFuseLinearCrossEntropyPatterns(RewritePatternSet &patterns,
                                            const FusionOptions &options);

/// liger.cross_entropy and the liger.cross_entropy_grad of the same loss ->
/// one rowwise group (the loss and its gradient in one kernel).
void populateFuseCrossEntropyGradPatterns(RewritePatternSet &patterns,
                                          const FusionOptions &options);

/// liger.lora_linear with the activation and residual add that follow it ->
/// one matmul group.
void populateFuseLoRAPatterns(RewritePatternSet &patterns,
                              const FusionOptions &options);

/// liger.rms_norm -> projections: the norm becomes the prologue of each
/// projection's matmul group (recomputed per group, at most
/// `maxConsumers` of them). With `fold` false the matches are reported and
/// left alone (the norm stays a rowwise kernel).
void populateFuseNormLinearPatterns(RewritePatternSet &patterns,
                                    const FusionOptions &options,
                                    int64_t maxConsumers, bool fold = true);

/// q and k liger.linear of one activation -> head split -> liger.rope: one
/// matmul group with RoPE in the epilogue.
void populateFuseQKVRoPEPatterns(RewritePatternSet &patterns,
                                 const FusionOptions &options);

} // namespace mlir::liger

#endif // LIGER_TRANSFORMS_FUSION_H
