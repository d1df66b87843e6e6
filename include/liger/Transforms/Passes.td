//===- Passes.td - liger transformation and analysis passes -*- tablegen -*-===//
//
// Passes over the liger dialect. Defs are kept in alphabetical order.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_TRANSFORMS_PASSES_TD
#define LIGER_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def FuseAddRMSNormPass : Pass<"liger-fuse-add-rms-norm"> {
  let summary = "Fuse a residual add and the RMSNorm of the sum into one rowwise group";
  let description = [{
    Rewrites `liger.add` followed by `liger.rms_norm` of the sum into a
    rowwise group holding one `liger.add_rms_norm`, which returns both the
    normed value and the new residual stream (so the sum may have other
    users). The pre-norm of every decoder layer after the first.

    ```mlir
    %s = liger.add %h, %res : tensor<?x4096xbf16>
    %n = liger.rms_norm %s, %w eps = 1.000000e-05 : tensor<?x4096xbf16>, tensor<4096xbf16>
    // becomes
    %n, %s = liger.fusion rowwise(%h, %res, %w) : (...) -> (...) {
      %0, %1 = liger.add_rms_norm %a, %b, %g eps = 1.000000e-05 : ...
      liger.yield %0, %1 : ...
    }
    ```
  }];
  let dependentDialects = ["::mlir::liger::LigerDialect"];
  let options = [
    Option<"report", "report", "bool", /*default=*/"false",
           "Print what fused into what, and why chains were left alone">,
    Option<"allowExtraOutputs", "allow-extra-outputs", "bool", /*default=*/"true",
           "Let an intermediate read outside a group become an extra result "
           "(otherwise the chain is left alone)">
  ];
  let statistics = [
    Statistic<"numGroups", "groups", "Number of fusion groups formed">
  ];
}

def FuseElementwisePass : Pass<"liger-fuse-elementwise"> {
  let summary = "Fuse elementwise ops into the group or op that produces their operand";
  let description = [{
    Grows rowwise groups along producer -> consumer edges: an elementwise op
    or gated activation (`silu`, `gelu`, `swiglu`, `geglu`, `add`, `mul`)
    joins the rowwise op or group that produces one of its operands (norms,
    RoPE, softmax, other elementwise ops), so chains such as norm -> mul ->
    silu become one kernel that reads each input once. With `into-matmul`,
    it also joins a matmul group as epilogue (a residual add after a
    projection). An intermediate that other ops read becomes an extra result
    (`allow-extra-outputs`).

    ```mlir
    %a = liger.silu %x : tensor<?x128xf32>
    %b = liger.mul %a, %y : tensor<?x128xf32>
    // becomes one rowwise group computing %b from %x and %y
    ```
  }];
  let dependentDialects = ["::mlir::liger::LigerDialect"];
  let options = [
    Option<"report", "report", "bool", /*default=*/"false",
           "Print what fused into what, and why chains were left alone">,
    Option<"allowExtraOutputs", "allow-extra-outputs", "bool", /*default=*/"true",
           "Let an intermediate read outside a group become an extra result "
           "(otherwise the chain is left alone)">,
    Option<"intoMatmul", "into-matmul", "bool", /*default=*/"true",
           "Also fuse elementwise consumers into matmul groups (epilogue)">
  ];
  let statistics = [
    Statistic<"numGroups", "groups", "Number of fusion groups formed">
  ];
}

