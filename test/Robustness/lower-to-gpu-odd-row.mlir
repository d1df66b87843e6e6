// A rowwise op over an odd row length (7) compiles on both targets; it used
// to die by SIGSEGV in the row template (every odd length and every rowwise
// op did), and liger-opt --liger-lower-to-gpu with it.
//
// RUN: liger-compile %s --emit=ptx --target=sm_90a -o - | FileCheck %s
// RUN: liger-compile %s --emit=ptx --target=sm_80 -o - | FileCheck %s
// CHECK: .visible .entry rms_norm_odd_row_rowwise_0(
func.func @rms_norm_odd_row(%x: tensor<?x7xbf16>, %w: tensor<7xbf16>) -> tensor<?x7xbf16> {
  %y = liger.rms_norm %x, %w : tensor<?x7xbf16>, tensor<7xbf16>
  return %y : tensor<?x7xbf16>
}
