// Cross-entropy (the loss, its gradient, and both fused) over every
// vocabulary, in bf16, f16 and f32: 7, 1000, 32001 (f32: the gradient's
// copy of 4 bytes was refused by cp.async's L1 bypass), 50257 (GPT-2's;
// bf16 and f16: "Requested copy elements is 1 with width 16") and 262147.
// Every kernel keeps 16-byte chunks: a row that does not start on a chunk
// boundary (the vocabulary is not a multiple of the width) is peeled at run
// time, its first elements up to an aligned chunk and those after its last
// full chunk taken one a thread; cp.async stages only 16-byte chunks.
// Each liger-compile run is bounded in time, and ptxas takes every kernel
// on both targets without spills.
// REQUIRES: ptxas
// RUN: timeout 60 liger-compile %s --emit=gpu -o %t.gpu.mlir
// RUN: FileCheck %s --check-prefix=GPU < %t.gpu.mlir
// RUN: timeout 60 liger-compile %s --emit=ptx -o %t.ptx
// RUN: FileCheck %s --check-prefix=PTX < %t.ptx
// RUN: ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: timeout 60 liger-compile %s --target=sm_80 --emit=ptx -o %t.sm80.ptx
// RUN: ptxas -arch=sm_80 -v %t.sm80.ptx -o %t.sm80.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// A vocabulary of 3 bf16 is shorter than a row's head: all single
// elements, the head clamped to the row.
// GPU-LABEL: gpu.func @ce_fused_3_bf16_rowwise_0(
//       GPU:     arith.minui %{{.+}}, %c3
// The vocabulary of 7 bf16: no full chunk in most rows; the single elements
// after the chunks. A peeled kernel may take 128 registers a thread (at
// least 512 / 32 CTAs an SM).
// GPU-LABEL: gpu.func @ce_7_bf16_rowwise_0(
//  GPU-SAME:     vector_width = 8
//  GPU-SAME:     nvvm.minctasm = 16 : i32
//       GPU:     scf.for %[[ROW:.+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args
//       GPU:       %[[MIS:.+]] = arith.remui %{{.+}}, %c8
//       GPU:       %[[HEAD:.+]] = arith.remui %{{.+}}, %c8
//       GPU:       scf.for
//       GPU:         vector.load %arg0[%[[ROW]], %{{.+}}] {alignment = 16 : i64} : memref<?x7xbf16>, vector<8xbf16>
//       GPU:       arith.cmpi ult, %thread_id_x, %{{.+}}
//       GPU:       scf.if %{{.+}} -> (f32, f32)
//       GPU:         vector.load %arg0[%[[ROW]], %{{.+}}] {alignment = 2 : i64} : memref<?x7xbf16>, vector<1xbf16>
// Near-miss: 1000 is a multiple of 8, so every row starts on a chunk
// boundary and nothing is peeled (the kernel of before, unbounded).
// GPU-LABEL: gpu.func @ce_grad_1000_bf16_rowwise_0(
//   GPU-NOT:     nvvm.minctasm
//   GPU-NOT:     vector<1xbf16>
//       GPU:     gpu.return
// The issue's kernels: the loss and its gradient over GPT-2's vocabulary
// at one CTA of 1024 threads per SM, the row staged in shared memory by
// cp.async of 16-byte chunks at their offset from the row's head.
// GPU-LABEL: gpu.func @ce_fused_32001_f32_rowwise_0(
//  GPU-SAME:     known_block_size = array<i32: 1024, 1, 1>
//  GPU-SAME:     ctas_per_sm = 1
//       GPU:     nvgpu.device_async_copy %arg0[%{{.+}}, %{{.+}}], %{{.+}}[%{{.+}}], 4 {bypassL1} : memref<?x32001xf32>
// GPU-LABEL: gpu.func @ce_fused_50257_bf16_rowwise_0(
//  GPU-SAME:     known_block_size = array<i32: 1024, 1, 1>
//  GPU-SAME:     vector_width = 8
//  GPU-SAME:     ctas_per_sm = 1
//  GPU-SAME:     nvvm.minctasm = 1 : i32
//       GPU:     nvgpu.device_async_copy %arg0[%{{.+}}, %{{.+}}], %{{.+}}[%{{.+}}], 8 {bypassL1} : memref<?x50257xbf16>
//       GPU:     nvvm.cp.async.commit.group
//       GPU:     scf.for
//       GPU:       nvvm.cp.async.wait.group 0
// The row's single elements, in pass 1 and in pass 2.
//       GPU:       vector.load %arg0[%{{.+}}, %{{.+}}] {alignment = 2 : i64} : memref<?x50257xbf16>, vector<1xbf16>
//       GPU:       math.log
//       GPU:       nvgpu.device_async_copy
//       GPU:       vector.store %{{.+}}, %arg4[%{{.+}}, %{{.+}}] {alignment = 2 : i64} : memref<?x50257xbf16>, vector<1xbf16>
// The next row's chunk that this row lacks (its head is shorter), staged
// by the thread that owns its offset.
//       GPU:       nvgpu.device_async_copy
//       GPU:       nvvm.cp.async.commit.group
// GPU-LABEL: gpu.func @ce_fused_50257_bf16_rowwise_0_finish(