def FuseGatedMLPPass : Pass<"liger-fuse-gated-mlp"> {
  let summary = "Fuse the gate and up projections and their gated activation into one matmul group";
  let description = [{
    Matches `liger.swiglu` (or `liger.geglu`) whose gate and up operands are
    `liger.linear` projections of the same activation, read by nothing else,
    and groups the two projections and the activation: one GEMM over the
    concatenated weights with the activation in its epilogue, so neither
    projection is written to memory. The down projection stays a separate
    group.

    ```mlir
    %g = liger.linear %x, %wg : tensor<?x4096xbf16>, tensor<14336x4096xbf16>
    %u = liger.linear %x, %wu : tensor<?x4096xbf16>, tensor<14336x4096xbf16>
    %h = liger.swiglu %g, %u : tensor<?x14336xbf16>
    // becomes
    %h = liger.fusion matmul(%x, %wg, %wu) : (...) -> tensor<?x14336xbf16> { ... }
    ```

    With `gradients` (on by default here; `liger-fuse` turns it on with
    `gradient-epilogues`, which `liger-compile` sets unless
    `--no-matmul-kernels`), the
    backward's `liger.swiglu_grad` (`liger.geglu_grad`) whose incoming
    gradient is `liger.linear_grad_input` (dh = dy · W_down) joins that
    product: one matmul group, the gradient in the dx GEMM's epilogue
    reading gate and up at each element and writing dgate and dup, so dh
    is never stored. A dh read elsewhere too becomes an extra result. Only
    bf16 and f16 (the matmul templates' dtypes) fuse.

    ```mlir
    %dh = liger.linear_grad_input %dy, %wd : tensor<?x4096xbf16>, tensor<4096x14336xbf16>
    %dg, %du = liger.swiglu_grad %dh, %g, %u : tensor<?x14336xbf16>
    // becomes
    %dg, %du = liger.fusion matmul(%dy, %wd, %g, %u) : (...) -> (...) { ... }
    ```
  }];
  let dependentDialects = ["::mlir::liger::LigerDialect"];
  let options = [
    Option<"report", "report", "bool", /*default=*/"false",
           "Print what fused into what, and why chains were left alone">,
    Option<"allowExtraOutputs", "allow-extra-outputs", "bool", /*default=*/"true",
           "Let an intermediate read outside a group become an extra result "
           "(otherwise the chain is left alone)">,
    Option<"gradients", "gradients", "bool", /*default=*/"true",
           "Also fuse a gated activation's gradient into the down "
           "projection's dx product (liger.linear_grad_input)">
  ];
  let statistics = [
    Statistic<"numGroups", "groups", "Number of fusion groups formed">
  ];
}

def FuseLinearCrossEntropyPass : Pass<"liger-fuse-linear-cross-entropy"> {
  let summary = "Fuse the lm_head projection into the cross-entropy loss (no logits in memory)";
  let description = [{
    Rewrites `liger.cross_entropy` of logits produced by `liger.linear` into
    `liger.fused_linear_cross_entropy` in a loss group, when nothing else
    reads the logits (otherwise they would be stored anyway) and the loss
    has no class weights. A `liger.fused_linear_cross_entropy` that is not in
    a group yet is wrapped in one. Its backward,
    `liger.fused_linear_cross_entropy_grad` of the same hidden states,
    weight, targets, bias and attributes, joins that loss group (one plan
    for the loss and both gradients); one of other targets or attributes,
    or whose incoming gradient is computed from the loss in between, is
    reported and left alone.

    ```mlir
    %logits = liger.linear %h, %w : tensor<?x4096xbf16>, tensor<128256x4096xbf16>
    %loss = liger.cross_entropy %logits, %t : tensor<?x128256xbf16>, tensor<?xi64>
    // becomes
    %loss = liger.fusion loss(%h, %w, %t) : (...) -> tensor<f32> {
      %0 = liger.fused_linear_cross_entropy %a, %b, %c : ...
      liger.yield %0 : tensor<f32>
    }
    ```
  }];
  let dependentDialects = ["::mlir::liger::LigerDialect"];
  let options = [
    Option<"report", "report", "bool", /*default=*/"false",
           "Print what fused into what, and why chains were left alone">,
    Option<"allowExtraOutputs", "allow-extra-outputs", "bool", /*default=*/"true",
           "Let an intermediate read outside a group become an extra result "
           "(otherwise the chain is left alone)">
  ];
  let statistics = [
    Statistic<"numGroups", "groups", "Number of fusion groups formed">
  ];
}

def FuseCrossEntropyGradPass : Pass<"liger-fuse-cross-entropy-grad"> {
  let summary = "Fuse a cross-entropy loss and its gradient into one rowwise group";
  let description = [{
    A `liger.cross_entropy` and a `liger.cross_entropy_grad` of the same loss
    (the same logits, targets, class weights and attributes; the gradient
    after the loss in one block) become one rowwise group. The GPU kernel
    then computes the loss and writes the gradient in one pass over the rows
    (the gradient re-reads each row right after the loss read it, mostly
    from L2): the logits leave memory once instead of three times (loss,
    then the gradient's logsumexp and its gradient pass). Every result of
    the loss must be read (the kernel writes them all).

    ```mlir
    %loss = liger.cross_entropy %logits, %t : tensor<?x128256xbf16>, tensor<?xi64>
    %dlogits = liger.cross_entropy_grad %logits, %t, %dloss : tensor<?x128256xbf16>, tensor<?xi64>, tensor<f32>
    // becomes
    %r:2 = liger.fusion rowwise(%logits, %t, %dloss) : (...) -> (tensor<f32>, tensor<?x128256xbf16>) {
      ... liger.cross_entropy ... liger.cross_entropy_grad ...
    }
    ```
  }];
  let dependentDialects = ["::mlir::liger::LigerDialect"];
  let options = [
    Option<"report", "report", "bool", /*default=*/"false",
           "Print what fused into what, and why chains were left alone">,
    Option<"allowExtraOutputs", "allow-extra-outputs", "bool", /*default=*/"true",
           "Let an intermediate read outside a group become an extra result "
           "(otherwise the chain is left alone)">
  ];
  let statistics = [
    Statistic<"numGroups", "groups", "Number of fusion groups formed">
  ];
}

def FuseLoRAPass : Pass<"liger-fuse-lora"> {
  let summary = "Fuse a LoRA projection with the activation and residual add that follow it";
  let description = [{
    Groups `liger.lora_linear` with its single activation consumer (`silu`,
    `gelu`) and then a single residual `liger.add`, into one matmul group:
    the base and low-rank products share the loads of x, and the epilogue
    applies the activation and the residual before the one store.

    ```mlir
    %p = liger.lora_linear %x, %w, %a, %b scale = 2.000000e+00 : ...
    %o = liger.add %p, %res : tensor<?x4096xbf16>
    // becomes one matmul group computing %o
    ```

    A weight that only the projection reads, as `linalg.transpose`
    (permutation [1, 0], into a `tensor.empty` of its own) of W `[K, N]`,
    joins the group: the kernel reads W itself MN-major, as
    `liger.linear_grad_input` reads it. That is the LoRA layer's dx,
    `dy · W + s · (dy · B) · A` = `liger.lora_linear` of dy, Wᵀ, Bᵀ and Aᵀ
    (Bᵀ and Aᵀ are small: the caller transposes them).
  }];
  let dependentDialects = ["::mlir::liger::LigerDialect"];
  let options = [
    Option<"report", "report", "bool", /*default=*/"false",
           "Print what fused into what, and why chains were left alone">,
    Option<"allowExtraOutputs", "allow-extra-outputs", "bool", /*default=*/"true",
           "Let an intermediate read outside a group become an extra result "
           "(otherwise the chain is left alone)">
  ];
  let statistics = [
    Statistic<"numGroups", "groups", "Number of fusion groups formed">
  ];
}

def FuseNormLinearPass : Pass<"liger-fuse-norm-linear"> {
  let summary = "Fuse an RMSNorm into the projections that read it (norm as matmul prologue)";
  let description = [{
    When every reader of a `liger.rms_norm` result is a projection (a bare
    `liger.linear`/`liger.lora_linear`, or a matmul group whose projections
    read it), the norm becomes the prologue of each reader's matmul group.
    The GPU lowering uses y = rstd ⊙ (x · (diag(g)·W)ᵀ): the row statistics
    come from the A tiles the main loop loads anyway, and gamma is applied
    on load (or folded into a constant W). The normed activation is never
    written. Each group recomputes the row statistics, so at most
    `max-consumers` readers are fused; a norm whose `rstd` result is read is
    left alone.

    In `liger-fuse` (and `liger-compile`) the fold is off unless asked for
    (`norm-prologue=true`, `--norm-prologue`): on the H200 the norm as its
    own rowwise kernel followed by the plain projection measured faster
    than the prologue (docs/benchmarks.md), so there the pass only reports
    the norms it would fold.

    ```mlir
    %n = liger.rms_norm %x, %g eps = 1.000000e-05 : tensor<?x4096xbf16>, tensor<4096xbf16>
    %q = liger.linear %n, %wq : tensor<?x4096xbf16>, tensor<4096x4096xbf16>
    // becomes
    %q = liger.fusion matmul(%x, %g, %wq) : (...) -> tensor<?x4096xbf16> { rms_norm, linear }
    ```
  }];
  let dependentDialects = ["::mlir::liger::LigerDialect"];
  let options = [
    Option<"report", "report", "bool", /*default=*/"false",
           "Print what fused into what, and why chains were left alone">,
    Option<"allowExtraOutputs", "allow-extra-outputs", "bool", /*default=*/"true",
           "Let an intermediate read outside a group become an extra result "
           "(otherwise the chain is left alone)">,
    Option<"maxConsumers", "max-consumers", "int64_t", /*default=*/"4",
           "Fuse a norm into at most this many projection groups">,
    Option<"fold", "fold", "bool", /*default=*/"true",
           "Fold the norms that match (false: report them and leave them as "
           "rowwise kernels; liger-fuse sets it from norm-prologue)">
  ];
  let statistics = [
    Statistic<"numGroups", "groups", "Number of fusion groups formed">
  ];
}

def FuseQKVRoPEPass : Pass<"liger-fuse-qkv-rope"> {
  let summary = "Fuse the q and k projections, the head split and RoPE into one matmul group";
  let description = [{
    Matches `liger.rope` whose q and k operands come from `liger.linear`
    projections of the same activation through the head split
    (`tensor.expand_shape` then `linalg.transpose`), each read by nothing
    else, and groups the projections, the layout ops and the rotation: one
    GEMM over [Wq; Wk] with RoPE applied to the accumulators before the
    store. The v projection and attention stay outside.

    ```mlir
    %q = liger.linear %n, %wq ...
    %k = liger.linear %n, %wk ...
    // expand_shape + transpose of each ...
    %qr, %kr = liger.rope %qh, %kh, %cos, %sin ...
    // becomes one matmul group returning %qr, %kr
    ```
  }];
  let dependentDialects = ["::mlir::liger::LigerDialect"];
  let options = [
    Option<"report", "report", "bool", /*default=*/"false",
           "Print what fused into what, and why chains were left alone">,
    Option<"allowExtraOutputs", "allow-extra-outputs", "bool", /*default=*/"true",
           "Let an intermediate read outside a group become an extra result "
           "(otherwise the chain is left alone)">
  ];
  let statistics = [
    Statistic<"numGroups", "groups", "Number of fusion groups formed">
  ];
}

def PlanLossPass : Pass<"liger-plan-loss", "::mlir::ModuleOp"> {
  let summary = "Plan each lm_head loss group as chunked kernels";
  let description = [{
    For every `loss` group holding `liger.fused_linear_cross_entropy` (and
    optionally its `liger.fused_linear_cross_entropy_grad`), writes the
    functions of one chunk of tokens beside the group's function —
    `@<fn>_loss<i>_logits` (the chunk's logits; with a bias it takes the
    bias after W and the matmul's epilogue adds it), `_ce` (its summed loss
    and, over the logits, their gradient for an incoming gradient `%g`; for
    `reduction = none` each row's loss and the gradient for each row's
    incoming gradient, both `[rows]`; with `z_loss` the z-loss term apart,
    a second result), and with
    the backward `_dx` (dx = G·W), `_dw0` (the first chunk's dW = Gᵀ·x) and
    `_dw` (dW += Gᵀ·x in W's dtype; with `dw-f32` into an f32 buffer, and
    no `_dw0`) — and records the plan on the group as
    `liger.plan`: the chunk size that keeps one chunk's logits within
    `memory-budget` bytes (whole 128-row tiles where it is at least 128
    rows) and those functions; each chunk function carries `liger.chunk_rows`,
    the most rows a launch of it has (liger-lower-to-gpu may give its
    matmul kernels a narrow-tile variant). liger-compile compiles them to
    kernels and writes the plan into the bundle's manifest; a runtime runs it chunk by
    chunk (liger.runtime.run_loss_plan), so the [tokens, vocab] logits are
    never held. liger.ops.fused_linear_cross_entropy compiles its two
    lm_head ops through this plan and runs these kernels (choosing the chunk
    at call time by the same rule). The bias's gradient, the column sums of
    G, has no function of its own: the caller adds up each chunk's G, which
    it holds for dx and dW anyway (one more read of it, as Liger-Kernel's
    chunk loop does).

    Left alone, with a warning naming the reason: f32 (the matmul kernels
    take bf16/f16), a backward whose operands (bias among them) or
    attributes differ from the forward's, class weights with a z-loss under
    `reduction = mean`, and a budget that holds no row of logits.
  }];
  let options = [
    Option<"memoryBudget", "memory-budget", "int64_t",
           /*default=*/"::mlir::liger::kDefaultLossMemoryBudget",
           "Bytes one chunk's logits may take">,
    Option<"dwF32", "dw-f32", "bool", /*default=*/"false",
           "Sum dW across chunks in an f32 buffer of W's shape (rounded once "
           "by the caller: exact sums for 4 bytes per weight): `_dw` adds "
           "into f32 and there is no `_dw0`">,
  ];
  let statistics = [
    Statistic<"numPlanned", "num-planned", "Loss groups planned">,
  ];
}

def PrintSummaryPass : Pass<"liger-print-summary", "ModuleOp"> {
  let summary = "Print what each function computes: liger ops, weights, FLOPs";
  let description = [{
    Prints, for every function of the module, a report of its liger ops: how
    many of each kind, the weight tensors they read (elements and bytes,
    counting a weight shared by several ops once), and the matrix FLOPs per
    token of its projections (`2·N·K` for `x · Wᵀ` with W `[N, K]`, plus the
    LoRA branch `2·r·(K + N)`). Ops of other dialects (layout ops such as
    `tensor.expand_shape` between liger ops) are counted by name. The IR is
    not changed.

    Example, for a function with two projections of a 4096-wide input:

    ```
    liger summary of @f
      liger ops: 2
        liger.linear                 2   weights 20,971,520 elements   FLOP/token 41,943,040
      other ops: 0
      weights: 20,971,520 elements, 40.00 MiB
      projection FLOP/token: 41,943,040
    ```

    The report goes to standard output (`-o /dev/null` silences the IR).
  }];
  let statistics = [
    Statistic<"numLigerOps", "liger-ops", "Number of liger ops summarized">
  ];
}

#endif // LIGER_TRANSFORMS_PASSES_TD
