// liger-compile on LayerNorm with its saved statistics: the forward writes
// each row's mean and rstd (f32 row scalars) beside y; the backward reads
// them and recomputes neither, so its only row reductions are the sums of
// g and of g x_hat, reduced together: one block reduction of two values a
// row, 2 bar.sync and 16 shfl.sync (two values, five shuffles in each warp
// and three across the 8 warps) where recomputing mean and variance took 8
// and 32. Near-miss: the forward's reductions depend on each other (the
// variance reads the mean) and keep a block step each (4 bar.sync, 16
// shfl.sync of one value). ptxas accepts every kernel for sm_90a and sm_80
// without spills.
// REQUIRES: ptxas
// RUN: rm -rf %t.bundle
// RUN: liger-compile %s -o %t.bundle | FileCheck %s --check-prefix=OUT
// RUN: FileCheck %s --check-prefix=MANIFEST < %t.bundle/manifest.json
// Each kernel's barriers and shuffles, counted (ptxas's block layout puts a
// reduction's second barrier before its first shuffles in the text).
// RUN: sed -n '/\.entry forward_rowwise_0(/,/\.entry backward_rowwise_0(/p' %t.bundle/liger_kernels.sm_90a.ptx > %t.fwd.ptx
// RUN: grep bar.sync %t.fwd.ptx | count 4
// RUN: grep shfl.sync.bfly.b32 %t.fwd.ptx | count 16
// RUN: sed -n '/\.entry backward_rowwise_0(/,/\.entry backward_rowwise_0_finish(/p' %t.bundle/liger_kernels.sm_90a.ptx > %t.bwd.ptx
// RUN: grep bar.sync %t.bwd.ptx | count 2
// RUN: grep shfl.sync.bfly.b32 %t.bwd.ptx | count 16
// The two values go through each shuffle step side by side.
// RUN: FileCheck %s --check-prefix=PTX < %t.bwd.ptx
// RUN: ptxas -arch=sm_90a -v %t.bundle/liger_kernels.sm_90a.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: liger-compile %s --target=sm_80 --emit=ptx -o %t.sm80.ptx
// RUN: ptxas -arch=sm_80 -v %t.sm80.ptx -o %t.sm80.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// OUT: liger-compile: 2 kernels for sm_90a in {{.*}}.bundle

// MANIFEST: "name": "forward_rowwise_0",
// MANIFEST: "dtype": "f32",
// MANIFEST-NEXT: "kind": "row_scalars",
// MANIFEST-NEXT: "name": "output1",
// MANIFEST-NEXT: "role": "output",
// MANIFEST: "dtype": "f32",
// MANIFEST-NEXT: "kind": "row_scalars",
// MANIFEST-NEXT: "name": "output2",
// MANIFEST-NEXT: "role": "output",
// The backward's one reduction area: 2 result slots and 8 warps' 2 partials.
// MANIFEST: "dynamic_shared_memory_bytes": 72,
// MANIFEST: "name": "backward_rowwise_0",
// MANIFEST: "dtype": "f32",
// MANIFEST-NEXT: "kind": "row_scalars",
// MANIFEST-NEXT: "name": "input3",
// MANIFEST-NEXT: "role": "input",
// MANIFEST: "dtype": "f32",
// MANIFEST-NEXT: "kind": "row_scalars",
// MANIFEST-NEXT: "name": "input4",
// MANIFEST-NEXT: "role": "input",

// PTX-LABEL: .entry backward_rowwise_0(
// PTX: shfl.sync.bfly.b32 {{%r[0-9]+}}, {{%r[0-9]+}}, 16, 31, -1;
// PTX-NEXT: shfl.sync.bfly.b32 {{%r[0-9]+}}, {{%r[0-9]+}}, 16, 31, -1;
// PTX: shfl.sync.bfly.b32 {{%r[0-9]+}}, {{%r[0-9]+}}, 4, 31, -1;
// PTX-NEXT: shfl.sync.bfly.b32 {{%r[0-9]+}}, {{%r[0-9]+}}, 4, 31, -1;

// PTXAS-NOT: {{[1-9][0-9]*}} bytes spill
// PTXAS: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// No kernel after the last one matched spills either.
// PTXAS-NOT: {{[1-9][0-9]*}} bytes spill

func.func @forward(%x: tensor<?x4096xbf16>, %w: tensor<4096xbf16>, %b: tensor<4096xbf16>) -> (tensor<?x4096xbf16>, tensor<?xf32>, tensor<?xf32>) {
  %y, %m, %r = liger.layer_norm %x, %w, %b eps = 1.0e-5 stats : tensor<?x4096xbf16>, tensor<4096xbf16>, tensor<4096xbf16>
  return %y, %m, %r : tensor<?x4096xbf16>, tensor<?xf32>, tensor<?xf32>
}

func.func @backward(%dy: tensor<?x4096xbf16>, %x: tensor<?x4096xbf16>, %w: tensor<4096xbf16>, %m: tensor<?xf32>, %r: tensor<?xf32>) -> (tensor<?x4096xbf16>, tensor<4096xbf16>, tensor<4096xbf16>) {
  %dx, %dw, %db = liger.layer_norm_grad %dy, %x, %w, %m, %r : tensor<?x4096xbf16>, tensor<4096xbf16>, tensor<?xf32>
  return %dx, %dw, %db : tensor<?x4096xbf16>, tensor<4096xbf16>, tensor<4096xbf16>
}
