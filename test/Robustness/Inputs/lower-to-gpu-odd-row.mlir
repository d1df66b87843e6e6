// Reproducer (not yet a test): liger-compile dies by SIGSEGV in
// RowKernelBuilder::emitElementwise (lib/Conversion/LigerToGPU/RowKernel.cpp)
// on a rowwise op whose row length (7) is odd; every rowwise op and every
// odd length does it (7, 1001, 4097, 50257, ...), on both targets, and so
// does liger-opt --liger-lower-to-gpu.
//
//   liger-compile lower-to-gpu-odd-row.mlir --emit=gpu --target=sm_90a -o /dev/null
//
// Expected once rowwise kernels take masked tails: a kernel (exit 0).
func.func @rms_norm_odd_row(%x: tensor<?x7xbf16>, %w: tensor<7xbf16>) -> tensor<?x7xbf16> {
  %y = liger.rms_norm %x, %w : tensor<?x7xbf16>, tensor<7xbf16>
  return %y : tensor<?x7xbf16>
}
