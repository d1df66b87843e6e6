//===- MatmulPlan.h - a matmul group, analysed once --------------*- C++
//-*-===//
//
// What a matmul liger.fusion group computes, read from its body once: the
// kind of product, its sizes and dtype, its operands by role, its prologue
// (an RMSNorm) and epilogue (elementwise ops, or RoPE of a q/k pair). The
// configuration selection (MatmulConfig.cpp), the shared-memory layout
// (MatmulLayout.h) and every emitter of the kernel (MatmulEmitters.h) read
// this plan; none of them looks at the body again.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_CONVERSION_LIGERTOGPU_MATMULPLAN_H
#define LIGER_CONVERSION_LIGERTOGPU_MATMULPLAN_H

#include "liger/Dialect/Liger/IR/LigerOps.h"

#include <string>

namespace mlir::liger {

/// The products the matmul templates compute.
enum class MatmulBody {
  /// y = f(x̂ · W₁ᵀ + b₁[, x̂ · W₂ᵀ + b₂]): one liger.linear or
  /// liger.lora_linear, or a gate/up pair on one input, x̂ = x or
  /// RMSNorm(x), f elementwise with one or more [rows, N] results (gate
  /// and up themselves among them, where the backward keeps them). A lone
  /// projection's weight may be the `linalg.transpose` of a group input
  /// [K, N] (`weightTranspose`: read MN-major, as dx = dy · W reads W; the
  /// LoRA dx dy · W + s · (dy · B) · A is liger.lora_linear of dy, Wᵀ, Bᵀ
  /// and Aᵀ).
  Projection,
  /// rope(split(x̂ · Wqᵀ), split(x̂ · Wkᵀ), cos, sin), head-major outputs.
  QKRoPE,
  /// f(dy · W) (B read MN-major), f elementwise with one or more [rows, N]
  /// results: dx itself, or a gated activation's gradients dgate and dup
  /// from dh = dy · W_down.
  GradInput,
  /// dW = dyᵀ · x, optionally added into a buffer (A and B read MN-major;
  /// K is the tokens).
  GradWeight,
};

/// The bodies' names, in the enum's order (liger-test-matmul-plan prints
/// them, a configuration table's `body` matches them).
inline constexpr llvm::StringLiteral kMatmulBodyNames[] = {
    "projection", "qk_rope", "grad_input", "grad_weight"};
static_assert(std::size(kMatmulBodyNames) ==
                  static_cast<size_t>(MatmulBody::GradWeight) + 1,
              "a name per matmul body");
inline StringRef matmulBodyName(MatmulBody body) {
  return kMatmulBodyNames[static_cast<size_t>(body)];
}

/// A liger.linear, liger.lora_linear or gradient product of the group.
struct MatmulProjection {
  Operation *op;
  Value input, weight, bias, result;
};

/// What a group input is to the kernel.
enum class MatmulOperandRole {
  X,          ///< the A operand: x, or dy of a gradient product
  NormWeight, ///< the RMSNorm prologue's weight [K]
  Weight,     ///< projection `projection`'s B operand
  Bias,       ///< projection `projection`'s bias [N]
  LoRAA,      ///< LoRA's A [r, K]
  LoRAB,      ///< LoRA's B [N, r]
  Cos,        ///< RoPE's tables [1 or B, T, D]
  Sin,
  Accumulator,     ///< the buffer dW is added into
  EpilogueRows,    ///< read by the epilogue at (row, column): [rows, N]
  EpilogueFeature, ///< read by the epilogue at the column: [N]
  Unread,          ///< not read by a q/k projection pair with RoPE
  Unshaped,        ///< read by the epilogue, neither [rows, N] nor [N]
};

struct MatmulOperand {
  MatmulOperandRole role = MatmulOperandRole::Unread;
  unsigned projection = 0; ///< of a Weight or a Bias
  /// An input of the elementwise epilogue (of any shape: the kernel's
  /// signature rejects the unshaped ones).
  bool inEpilogue() const {
    return role == MatmulOperandRole::EpilogueRows ||
           role == MatmulOperandRole::EpilogueFeature ||
           role == MatmulOperandRole::Unshaped;
  }
};

/// A matmul group, analysed once. (Op handles are `mutable`: MLIR's op
/// accessors are not const-qualified, and a handle is a value.)
struct MatmulPlan {
  mutable FusionOp group;
  MatmulBody body = MatmulBody::Projection;