// Only 16-byte copies; the peeled row's chunks are 16-byte loads and
// stores.
// PTX-LABEL: .entry ce_fused_262147_bf16_rowwise_0(
//   PTX-NOT:   cp.async.cg.shared.global [{{.*}}], [{{.*}}], {{4|8}};
//       PTX:   cp.async.cg.shared.global [{{.*}}], [{{.*}}], 16;
//       PTX:   ld.global.v4.b32
//       PTX:   st.global.v4.b32
//       PTX:   ld.global.b16
//   PTX-NOT:   cp.async.cg.shared.global [{{.*}}], [{{.*}}], {{4|8}};
//       PTX:   .entry

// PTXAS-NOT: {{[1-9][0-9]*}} bytes spill
// PTXAS: Compiling entry function '{{.*}}_rowwise_0'
// PTXAS-NOT: {{[1-9][0-9]*}} bytes spill

func.func @ce_fused_3_bf16(%x: tensor<?x3xbf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x3xbf16>) {
  %l = liger.cross_entropy %x, %t : tensor<?x3xbf16>, tensor<?xi64>
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x3xbf16>, tensor<?xi64>, tensor<f32>
  return %l, %d : tensor<f32>, tensor<?x3xbf16>
}

func.func @ce_7_bf16(%x: tensor<?x7xbf16>, %t: tensor<?xi64>) -> tensor<f32> {
  %l = liger.cross_entropy %x, %t : tensor<?x7xbf16>, tensor<?xi64>
  return %l : tensor<f32>
}

