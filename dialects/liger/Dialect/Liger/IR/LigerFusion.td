//===- LigerFusion.td - fusion groups -----------------------*- tablegen -*-===//
//
// liger.fusion holds a group of liger ops that one kernel will implement;
// its `kind` names the kernel template. The fusion passes create groups; the
// GPU lowering turns each into one kernel and the reference lowering inlines
// it.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_DIALECT_LIGER_IR_LIGERFUSION_TD
#define LIGER_DIALECT_LIGER_IR_LIGERFUSION_TD

include "mlir/Interfaces/ControlFlowInterfaces.td"

def Liger_FusionKind : I32EnumAttr<"FusionKind",
    "the kernel template that implements a fusion group", [
      I32EnumAttrCase<"rowwise", 0>,
      I32EnumAttrCase<"matmul", 1>,
      I32EnumAttrCase<"loss", 2>,
      I32EnumAttrCase<"attention", 3>]> {
  let cppNamespace = "::mlir::liger";
  let genSpecializedAttr = 0;
}
def Liger_FusionKindAttr : EnumAttr<Liger_Dialect, Liger_FusionKind, "fusion_kind">;

def Liger_FusionOp : Liger_Op<"fusion", [IsolatedFromAbove,
    SingleBlockImplicitTerminator<"::mlir::liger::YieldOp">]> {
  let summary = "a group of liger ops implemented by one kernel";
  let description = [{
    The body computes the group's results from its inputs (the block
    arguments) and ends in `liger.yield`. The group is isolated from above:
    everything it reads is an input, so it can become a kernel on its own.
    Each result is written once by the kernel; an intermediate the rest of
    the function also needs is an extra result.

    `kind` names the kernel template, and the verifier checks that the body
    is something that template implements:

    * `rowwise`: norms, RoPE, elementwise and gated activations, softmax, the
      row-local losses and their backward ops; no matrix product. One CTA
      (or a few) per row.
    * `matmul`: one Tensor Core GEMM. One or more projections
      (`liger.linear`, `liger.lora_linear`) that all read the same
      activation (several are one GEMM over concatenated weights), an
      optional RMSNorm prologue producing that activation, and an epilogue
      of elementwise ops, gated activations, RoPE, residual adds and the
      layout ops (`tensor.expand_shape`, `tensor.collapse_shape`,
      `linalg.transpose`, `tensor.empty`, and the `tensor.dim` sizes and
      constants they read) between them; or one gradient product:
      `liger.linear_grad_weight` alone, or `liger.linear_grad_input` alone
      or with an elementwise epilogue (the gated activations' gradients
      among its ops: `dx = dy · W_down` then `liger.swiglu_grad` gives
      dgate and dup in one kernel). A matmul group may have several
      results, each `[rows, N]` (the kernel writes each once).
    * `loss`: one `liger.fused_linear_cross_entropy` (the lm_head and the
      loss in one plan that never stores the logits).
    * `attention`: one `liger.attention` (the attention template: tiles of
      query rows, an online softmax over blocks of keys and values, the
      probabilities never stored).

    ```mlir
    %y, %sum = liger.fusion rowwise (%h, %res, %w)
        : (tensor<?x4096xbf16>, tensor<?x4096xbf16>, tensor<4096xbf16>)
        -> (tensor<?x4096xbf16>, tensor<?x4096xbf16>) {
    ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<?x4096xbf16>, %g: tensor<4096xbf16>):
      %n, %s = liger.add_rms_norm %a, %b, %g eps = 1.000000e-05 : tensor<?x4096xbf16>, tensor<4096xbf16>
      liger.yield %n, %s : tensor<?x4096xbf16>, tensor<?x4096xbf16>
    }
    ```
  }];
  let arguments = (ins Liger_FusionKindAttr:$kind, Variadic<AnyType>:$inputs);
  let results = (outs Variadic<AnyType>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    custom<EnumKeyword>($kind) `(` $inputs `)` attr-dict-with-keyword
    `:` functional-type($inputs, $results) $body
  }];
  let hasRegionVerifier = 1;
  let skipDefaultBuilders = 1;
  let builders = [
    OpBuilder<(ins "::mlir::liger::FusionKind":$kind, "::mlir::TypeRange":$resultTypes,
                   "::mlir::ValueRange":$inputs)>
  ];
  let extraClassDeclaration = [{
    /// The terminator of the body.
    ::mlir::liger::YieldOp getYield();
  }];
}

def Liger_YieldOp : Liger_Op<"yield", [Terminator, HasParent<"::mlir::liger::FusionOp">,
    ReturnLike]> {
  let summary = "the results of a fusion group";
  let description = [{
    Ends the body of `liger.fusion`; its operands are the group's results,
    in order.

    ```mlir
    liger.yield %n, %s : tensor<?x4096xbf16>, tensor<?x4096xbf16>
    ```
  }];
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
  // The no-operand builder SingleBlockImplicitTerminator asks for.
  let builders = [OpBuilder<(ins), [{
    build($_builder, $_state, ::mlir::ValueRange());
  }]>];
}

#endif // LIGER_DIALECT_LIGER_IR_LIGERFUSION_TD
