// A looped row program takes 512 threads by default, with 256 as its spill
// fallback (liger-select-kernel-config writes `liger.spill_fallback`).
// liger-compile asks ptxas about each such kernel and compiles the group
// again at its fallback where ptxas spilled at 512 (at most 64 registers a
// thread at two CTAs an SM).
//
// @many reads eight f32 rows in two passes and writes seven (peeled to
// 16-byte chunks: 4 f32 do not divide its row): at 512 threads ptxas
// spills it, so its bundle holds it at 256 threads. @softmax
// over 128256 bf16 fits at 512 and keeps it. --emit=gpu shows the
// selection before ptxas is asked (both at 512); --emit=ptx and the bundle
// hold the kernels compiled, which ptxas takes without spills.
// REQUIRES: ptxas
// RUN: timeout 120 liger-compile %s --emit=gpu -o %t.gpu.mlir
// RUN: FileCheck %s --check-prefix=GPU < %t.gpu.mlir
// RUN: timeout 120 liger-compile %s -o %t.bundle
// RUN: FileCheck %s --check-prefix=BUNDLE < %t.bundle/manifest.json
// RUN: timeout 120 liger-compile %s --emit=ptx -o %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// The same group pinned at 512 threads spills: the fallback is not idle.
// RUN: sed -e 's/^  %%r:7 = liger.fusion rowwise(\(.*\)) : (/  %%r:7 = liger.fusion rowwise(\1) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 4>} : (/' %s > %t.pinned.mlir
// RUN: timeout 120 liger-compile %t.pinned.mlir --emit=ptx -o %t.pinned.ptx
// RUN: ptxas -arch=sm_90a -v %t.pinned.ptx -o %t.pinned.cubin 2>&1 | FileCheck %s --check-prefix=PINNED
// Pinned, the group compiles as written (the lone softmax is still checked,
// and does not spill).
// RUN: timeout 120 liger-compile %t.pinned.mlir -o %t.pinned.bundle
// RUN: FileCheck %s --check-prefix=PINNED-BUNDLE < %t.pinned.bundle/manifest.json

// The fusion group's default and fallback come from the selection; the lone
// softmax's from the lowering, which wraps it and records its fallback.
//       GPU: liger.fusion rowwise{{.*}}liger.kernel = @liger_kernels::@many_rowwise_0, liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 4>, liger.spill_fallback = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 4>}
//       GPU: liger.fusion rowwise{{.*}}liger.kernel = @liger_kernels::@softmax_rowwise_0, liger.spill_fallback = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 8>}
// GPU-LABEL: gpu.func @many_rowwise_0(
//  GPU-SAME:     known_block_size = array<i32: 512, 1, 1>
//       GPU:     scf.for
// GPU-LABEL: gpu.func @softmax_rowwise_0(
//  GPU-SAME:     known_block_size = array<i32: 512, 1, 1>
//       GPU:     scf.for

// BUNDLE:      "block": [
// BUNDLE-NEXT:   256,
//      BUNDLE: "name": "many_rowwise_0",
//      BUNDLE: "block": [
// BUNDLE-NEXT:   512,
//      BUNDLE: "name": "softmax_rowwise_0",

// PTX-LABEL: .entry many_rowwise_0(
//       PTX: .reqntid 256, 1, 1
// PTX-LABEL: .entry softmax_rowwise_0(
//       PTX: .reqntid 512, 1, 1

// PTXAS-NOT: {{[1-9][0-9]*}} bytes spill
//     PTXAS: Compiling entry function '{{.*}}_rowwise_0'
// PTXAS-NOT: {{[1-9][0-9]*}} bytes spill
//     PTXAS: Compiling entry function '{{.*}}_rowwise_0'
// PTXAS-NOT: {{[1-9][0-9]*}} bytes spill

// PINNED: Function properties for many_rowwise_0
// PINNED-NEXT: {{[1-9][0-9]*}} bytes stack frame, {{[1-9][0-9]*}} bytes spill stores

