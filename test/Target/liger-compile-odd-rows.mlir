// Rows whose length no wider vector divides: each chunk is one element
// (vector<1 x T>, a scalar load or store), and the chunks past the row's
// end are masked. Before, the row program cloned a body on scalars where it
// had one-element vectors and liger-compile died in the elementwise step
// (a row of 7 f32); it must compile, here and on sm_80, and ptxas must take
// every kernel without spills.
// REQUIRES: ptxas
// RUN: liger-compile %s --emit=gpu -o - | FileCheck %s --check-prefix=GPU
// RUN: liger-compile %s --emit=ptx -o %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: liger-compile %s --target=sm_80 --emit=ptx -o %t.sm80.ptx
// RUN: ptxas -arch=sm_80 -v %t.sm80.ptx -o %t.sm80.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// RMSNorm over 7 f32: one warp, a chunk of one element per lane, lanes 7
// and up masked (they load zeros and store nothing).
// GPU-LABEL: gpu.func @rms_norm_7_rowwise_0(
//  GPU-SAME:     known_block_size = array<i32: 32, 1, 1>
//  GPU-SAME:     vector_width = 1
//       GPU:     %[[IN:.+]] = arith.cmpi ult, %{{.+}}, %c7
//  GPU-NEXT:     scf.if %[[IN]] -> (vector<1xf32>)
//  GPU-NEXT:       vector.load %{{.+}} {alignment = 4 : i64} : memref<?x7xf32>, vector<1xf32>
//       GPU:     vector.reduction <add>
//       GPU:     scf.if
//       GPU:       vector.store %{{.+}} {alignment = 4 : i64} : memref<?x7xf32>, vector<1xf32>
// A row of 1001 bf16 (SwiGLU): 2-byte chunks, 1001 = 3 x 256 + 233, the
// fourth chunk masked.
// GPU-LABEL: gpu.func @swiglu_1001_rowwise_0(
//  GPU-SAME:     known_block_size = array<i32: 256, 1, 1>
//       GPU:     vector.load {{.*}} : memref<?x1001xbf16>, vector<1xbf16>
//       GPU:     arith.cmpi ult, %{{.+}}, %c1001
//       GPU:     vector.store {{.*}} : memref<?x1001xbf16>, vector<1xbf16>
// A row of 1002 f16 takes 2-element (4-byte) chunks, the widest dividing it.
// GPU-LABEL: gpu.func @softmax_1002_rowwise_0(
//  GPU-SAME:     vector_width = 2
//       GPU:     vector.load {{.*}} {alignment = 4 : i64} : memref<?x1002xf16>, vector<2xf16>

// RoPE over head dimensions whose half no wider vector divides (10: halves
// of 5; 6 in f32: halves of 3): one-element chunks, each with its
// rotate-half partner.
// GPU-LABEL: gpu.func @rope_d10_rowwise_0(
//  GPU-SAME:     known_block_size = array<i32: 32, 1, 1>
//  GPU-SAME:     vector_width = 1
//       GPU:     vector.load %{{.+}} {alignment = 2 : i64} : memref<?x3x?x10xbf16>, vector<1xbf16>
//       GPU:     vector.store %{{.+}} {alignment = 2 : i64} : memref<?x3x?x10xbf16>, vector<1xbf16>
// GPU-LABEL: gpu.func @rope_grad_d6_rowwise_0(
//  GPU-SAME:     vector_width = 1
//       GPU:     vector.load %{{.+}} {alignment = 4 : i64} : memref<?x2x?x6xf32>, vector<1xf32>

// PTX-LABEL: .entry rms_norm_7_rowwise_0(
//       PTX:   ld.global.b32
//       PTX:   st.global.b32
// PTX-LABEL: .entry swiglu_1001_rowwise_0(
//       PTX:   ld.global.b16
//       PTX:   st.global.b16
// PTX-LABEL: .entry softmax_1002_rowwise_0(
//       PTX:   ld.global.v2.b16
//       PTX:   st.global.b32

// PTXAS-NOT: {{[1-9][0-9]*}} bytes spill
// PTXAS: Compiling entry function '{{.*}}_rowwise_0'
// PTXAS-NOT: {{[1-9][0-9]*}} bytes spill

func.func @rms_norm_7(%x: tensor<?x7xf32>, %w: tensor<7xf32>) -> tensor<?x7xf32> {
  %y = liger.rms_norm %x, %w eps = 1.0e-6 : tensor<?x7xf32>, tensor<7xf32>
  return %y : tensor<?x7xf32>
}

func.func @swiglu_1001(%g: tensor<?x1001xbf16>, %u: tensor<?x1001xbf16>) -> tensor<?x1001xbf16> {
  %y = liger.swiglu %g, %u : tensor<?x1001xbf16>
  return %y : tensor<?x1001xbf16>
}

func.func @softmax_1002(%x: tensor<?x1002xf16>) -> tensor<?x1002xf16> {
  %y = liger.softmax %x : tensor<?x1002xf16>
  return %y : tensor<?x1002xf16>
}

func.func @rope_d10(%q: tensor<?x3x?x10xbf16>, %k: tensor<?x1x?x10xbf16>, %c: tensor<1x?x10xbf16>, %s: tensor<1x?x10xbf16>) -> (tensor<?x3x?x10xbf16>, tensor<?x1x?x10xbf16>) {
  %a, %b = liger.rope %q, %k, %c, %s : tensor<?x3x?x10xbf16>, tensor<?x1x?x10xbf16>, tensor<1x?x10xbf16>
  return %a, %b : tensor<?x3x?x10xbf16>, tensor<?x1x?x10xbf16>
}

func.func @rope_grad_d6(%q: tensor<?x2x?x6xf32>, %k: tensor<?x2x?x6xf32>, %c: tensor<?x?x6xf32>, %s: tensor<?x?x6xf32>) -> (tensor<?x2x?x6xf32>, tensor<?x2x?x6xf32>) {
  %a, %b = liger.rope_grad %q, %k, %c, %s : tensor<?x2x?x6xf32>, tensor<?x2x?x6xf32>, tensor<?x?x6xf32>
  return %a, %b : tensor<?x2x?x6xf32>, tensor<?x2x?x6xf32>
}
