// Reproducer (not yet a test; a diagnostic, not a crash): a valid
// liger.rope whose q and k are one value and whose cos and sin are one
// table does not compile:
//
//   error: 'liger.fusion' op cannot be lowered to a RoPE kernel: its op must
//   read the group inputs in order
//
// liger-lower-to-gpu wraps the op in a group whose inputs are (%q, %c), each
// value once (createFusionGroup), and buildRoPEKernel
// (lib/Conversion/LigerToGPU/RoPEKernel.cpp) requires operand i to be block
// argument i.
//
//   liger-compile lower-to-gpu-rope-aliased-operands.mlir --emit=gpu --target=sm_90a -o /dev/null
//
// Expected: a RoPE kernel (exit 0) whose parameters are the group's inputs,
// q and k bound to one parameter, cos and sin to another.
func.func @rope_aliased(%q: tensor<?x4x?x64xbf16>, %c: tensor<1x?x64xbf16>) -> (tensor<?x4x?x64xbf16>, tensor<?x4x?x64xbf16>) {
  %a, %b = liger.rope %q, %q, %c, %c : tensor<?x4x?x64xbf16>, tensor<?x4x?x64xbf16>, tensor<1x?x64xbf16>
  return %a, %b : tensor<?x4x?x64xbf16>, tensor<?x4x?x64xbf16>
}