// PINNED-BUNDLE:      "block": [
// PINNED-BUNDLE-NEXT:   512,
//      PINNED-BUNDLE: "name": "many_rowwise_0",

func.func @many(%i0: tensor<?x262147xf32>, %i1: tensor<?x262147xf32>, %i2: tensor<?x262147xf32>, %i3: tensor<?x262147xf32>, %i4: tensor<?x262147xf32>, %i5: tensor<?x262147xf32>, %i6: tensor<?x262147xf32>, %i7: tensor<?x262147xf32>) -> (tensor<?x262147xf32>, tensor<?x262147xf32>, tensor<?x262147xf32>, tensor<?x262147xf32>, tensor<?x262147xf32>, tensor<?x262147xf32>, tensor<?x262147xf32>) {
  %r:7 = liger.fusion rowwise(%i0, %i1, %i2, %i3, %i4, %i5, %i6, %i7) : (tensor<?x262147xf32>, tensor<?x262147xf32>, tensor<?x262147xf32>, tensor<?x262147xf32>, tensor<?x262147xf32>, tensor<?x262147xf32>, tensor<?x262147xf32>, tensor<?x262147xf32>) -> (tensor<?x262147xf32>, tensor<?x262147xf32>, tensor<?x262147xf32>, tensor<?x262147xf32>, tensor<?x262147xf32>, tensor<?x262147xf32>, tensor<?x262147xf32>) {
  ^bb0(%a0: tensor<?x262147xf32>, %a1: tensor<?x262147xf32>, %a2: tensor<?x262147xf32>, %a3: tensor<?x262147xf32>, %a4: tensor<?x262147xf32>, %a5: tensor<?x262147xf32>, %a6: tensor<?x262147xf32>, %a7: tensor<?x262147xf32>):
    %p0 = liger.mul %a0, %a1 : tensor<?x262147xf32>
    %q2 = liger.mul %a2, %p0 : tensor<?x262147xf32>
    %q3 = liger.mul %a3, %q2 : tensor<?x262147xf32>
    %q4 = liger.mul %a4, %q3 : tensor<?x262147xf32>
    %q5 = liger.mul %a5, %q4 : tensor<?x262147xf32>
    %q6 = liger.mul %a6, %q5 : tensor<?x262147xf32>
    %q7 = liger.mul %a7, %q6 : tensor<?x262147xf32>
    %s = liger.softmax %q7 : tensor<?x262147xf32>
    %g = liger.softmax_grad %a0, %s : tensor<?x262147xf32>
    %g1 = liger.mul %g, %a1 : tensor<?x262147xf32>
    %g2 = liger.mul %g, %a2 : tensor<?x262147xf32>
    %g3 = liger.mul %g, %a3 : tensor<?x262147xf32>
    %g4 = liger.mul %g, %a4 : tensor<?x262147xf32>
    %g5 = liger.mul %g, %a5 : tensor<?x262147xf32>
    %g6 = liger.mul %g, %a6 : tensor<?x262147xf32>
    %g7 = liger.mul %g, %a7 : tensor<?x262147xf32>
    liger.yield %g1, %g2, %g3, %g4, %g5, %g6, %g7 : tensor<?x262147xf32>, tensor<?x262147xf32>, tensor<?x262147xf32>, tensor<?x262147xf32>, tensor<?x262147xf32>, tensor<?x262147xf32>, tensor<?x262147xf32>
  }
  return %r#0, %r#1, %r#2, %r#3, %r#4, %r#5, %r#6 : tensor<?x262147xf32>, tensor<?x262147xf32>, tensor<?x262147xf32>, tensor<?x262147xf32>, tensor<?x262147xf32>, tensor<?x262147xf32>, tensor<?x262147xf32>
}

func.func @softmax(%x: tensor<?x128256xbf16>) -> tensor<?x128256xbf16> {
  %y = liger.softmax %x : tensor<?x128256xbf16>
  return %y : tensor<?x128256xbf16>
}