func.func @ce_grad_7_bf16(%x: tensor<?x7xbf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> tensor<?x7xbf16> {
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x7xbf16>, tensor<?xi64>, tensor<f32>
  return %d : tensor<?x7xbf16>
}

func.func @ce_fused_7_bf16(%x: tensor<?x7xbf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x7xbf16>) {
  %l = liger.cross_entropy %x, %t : tensor<?x7xbf16>, tensor<?xi64>
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x7xbf16>, tensor<?xi64>, tensor<f32>
  return %l, %d : tensor<f32>, tensor<?x7xbf16>
}

func.func @ce_7_f16(%x: tensor<?x7xf16>, %t: tensor<?xi64>) -> tensor<f32> {
  %l = liger.cross_entropy %x, %t : tensor<?x7xf16>, tensor<?xi64>
  return %l : tensor<f32>
}

func.func @ce_grad_7_f16(%x: tensor<?x7xf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> tensor<?x7xf16> {
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x7xf16>, tensor<?xi64>, tensor<f32>
  return %d : tensor<?x7xf16>
}

func.func @ce_fused_7_f16(%x: tensor<?x7xf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x7xf16>) {
  %l = liger.cross_entropy %x, %t : tensor<?x7xf16>, tensor<?xi64>
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x7xf16>, tensor<?xi64>, tensor<f32>
  return %l, %d : tensor<f32>, tensor<?x7xf16>
}

func.func @ce_7_f32(%x: tensor<?x7xf32>, %t: tensor<?xi64>) -> tensor<f32> {
  %l = liger.cross_entropy %x, %t : tensor<?x7xf32>, tensor<?xi64>
  return %l : tensor<f32>
}

func.func @ce_grad_7_f32(%x: tensor<?x7xf32>, %t: tensor<?xi64>, %g: tensor<f32>) -> tensor<?x7xf32> {
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x7xf32>, tensor<?xi64>, tensor<f32>
  return %d : tensor<?x7xf32>
}

func.func @ce_fused_7_f32(%x: tensor<?x7xf32>, %t: tensor<?xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x7xf32>) {
  %l = liger.cross_entropy %x, %t : tensor<?x7xf32>, tensor<?xi64>
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x7xf32>, tensor<?xi64>, tensor<f32>
  return %l, %d : tensor<f32>, tensor<?x7xf32>
}

func.func @ce_1000_bf16(%x: tensor<?x1000xbf16>, %t: tensor<?xi64>) -> tensor<f32> {
  %l = liger.cross_entropy %x, %t : tensor<?x1000xbf16>, tensor<?xi64>
  return %l : tensor<f32>
}

func.func @ce_grad_1000_bf16(%x: tensor<?x1000xbf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> tensor<?x1000xbf16> {
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x1000xbf16>, tensor<?xi64>, tensor<f32>
  return %d : tensor<?x1000xbf16>
}

func.func @ce_fused_1000_bf16(%x: tensor<?x1000xbf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x1000xbf16>) {
  %l = liger.cross_entropy %x, %t : tensor<?x1000xbf16>, tensor<?xi64>
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x1000xbf16>, tensor<?xi64>, tensor<f32>
  return %l, %d : tensor<f32>, tensor<?x1000xbf16>
}

func.func @ce_1000_f16(%x: tensor<?x1000xf16>, %t: tensor<?xi64>) -> tensor<f32> {
  %l = liger.cross_entropy %x, %t : tensor<?x1000xf16>, tensor<?xi64>
  return %l : tensor<f32>
}

func.func @ce_grad_1000_f16(%x: tensor<?x1000xf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> tensor<?x1000xf16> {
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x1000xf16>, tensor<?xi64>, tensor<f32>
  return %d : tensor<?x1000xf16>
}

func.func @ce_fused_1000_f16(%x: tensor<?x1000xf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x1000xf16>) {
  %l = liger.cross_entropy %x, %t : tensor<?x1000xf16>, tensor<?xi64>
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x1000xf16>, tensor<?xi64>, tensor<f32>
  return %l, %d : tensor<f32>, tensor<?x1000xf16>
}

func.func @ce_1000_f32(%x: tensor<?x1000xf32>, %t: tensor<?xi64>) -> tensor<f32> {
  %l = liger.cross_entropy %x, %t : tensor<?x1000xf32>, tensor<?xi64>
  return %l : tensor<f32>
}

func.func @ce_grad_1000_f32(%x: tensor<?x1000xf32>, %t: tensor<?xi64>, %g: tensor<f32>) -> tensor<?x1000xf32> {
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x1000xf32>, tensor<?xi64>, tensor<f32>
  return %d : tensor<?x1000xf32>
}

func.func @ce_fused_1000_f32(%x: tensor<?x1000xf32>, %t: tensor<?xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x1000xf32>) {
  %l = liger.cross_entropy %x, %t : tensor<?x1000xf32>, tensor<?xi64>
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x1000xf32>, tensor<?xi64>, tensor<f32>
  return %l, %d : tensor<f32>, tensor<?x1000xf32>
}

func.func @ce_32001_bf16(%x: tensor<?x32001xbf16>, %t: tensor<?xi64>) -> tensor<f32> {
  %l = liger.cross_entropy %x, %t : tensor<?x32001xbf16>, tensor<?xi64>
  return %l : tensor<f32>
}

func.func @ce_grad_32001_bf16(%x: tensor<?x32001xbf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> tensor<?x32001xbf16> {
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x32001xbf16>, tensor<?xi64>, tensor<f32>
  return %d : tensor<?x32001xbf16>
}

func.func @ce_fused_32001_bf16(%x: tensor<?x32001xbf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x32001xbf16>) {
  %l = liger.cross_entropy %x, %t : tensor<?x32001xbf16>, tensor<?xi64>
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x32001xbf16>, tensor<?xi64>, tensor<f32>
  return %l, %d : tensor<f32>, tensor<?x32001xbf16>
}

func.func @ce_32001_f16(%x: tensor<?x32001xf16>, %t: tensor<?xi64>) -> tensor<f32> {
  %l = liger.cross_entropy %x, %t : tensor<?x32001xf16>, tensor<?xi64>
  return %l : tensor<f32>
}

func.func @ce_grad_32001_f16(%x: tensor<?x32001xf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> tensor<?x32001xf16> {
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x32001xf16>, tensor<?xi64>, tensor<f32>
  return %d : tensor<?x32001xf16>
}

func.func @ce_fused_32001_f16(%x: tensor<?x32001xf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x32001xf16>) {
  %l = liger.cross_entropy %x, %t : tensor<?x32001xf16>, tensor<?xi64>
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x32001xf16>, tensor<?xi64>, tensor<f32>
  return %l, %d : tensor<f32>, tensor<?x32001xf16>
}

func.func @ce_32001_f32(%x: tensor<?x32001xf32>, %t: tensor<?xi64>) -> tensor<f32> {
  %l = liger.cross_entropy %x, %t : tensor<?x32001xf32>, tensor<?xi64>
  return %l : tensor<f32>
}

func.func @ce_grad_32001_f32(%x: tensor<?x32001xf32>, %t: tensor<?xi64>, %g: tensor<f32>) -> tensor<?x32001xf32> {
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x32001xf32>, tensor<?xi64>, tensor<f32>
  return %d : tensor<?x32001xf32>
}

func.func @ce_fused_32001_f32(%x: tensor<?x32001xf32>, %t: tensor<?xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x32001xf32>) {
  %l = liger.cross_entropy %x, %t : tensor<?x32001xf32>, tensor<?xi64>
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x32001xf32>, tensor<?xi64>, tensor<f32>
  return %l, %d : tensor<f32>, tensor<?x32001xf32>
}

func.func @ce_50257_bf16(%x: tensor<?x50257xbf16>, %t: tensor<?xi64>) -> tensor<f32> {
  %l = liger.cross_entropy %x, %t : tensor<?x50257xbf16>, tensor<?xi64>
  return %l : tensor<f32>
}

func.func @ce_grad_50257_bf16(%x: tensor<?x50257xbf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> tensor<?x50257xbf16> {
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x50257xbf16>, tensor<?xi64>, tensor<f32>
  return %d : tensor<?x50257xbf16>
}

func.func @ce_fused_50257_bf16(%x: tensor<?x50257xbf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x50257xbf16>) {
  %l = liger.cross_entropy %x, %t : tensor<?x50257xbf16>, tensor<?xi64>
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x50257xbf16>, tensor<?xi64>, tensor<f32>
  return %l, %d : tensor<f32>, tensor<?x50257xbf16>
}

func.func @ce_50257_f16(%x: tensor<?x50257xf16>, %t: tensor<?xi64>) -> tensor<f32> {
  %l = liger.cross_entropy %x, %t : tensor<?x50257xf16>, tensor<?xi64>
  return %l : tensor<f32>
}

func.func @ce_grad_50257_f16(%x: tensor<?x50257xf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> tensor<?x50257xf16> {
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x50257xf16>, tensor<?xi64>, tensor<f32>
  return %d : tensor<?x50257xf16>
}

func.func @ce_fused_50257_f16(%x: tensor<?x50257xf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x50257xf16>) {
  %l = liger.cross_entropy %x, %t : tensor<?x50257xf16>, tensor<?xi64>
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x50257xf16>, tensor<?xi64>, tensor<f32>
  return %l, %d : tensor<f32>, tensor<?x50257xf16>
}

func.func @ce_50257_f32(%x: tensor<?x50257xf32>, %t: tensor<?xi64>) -> tensor<f32> {
  %l = liger.cross_entropy %x, %t : tensor<?x50257xf32>, tensor<?xi64>
  return %l : tensor<f32>
}

func.func @ce_grad_50257_f32(%x: tensor<?x50257xf32>, %t: tensor<?xi64>, %g: tensor<f32>) -> tensor<?x50257xf32> {
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x50257xf32>, tensor<?xi64>, tensor<f32>
  return %d : tensor<?x50257xf32>
}

func.func @ce_fused_50257_f32(%x: tensor<?x50257xf32>, %t: tensor<?xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x50257xf32>) {
  %l = liger.cross_entropy %x, %t : tensor<?x50257xf32>, tensor<?xi64>
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x50257xf32>, tensor<?xi64>, tensor<f32>
  return %l, %d : tensor<f32>, tensor<?x50257xf32>
}

func.func @ce_262147_bf16(%x: tensor<?x262147xbf16>, %t: tensor<?xi64>) -> tensor<f32> {
  %l = liger.cross_entropy %x, %t : tensor<?x262147xbf16>, tensor<?xi64>
  return %l : tensor<f32>
}

func.func @ce_grad_262147_bf16(%x: tensor<?x262147xbf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> tensor<?x262147xbf16> {
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x262147xbf16>, tensor<?xi64>, tensor<f32>
  return %d : tensor<?x262147xbf16>
}

func.func @ce_fused_262147_bf16(%x: tensor<?x262147xbf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x262147xbf16>) {
  %l = liger.cross_entropy %x, %t : tensor<?x262147xbf16>, tensor<?xi64>
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x262147xbf16>, tensor<?xi64>, tensor<f32>
  return %l, %d : tensor<f32>, tensor<?x262147xbf16>
}

func.func @ce_262147_f16(%x: tensor<?x262147xf16>, %t: tensor<?xi64>) -> tensor<f32> {
  %l = liger.cross_entropy %x, %t : tensor<?x262147xf16>, tensor<?xi64>
  return %l : tensor<f32>
}

func.func @ce_grad_262147_f16(%x: tensor<?x262147xf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> tensor<?x262147xf16> {
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x262147xf16>, tensor<?xi64>, tensor<f32>
  return %d : tensor<?x262147xf16>
}

func.func @ce_fused_262147_f16(%x: tensor<?x262147xf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x262147xf16>) {
  %l = liger.cross_entropy %x, %t : tensor<?x262147xf16>, tensor<?xi64>
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x262147xf16>, tensor<?xi64>, tensor<f32>
  return %l, %d : tensor<f32>, tensor<?x262147xf16>
}

func.func @ce_262147_f32(%x: tensor<?x262147xf32>, %t: tensor<?xi64>) -> tensor<f32> {
  %l = liger.cross_entropy %x, %t : tensor<?x262147xf32>, tensor<?xi64>
  return %l : tensor<f32>
}

func.func @ce_grad_262147_f32(%x: tensor<?x262147xf32>, %t: tensor<?xi64>, %g: tensor<f32>) -> tensor<?x262147xf32> {
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x262147xf32>, tensor<?xi64>, tensor<f32>
  return %d : tensor<?x262147xf32>
}

func.func @ce_fused_262147_f32(%x: tensor<?x262147xf32>, %t: tensor<?xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x262147xf32>) {
  %l = liger.cross_entropy %x, %t : tensor<?x262147xf32>, tensor<?xi64>
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x262147xf32>, tensor<?xi64>, tensor<f32>
  return %l, %d : tensor<f32>, tensor<?x262147xf32>
}
