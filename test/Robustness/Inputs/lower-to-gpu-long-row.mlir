// Reproducer (not yet a test): liger-compile takes minutes (over 60 s on
// one core; about 1.2 GiB) to lower a rowwise op over a row of 2^20
// elements, because the rowwise template unrolls the whole row
// (lib/Conversion/LigerToGPU/RowKernel.cpp); the time grows with the row, so
// a mutated size of 2^31 does not finish.
//
//   liger-compile lower-to-gpu-long-row.mlir --emit=gpu --target=sm_90a -o /dev/null
//
// Expected once the template loops past an unroll budget: a kernel in
// about the time of a short row.
func.func @softmax_long_row(%x: tensor<?x1048576xbf16>) -> tensor<?x1048576xbf16> {
  %y = liger.softmax %x : tensor<?x1048576xbf16>
  return %y : tensor<?x1048576xbf16>
}
