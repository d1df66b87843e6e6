// RUN: liger-opt %s --liger-cpu-pipeline | FileCheck %s --implicit-check-not="liger." --implicit-check-not="linalg." --implicit-check-not="math." --implicit-check-not="memref." --implicit-check-not="func.func"

// The whole pipeline ends in the llvm dialect: erf becomes a libm call (it
// has no LLVM intrinsic), tanh and exp stay intrinsics, and results are
// buffers allocated for the caller.
// CHECK: llvm.func @erff(f32) -> f32
// CHECK-LABEL: llvm.func @gelus
//       CHECK:   llvm.call @malloc
//       CHECK:   llvm.call @erff
//       CHECK:   llvm.intr.tanh
func.func @gelus(%x: tensor<?x16xf32>) -> (tensor<?x16xf32>, tensor<?x16xf32>) {
  %a = liger.gelu %x : tensor<?x16xf32>
  %b = liger.gelu %x approximate = tanh : tensor<?x16xf32>
  return %a, %b : tensor<?x16xf32>, tensor<?x16xf32>
}

// bf16 conversions are expanded to integer arithmetic, so the JIT needs no
// runtime helper for them.
// CHECK-LABEL: llvm.func @bf16_silu
//   CHECK-NOT:   llvm.fptrunc {{.*}} to bf16
//       CHECK:   llvm.intr.exp
//   CHECK-NOT:   llvm.fptrunc {{.*}} to bf16
//       CHECK:   llvm.return
func.func @bf16_silu(%x: tensor<?x16xbf16>) -> tensor<?x16xbf16> {
  %y = liger.silu %x : tensor<?x16xbf16>
  return %y : tensor<?x16xbf16>
}

// The gradient of flattened hidden states split back into batch and
// sequence: an expand_shape with two dynamic sizes in one group, which
// upstream expand-strided-metadata cannot lower (liger-lower-expand-shape
// goes first). The result aliases an input, so it is returned as a copy the
// caller owns (no bufferization op is left for the JIT).
// CHECK-LABEL: llvm.func @tokens_split_in_two
//   CHECK-NOT:   builtin.unrealized_conversion_cast
//       CHECK:   llvm.call @malloc
//       CHECK:   "llvm.intr.memcpy"
//       CHECK:   llvm.return
func.func @tokens_split_in_two(%x: tensor<?x?x64xf32>, %y: tensor<?x64xf32>) -> tensor<?x?x64xf32> {
  %c0 = arith.constant 0 : index
  %d0 = tensor.dim %x, %c0 : tensor<?x?x64xf32>
  %c1 = arith.constant 1 : index
  %d1 = tensor.dim %x, %c1 : tensor<?x?x64xf32>
  %e = tensor.expand_shape %y [[0, 1], [2]] output_shape [%d0, %d1, 64] : tensor<?x64xf32> into tensor<?x?x64xf32>
  return %e : tensor<?x?x64xf32>
}
