//===- Passes.td - liger transformation and analysis passes -*- tablegen -*-===//
//
// Passes over the liger dialect. Defs are kept in alphabetical order.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_TRANSFORMS_PASSES_TD
#define LIGER_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

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
