//===- Passes.td - liger conversion passes ------------------*- tablegen -*-===//
//
// Lowerings out of the liger dialect. Defs are kept in alphabetical order.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_CONVERSION_PASSES_TD
#define LIGER_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def LowerToLinalgPass : Pass<"liger-lower-to-linalg"> {
  let summary = "Lower liger ops to linalg/tensor/arith/math: their reference semantics";
  let description = [{
    Rewrites every liger op (forward and backward) into `linalg.generic` ops
    on tensors, with `arith` and `math` in their bodies. The result is the
    exact meaning of each op, written once: the CPU pipeline
    (`liger-cpu-pipeline`) runs it as the numerical oracle that fusion and
    GPU kernels are checked against, and as a CPU fallback.

    Numerics follow the op documentation: inputs are extended to f32, every
    reduction and matrix product accumulates in f32, and results are rounded
    to the op's result type where the op says so (RMSNorm's casting modes
    round where Hugging Face's Llama and Gemma modules round). Reductions are
    written as plain sequential `linalg.generic` reductions; their order is
    the loop order, which is enough for an oracle compared with tolerances.
    `docs/Reference/Semantics.md` gives each op's formula.

    Example: `liger.silu` on `tensor<?x8xbf16>` becomes

    ```mlir
    %c0 = arith.constant 0 : index
    %dim = tensor.dim %x, %c0 : tensor<?x8xbf16>
    %init = tensor.empty(%dim) : tensor<?x8xbf16>
    %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
        ins(%x : tensor<?x8xbf16>) outs(%init : tensor<?x8xbf16>) {
      ^bb0(%in: bf16, %out: bf16):
        %f = arith.extf %in : bf16 to f32
        ... %f / (1 + exp(-%f)) ...
        %r = arith.truncf %s : f32 to bf16
        linalg.yield %r : bf16
    } -> tensor<?x8xbf16>
    ```

    Ops of other dialects are left alone. A liger op that has no lowering
    gets a diagnostic naming it and the pass fails; no liger op survives a
    successful run.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect",
    "::mlir::tensor::TensorDialect",
  ];
  let statistics = [
    Statistic<"numLoweredOps", "lowered-ops", "Number of liger ops lowered">
  ];
}

#endif // LIGER_CONVERSION_PASSES_TD