  /// What the templates do not implement in this body, or empty. Set by
  /// the analysis without a diagnostic: the configuration can still be
  /// chosen, and the lowering warns that the group is left for a later
  /// template.
  std::string unsupported;

  // Sizes.
  int64_t m = ShapedType::kDynamic; ///< rows: static or dynamic (GradWeight:
                                    ///< dy's features, the output rows)
  int64_t k = 0;  ///< the reduction width (GradWeight: the tokens, dynamic)
  int64_t n = 0;  ///< the output columns (QKRoPE: nq + nk)
  int64_t nq = 0; ///< QKRoPE: q's columns (k's follow)
  SmallVector<int64_t> widths; ///< each projection's output width
  Type elementType;            ///< the operands' dtype
  Type outputElementType;      ///< the (first) result's dtype
  int64_t elementBytes = 2;
  int64_t loraRank = 0; ///< r of a LoRA projection, else 0
  int64_t headDim = 0;  ///< QKRoPE: the head size, else 0
  /// GradWeight into a 16-bit buffer: the buffer's old tile is added to the
  /// product and rounded once.
  bool accumulateTile = false;
  /// Projection: the `linalg.transpose` (permutation [1, 0]) that gives
  /// the projection its weight from the group input [K, N] its `weight`
  /// names (the kernel reads that input MN-major), or null.
  Operation *weightTranspose = nullptr;

  // Ops.
  SmallVector<MatmulProjection, 2> projections;
  mutable RMSNormOp norm;    ///< the prologue, or null
  mutable LoRALinearOp lora; ///< the single projection, when LoRA
  mutable RoPEOp rope;       ///< QKRoPE's epilogue
  /// The ops after the projections (Projection and gradient bodies), in
  /// order: the elementwise epilogue.
  SmallVector<Operation *> epilogueOps;

  // Group inputs.
  Value x;                             ///< the A operand's group input
  Value normWeight;                    ///< the RMSNorm's weight, or null
  Value accumulator;                   ///< GradWeight's buffer, or null
  Value cos, sin;                      ///< QKRoPE's tables
  SmallVector<MatmulOperand> operands; ///< one per group input, in order

  /// Gate and up computed together (two accumulator sets from one x tile).
  bool paired() const {
    return body == MatmulBody::Projection && projections.size() == 2;
  }
  /// The results the kernel writes (RoPE: q and k; otherwise the group's
  /// results, each [rows, N]).
  unsigned numOutputs() const { return group.getNumResults(); }
  /// The B tiles a stage holds: two for a pair, else one (a RoPE pair
  /// computes one column tile of [Wq; Wk] at a time).
  int64_t numBTiles() const { return paired() ? 2 : 1; }
  /// Operand layouts: K-major (x [M, K], W [N, K]) or MN-major (a gradient
  /// product reads W [K, N] for dx = dy · W and both dy [K, M] and x [K, N]
  /// for dW = dyᵀ · x; a transposed weight is read as dx's W).
  bool aMNMajor() const { return body == MatmulBody::GradWeight; }
  bool bMNMajor() const {
    return body == MatmulBody::GradInput || body == MatmulBody::GradWeight ||
           weightTranspose != nullptr;
  }
  /// The group input `arg`'s role.
  const MatmulOperand &operandOf(Value arg) const {
    return operands[cast<BlockArgument>(arg).getArgNumber()];
  }
};

/// Reads the body of a matmul group into a plan; fails with a diagnostic on
/// the group (or the offending op) when it holds no projection, a weight of
/// dynamic shape, or projections of different widths.
FailureOr<MatmulPlan> analyzeMatmulGroup(FusionOp group);

/// What the templates do not implement is a warning on the group ("left
/// for a later matmul template: <why>"): the group stays uncompiled while
/// the rest of the module compiles. Returns failure.
LogicalResult leaveForLaterTemplate(FusionOp group, const Twine &why);

/// The ops that, outside any group, liger-lower-to-gpu's matmul-kernels
/// makes matmul kernels of one op: projections and the gradient products.
bool isLoneMatmulOp(Operation *op);

} // namespace mlir::liger

#endif // LIGER_CONVERSION_LIGERTOGPU_MATMULPLAN_H
