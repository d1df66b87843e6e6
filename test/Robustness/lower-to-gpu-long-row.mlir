// A rowwise op over a row of 2^20 elements compiles in about the time of a
// short row (the row template loops past its register budget); it used to
// unroll the whole row and take minutes and over a GiB, growing with the row.
//
// RUN: timeout 30 liger-compile %s --emit=ptx --target=sm_90a -o - | FileCheck %s
// CHECK: .visible .entry softmax_long_row_rowwise_0(
func.func @softmax_long_row(%x: tensor<?x1048576xbf16>) -> tensor<?x1048576xbf16> {
  %y = liger.softmax %x : tensor<?x1048576xbf16>
  return %y : tensor<?x1048576xbf16>
}
