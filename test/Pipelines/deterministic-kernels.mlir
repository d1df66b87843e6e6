// liger-compile writes the same kernels for the same module, every time:
// nothing in the lowering follows the order of pointers (a row program's
// two online max/sum pairs, the student's and the teacher's log-softmax,
// were once collected in their map's address order, which reordered the
// kernel's loads from one compile to the next).
// (The row of 128256 runs in the looped form, which carries the pairs.)
// RUN: liger-compile %s --emit=gpu -o %t.1.mlir
// RUN: liger-compile %s --emit=gpu -o %t.2.mlir
// RUN: diff %t.1.mlir %t.2.mlir
// RUN: liger-compile %s --emit=gpu -o %t.3.mlir
// RUN: diff %t.1.mlir %t.3.mlir
// RUN: liger-compile %s --emit=gpu -o %t.4.mlir
// RUN: diff %t.1.mlir %t.4.mlir
// RUN: liger-compile %s --emit=gpu -o %t.5.mlir
// RUN: diff %t.1.mlir %t.5.mlir
// RUN: liger-compile %s --emit=gpu -o %t.6.mlir
// RUN: diff %t.1.mlir %t.6.mlir
// RUN: FileCheck %s < %t.1.mlir

// CHECK: gpu.func @fwd_rowwise_0
func.func @fwd(%x: tensor<?x128256xbf16>, %y: tensor<?x128256xbf16>, %g: tensor<?xf32>, %l: tensor<?xi64>) -> (tensor<?xf32>, tensor<?x128256xbf16>) {
  %r, %d = liger.fusion rowwise(%x, %y, %g, %l) : (tensor<?x128256xbf16>, tensor<?x128256xbf16>, tensor<?xf32>, tensor<?xi64>) -> (tensor<?xf32>, tensor<?x128256xbf16>) {
  ^bb0(%a: tensor<?x128256xbf16>, %b: tensor<?x128256xbf16>, %c: tensor<?xf32>, %e: tensor<?xi64>):
    %0 = liger.jsd %a, %b labels(%e : tensor<?xi64>) beta = 0.3 temperature = 2.0 per_token : tensor<?x128256xbf16>
    %1 = liger.jsd_grad %a, %b, %c labels(%e : tensor<?xi64>) beta = 0.3 temperature = 2.0 per_token : tensor<?x128256xbf16>, tensor<?xf32>
    liger.yield %0, %1 : tensor<?xf32>, tensor<?x128256xbf16>
  }
  return %r, %d : tensor<?xf32>, tensor<?x128256xbf16>
}
