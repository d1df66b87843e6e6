//===- LigerToLinalg.h - liger to linalg patterns ---------------*- C++ -*-===//
//
// Patterns that lower liger ops to linalg/tensor/arith/math on tensors (the
// reference semantics). `liger-lower-to-linalg` applies all of them; a
// pipeline that wants only some op families populates only those.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_CONVERSION_LIGERTOLINALG_LIGERTOLINALG_H
#define LIGER_CONVERSION_LIGERTOLINALG_LIGERTOLINALG_H

namespace mlir {
class RewritePatternSet;
} // namespace mlir

namespace mlir::liger {

/// RMSNorm, add+RMSNorm, LayerNorm and the RMSNorm backward op.
void populateLowerNormsToLinalgPatterns(RewritePatternSet &patterns);

/// Elementwise ops, gated activations (and SwiGLU's backward op), softmax.
void populateLowerElementwiseToLinalgPatterns(RewritePatternSet &patterns);

/// linear, lora_linear, attention, and RoPE (forward and backward).
void populateLowerProjectionsToLinalgPatterns(RewritePatternSet &patterns);

/// cross_entropy (forward and backward), fused_linear_cross_entropy,
/// kl_div, jsd.
void populateLowerLossesToLinalgPatterns(RewritePatternSet &patterns);

/// All of the above.
void populateLowerToLinalgPatterns(RewritePatternSet &patterns);

} // namespace mlir::liger

#endif // LIGER_CONVERSION_LIGERTOLINALG_LIGERTOLINALG_H
