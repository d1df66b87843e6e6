//===- LigerDialect.td - the liger dialect ---------------------*- tablegen -*-===//
//
// The `liger` dialect's definition alone, for the files that define its ops
// and enums (LigerBase.td) and its kernel attributes (LigerKernelAttrs.td),
// each generated apart.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_DIALECT_LIGER_IR_LIGERDIALECT_TD
#define LIGER_DIALECT_LIGER_IR_LIGERDIALECT_TD

include "mlir/IR/OpBase.td"

def Liger_Dialect : Dialect {
  let name = "liger";
  let summary = "Tensor-level ops of transformer layers, for fusion into GPU kernels.";
  let description = [{
    The `liger` dialect describes the layers of transformer models at the
    level a model author thinks in: RMSNorm, rotary embeddings, projections
    (with or without LoRA), gated activations and the training losses. Ops
    work on ranked tensors of `bf16`, `f16` or `f32`; hidden, head, vocabulary
    and weight sizes are static, while the leading token dimensions (batch,
    sequence) may be dynamic. Every op computes its reductions and matrix
    products in `f32`.

    Fusion passes group chains of these ops into `liger.fusion` regions, and
    the lowerings turn each group into one GPU kernel; `liger-lower-to-linalg`
    gives every op its reference semantics on the CPU.

    Every result type can be inferred from the operands and attributes, so a
    frontend builds ops without spelling result types, and the textual form
    prints only the operand types.
  }];
  let cppNamespace = "::mlir::liger";
  // Two groups of attributes, each generated apart (LigerAttrs.h.inc and
  // LigerKernelAttrs.h.inc): the kernel attributes hold the kernel ABI's
  // records, whose header only their users include. LigerDialect.cpp
  // dispatches between the two generated parsers and printers.
  let useDefaultAttributePrinterParser = 0;
  let extraClassDeclaration = [{
    Attribute parseAttribute(DialectAsmParser &parser,
                             Type type) const override;
    void printAttribute(Attribute attr,
                        DialectAsmPrinter &printer) const override;
    /// Registers the kernel attributes (LigerKernelAttrs.cpp).
    void registerKernelAttributes();
  }];
  // liger.kernel_config and liger.kernel_info hold their attributes.
  let hasOperationAttrVerify = 1;
  let hasCanonicalizer = 0;
}

#endif // LIGER_DIALECT_LIGER_IR_LIGERDIALECT_TD
