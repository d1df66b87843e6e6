//===- LigerBase.td - liger dialect, enums and shared constraints -*- tablegen -*-===//
//
// The `liger` dialect: tensor-level ops of transformer layers (norms, RoPE,
// projections, gated activations, losses). This file holds what every op
// shares: the dialect, its enum attributes, the tensor type constraints and
// the `Liger_Op` base class with the dialect-wide element-type invariant.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_DIALECT_LIGER_IR_LIGERBASE_TD
#define LIGER_DIALECT_LIGER_IR_LIGERBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

include "liger/Dialect/Liger/IR/LigerDialect.td"

//===----------------------------------------------------------------------===//
// Enums
//
// Inside op formats, enum attributes print as bare words (`casting = gemma`)
// through the EnumKeyword custom directive (LigerOps.cpp).
//===----------------------------------------------------------------------===//

def Liger_CastingMode : I32EnumAttr<"CastingMode",
    "how RMSNorm mixes the input dtype and fp32 (Hugging Face conventions)", [
      I32EnumAttrCase<"llama", 0>,
      I32EnumAttrCase<"gemma", 1>,
      I32EnumAttrCase<"none", 2>]> {
  let cppNamespace = "::mlir::liger";
  let genSpecializedAttr = 0;
}
def Liger_CastingModeAttr : EnumAttr<Liger_Dialect, Liger_CastingMode, "casting_mode">;

def Liger_Reduction : I32EnumAttr<"Reduction",
    "how a loss reduces over tokens", [
      I32EnumAttrCase<"none", 0>,
      I32EnumAttrCase<"mean", 1>,
      I32EnumAttrCase<"sum", 2>]> {
  let cppNamespace = "::mlir::liger";
  let genSpecializedAttr = 0;
}
def Liger_ReductionAttr : EnumAttr<Liger_Dialect, Liger_Reduction, "reduction">;

def Liger_KLReduction : I32EnumAttr<"KLReduction",
    "how KL divergence reduces (torch.nn.KLDivLoss conventions)", [
      I32EnumAttrCase<"none", 0>,
      I32EnumAttrCase<"sum", 1>,
      I32EnumAttrCase<"mean", 2>,
      I32EnumAttrCase<"batchmean", 3>]> {
  let cppNamespace = "::mlir::liger";
  let genSpecializedAttr = 0;
}
def Liger_KLReductionAttr : EnumAttr<Liger_Dialect, Liger_KLReduction, "kl_reduction">;

def Liger_GeluApproximation : I32EnumAttr<"GeluApproximation",
    "the GELU formula: exact (erf) or the tanh approximation", [
      I32EnumAttrCase<"none", 0>,
      I32EnumAttrCase<"tanh", 1>]> {
  let cppNamespace = "::mlir::liger";
  let genSpecializedAttr = 0;
}
def Liger_GeluApproximationAttr
    : EnumAttr<Liger_Dialect, Liger_GeluApproximation, "gelu_approximation">;

//===----------------------------------------------------------------------===//
// Attribute constraints
//===----------------------------------------------------------------------===//

def Liger_PositiveF32Attr : ConfinedAttr<F32Attr, [AttrConstraint<
    CPred<"::llvm::cast<::mlir::FloatAttr>($_self).getValueAsDouble() > 0.0">,
    "whose value is positive">]>;
// (A divisor whose reciprocal the kernels take in f32: a subnormal one's
// overflows.)
def Liger_PositiveFiniteF32Attr : ConfinedAttr<F32Attr, [AttrConstraint<
    CPred<"::llvm::cast<::mlir::FloatAttr>($_self).getValue().isNormal() && "
          "::llvm::cast<::mlir::FloatAttr>($_self).getValueAsDouble() > 0.0">,
    "whose value is positive, finite and not subnormal">]>;
def Liger_PositiveI64Attr : ConfinedAttr<I64Attr, [IntMinValue<1>]>;
def Liger_NonNegativeF32Attr : ConfinedAttr<F32Attr, [AttrConstraint<
    CPred<"::llvm::cast<::mlir::FloatAttr>($_self).getValueAsDouble() >= 0.0">,
    "whose value is non-negative">]>;
def Liger_UnitIntervalF32Attr : ConfinedAttr<F32Attr, [AttrConstraint<
    CPred<"::llvm::cast<::mlir::FloatAttr>($_self).getValueAsDouble() >= 0.0 && "
          "::llvm::cast<::mlir::FloatAttr>($_self).getValueAsDouble() <= 1.0">,
    "whose value is in [0, 1]">]>;
def Liger_FiniteF32Attr : ConfinedAttr<F32Attr, [AttrConstraint<
    CPred<"::llvm::cast<::mlir::FloatAttr>($_self).getValue().isFinite()">,
    "whose value is finite">]>;

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

// Element widths are narrowed to bf16/f16/f32 and i32/i64 once, by the
// LigerOpInvariants trait on Liger_Op; operands only say float or integer.
def Liger_FloatTensor : RankedTensorOf<[AnyFloat]>;
def Liger_IndexTensor : RankedTensorOf<[AnySignlessInteger]>;

//===----------------------------------------------------------------------===//
// Base op
//===----------------------------------------------------------------------===//

// Every ranked-tensor operand and result has a float element type in
// {bf16, f16, f32} or an integer one in {i32, i64}, and every attribute
// that is not one of the op's own carries a dialect prefix.
def Liger_OpInvariants : NativeOpTrait<"LigerOpInvariants"> {
  let cppNamespace = "::mlir::liger";
}

// Every op is pure and infers its result types: elementwise ops through
// SameOperandsAndResultType, the others through InferTypeOpAdaptor (see
// Liger_InferOp), whose inferReturnTypes applies the rules of
// Verification.cpp.
class Liger_Op<string mnemonic, list<Trait> traits = []>
    : Op<Liger_Dialect, mnemonic, !listconcat([Pure, Liger_OpInvariants], traits)>;

class Liger_InferOp<string mnemonic, list<Trait> traits = []>
    : Liger_Op<mnemonic, !listconcat([InferTypeOpAdaptor], traits)>;

#endif // LIGER_DIALECT_LIGER_IR_LIGERBASE_TD
