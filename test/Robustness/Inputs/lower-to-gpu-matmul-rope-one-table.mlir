// Reproducer (not yet a test): liger-compile --matmul-kernels dies by
// SIGSEGV in MatmulKernelBuilder::ropePair
// (lib/Conversion/LigerToGPU/MatmulKernel.cpp) when one table is RoPE's cos
// and sin. liger-fuse-qkv-rope makes the group correctly, with the table one
// input read twice; the template binds each block argument to one role in
// an if/else chain (x, accumulator, cos, sin, ...), so the argument that is
// cos never becomes sin and the sin table's parameter stays null.
//
//   liger-compile lower-to-gpu-matmul-rope-one-table.mlir --matmul-kernels --emit=gpu --target=sm_90a -o /dev/null
//   (and --target=sm_80)
//
// Expected: a kernel (exit 0) whose cos and sin parameters are the one
// table.
func.func @qk_rope_one_table(%x: tensor<?x?x64xbf16>, %wq: tensor<64x64xbf16>, %wk: tensor<32x64xbf16>,
                             %cs: tensor<1x?x16xbf16>) -> (tensor<?x4x?x16xbf16>, tensor<?x2x?x16xbf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %b = tensor.dim %x, %c0 : tensor<?x?x64xbf16>
  %t = tensor.dim %x, %c1 : tensor<?x?x64xbf16>
  %q = liger.linear %x, %wq : tensor<?x?x64xbf16>, tensor<64x64xbf16>
  %k = liger.linear %x, %wk : tensor<?x?x64xbf16>, tensor<32x64xbf16>
  %q4 = tensor.expand_shape %q [[0], [1], [2, 3]] output_shape [%b, %t, 4, 16] : tensor<?x?x64xbf16> into tensor<?x?x4x16xbf16>
  %k4 = tensor.expand_shape %k [[0], [1], [2, 3]] output_shape [%b, %t, 2, 16] : tensor<?x?x32xbf16> into tensor<?x?x2x16xbf16>
  %qi = tensor.empty(%b, %t) : tensor<?x4x?x16xbf16>
  %ki = tensor.empty(%b, %t) : tensor<?x2x?x16xbf16>
  %qh = linalg.transpose ins(%q4 : tensor<?x?x4x16xbf16>) outs(%qi : tensor<?x4x?x16xbf16>) permutation = [0, 2, 1, 3]
  %kh = linalg.transpose ins(%k4 : tensor<?x?x2x16xbf16>) outs(%ki : tensor<?x2x?x16xbf16>) permutation = [0, 2, 1, 3]
  %qr, %kr = liger.rope %qh, %kh, %cs, %cs : tensor<?x4x?x16xbf16>, tensor<?x2x?x16xbf16>, tensor<1x?x16xbf16>
  return %qr, %kr : tensor<?x4x?x16xbf16>, tensor<?x2x?x16xbf16>
}
