// The divergences' row kernels (liger.kl_div and liger.jsd per token, and
// their gradients; the JSD of logits at a temperature) over every
// vocabulary: 1, 7, GPT-2's 50257, Llama-3's 128256 and 262147, in bf16,
// f16 and f32. They are the row program of
// their reference lowering: an elementwise map over the row and one row
// sum (the forwards), or an elementwise map scaled by the token's incoming
// gradient (the gradients). A vocabulary the 16-byte width divides keeps
// 16-byte chunks; another takes the widest chunks that divide it where the
// row fits the register form, and is peeled to 16-byte chunks where it
// loops (its head and tail single elements); a row past the register
// budget, or one of a program that holds nothing past 8 chunks a thread,
// loops over its chunks (nothing unrolled over the row). Each liger-compile run is bounded in
// time, and ptxas takes every kernel on both targets without spills.
// REQUIRES: ptxas
// RUN: timeout 120 liger-compile %s --emit=gpu -o %t.gpu.mlir
// RUN: FileCheck %s --check-prefix=GPU < %t.gpu.mlir
// RUN: timeout 120 liger-compile %s --emit=ptx -o %t.ptx
// RUN: ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: timeout 120 liger-compile %s --target=sm_80 --emit=ptx -o %t.sm80.ptx
// RUN: ptxas -arch=sm_80 -v %t.sm80.ptx -o %t.sm80.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// A vocabulary of one: one warp, one-element chunks, the row sum stored by
// thread 0.
// GPU-LABEL: gpu.func @kl_1_f32_rowwise_0(
//  GPU-SAME:     known_block_size = array<i32: 32, 1, 1>
//  GPU-SAME:     vector_width = 1
//       GPU:     math.log
//       GPU:     gpu.shuffle  xor
//       GPU:     memref.store %{{.+}}, %arg2[%block_id_x] : memref<?xf32>
// The gradient per token reads its token's incoming gradient.
// GPU-LABEL: gpu.func @kl_7_bf16_grad_rowwise_0(
//       GPU:     memref.load %arg1[%block_id_x] : memref<?xf32>
//       GPU:     vector.store %{{.+}}, %arg2[%block_id_x, %{{.+}}] {alignment = 2 : i64} : memref<?x7xbf16>, vector<1xbf16>
// The JSD skips a token whose label is ignore_index (-100 by default).
// GPU-LABEL: gpu.func @jsd_7_f16_rowwise_0(
//       GPU:     memref.load %arg2[%block_id_x] : memref<?xi64>
//       GPU:     arith.cmpi eq, %{{.+}}, %c-100_i64
//       GPU:     arith.select
// GPT-2's vocabulary is odd. A gradient holds nothing across a reduction,
// so it unrolls at most 8 chunks a thread: past that 512 threads loop over
// theirs, each row peeled to 16-byte chunks from its first chunk boundary,
// its head and tail single elements loaded and stored alone.
// GPU-LABEL: gpu.func @jsd_50257_bf16_grad_rowwise_0(
//  GPU-SAME:     known_block_size = array<i32: 512, 1, 1>
//  GPU-SAME:     vector_width = 8
//       GPU:     scf.for
//       GPU:     vector.load %arg0[%block_id_x, %{{.+}}] {alignment = 16 : i64} : memref<?x50257xbf16>, vector<8xbf16>
//       GPU:     memref.load %arg0[%block_id_x, %{{.+}}] : memref<?x50257xbf16>
//       GPU:     memref.store %{{.+}}, %arg4[%block_id_x, %{{.+}}] : memref<?x50257xbf16>
// Llama-3's keeps 16-byte chunks, in a loop too.
// GPU-LABEL: gpu.func @kl_128256_bf16_grad_rowwise_0(
//  GPU-SAME:     known_block_size = array<i32: 512, 1, 1>
//  GPU-SAME:     vector_width = 8
//       GPU:     scf.for
//       GPU:     vector.load %arg0[%block_id_x, %{{.+}}] {alignment = 16 : i64} : memref<?x128256xbf16>, vector<8xbf16>
// Its fast exponentials (afn) are one ex2.approx.ftz each.
//       GPU:     llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
//       GPU:     vector.store %{{.+}}, %arg2[%block_id_x, %{{.+}}] {alignment = 16 : i64} : memref<?x128256xbf16>, vector<8xbf16>
// Past the register budget the row is a loop over each thread's chunks.
// GPU-LABEL: gpu.func @jsd_262147_f32_rowwise_0(
//  GPU-SAME:     nvvm.minctasm = 2 : i32
//       GPU:     scf.for %{{.+}} = %{{.+}} to %{{.+}} step %c8192 iter_args(%{{.+}} = %{{.+}}) -> (vector<4xf32>)
//       GPU:       math.log %{{.+}} : vector<4xf32>
//       GPU:       scf.yield
//       GPU:     gpu.shuffle  xor
// GPU-LABEL: gpu.func @kl_262147_bf16_grad_rowwise_0(
//  GPU-SAME:     nvvm.minctasm = 2 : i32
//       GPU:     scf.for
//       GPU:       vector.store %{{.+}}, %arg2[%block_id_x, %{{.+}}] {alignment = 16 : i64} : memref<?x262147xbf16>, vector<8xbf16>
//       GPU:       memref.store %{{.+}}, %arg2[%block_id_x, %{{.+}}] : memref<?x262147xbf16>
// The JSD with its gradient in one group (liger.ops.jsd's forward): one
// pass reads each chunk of the row once, writes its gradient, and sums the
// loss; nothing is read after the row's block reduction.
// GPU-LABEL: gpu.func @jsd_fused_128256_bf16_rowwise_0(
//       GPU:     scf.for
//       GPU:       vector.load %arg0[%block_id_x, %{{.+}}] {alignment = 16 : i64} : memref<?x128256xbf16>, vector<8xbf16>
//       GPU:       vector.store %{{.+}}, %arg5[%block_id_x, %{{.+}}] {alignment = 16 : i64} : memref<?x128256xbf16>, vector<8xbf16>
//       GPU:       scf.yield
//       GPU:     gpu.shuffle  xor
//   GPU-NOT:     vector.load %arg0
//       GPU:     memref.store %{{.+}}, %arg4[%block_id_x] : memref<?xf32>
//       GPU:     gpu.return
// The JSD of logits at a temperature with its gradient (the fused linear
// JSD's kernel) is three passes over the row: the first carries each
// logit row's max and sum of exponentials (one online pair for each row,
// not one for each op that takes its log-softmax), the second the loss and
// the sum of the gradient over the log-probabilities, the third stores the
// gradient over the student's logits. All three read both rows: the first
// keeps the first 24576 columns of each in shared memory (the share of two
// CTAs an SM, at 512 threads), the other two read those from there.
// GPU-LABEL: gpu.func @jsd_logits_128256_bf16_rowwise_0(
//  GPU-SAME:     known_block_size = array<i32: 512, 1, 1>
//  GPU-SAME:     shared_memory_bytes = 98720,
//       GPU:     %[[S:.+]] = memref.view %{{.+}}[%c416][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<24576xbf16, #gpu.address_space<workgroup>>
//       GPU:     %[[T:.+]] = memref.view %{{.+}}[%c49568][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<24576xbf16, #gpu.address_space<workgroup>>
//       GPU:     scf.for {{.+}} -> (f32, f32, f32, f32) {
//       GPU:       vector.load %arg0[%block_id_x, %{{.+}}] {alignment = 16 : i64} : memref<?x128256xbf16>, vector<8xbf16>
//       GPU:       vector.store %{{.+}}, %[[S]]
//       GPU:       vector.load %arg1[%block_id_x, %{{.+}}] {alignment = 16 : i64} : memref<?x128256xbf16>, vector<8xbf16>
//       GPU:       vector.store %{{.+}}, %[[T]]
//   GPU-NOT:       vector.store %{{.+}}, %arg4
//       GPU:     scf.for {{.+}} -> (vector<8xf32>, vector<8xf32>) {
//       GPU:       vector.load %[[S]]
//   GPU-NOT:       vector.store
//       GPU:     scf.for
//       GPU:       vector.load %[[S]]
//       GPU:       vector.store %{{.+}}, %arg4[%block_id_x, %{{.+}}] {alignment = 16 : i64} : memref<?x128256xbf16>, vector<8xbf16>
//       GPU:     gpu.return

// PTXAS-NOT: {{[1-9][0-9]*}} bytes spill
// PTXAS: Compiling entry function '{{.*}}_rowwise_0'
// PTXAS-NOT: {{[1-9][0-9]*}} bytes spill

func.func @kl_1_f32(%x: tensor<?x1xf32>, %t: tensor<?x1xf32>) -> tensor<?xf32> {
  %l = liger.kl_div %x, %t reduction = batchmean per_token : tensor<?x1xf32>
  return %l : tensor<?xf32>
}
func.func @kl_1_f32_grad(%t: tensor<?x1xf32>, %g: tensor<?xf32>) -> tensor<?x1xf32> {
  %d = liger.kl_div_grad %t, %g reduction = batchmean log_target per_token : tensor<?x1xf32>, tensor<?xf32>
  return %d : tensor<?x1xf32>
}
func.func @kl_7_bf16(%x: tensor<?x7xbf16>, %t: tensor<?x7xbf16>) -> tensor<?xf32> {
  %l = liger.kl_div %x, %t reduction = batchmean per_token : tensor<?x7xbf16>
  return %l : tensor<?xf32>
}
func.func @kl_7_bf16_grad(%t: tensor<?x7xbf16>, %g: tensor<?xf32>) -> tensor<?x7xbf16> {
  %d = liger.kl_div_grad %t, %g reduction = batchmean log_target per_token : tensor<?x7xbf16>, tensor<?xf32>
  return %d : tensor<?x7xbf16>
}
func.func @jsd_7_f16(%x: tensor<?x7xf16>, %y: tensor<?x7xf16>, %l: tensor<?xi64>) -> tensor<?xf32> {
  %r = liger.jsd %x, %y labels(%l : tensor<?xi64>) beta = 0.25 per_token : tensor<?x7xf16>
  return %r : tensor<?xf32>
}
func.func @jsd_7_f16_grad(%x: tensor<?x7xf16>, %y: tensor<?x7xf16>, %l: tensor<?xi64>, %g: tensor<?xf32>) -> tensor<?x7xf16> {
  %d = liger.jsd_grad %x, %y, %g labels(%l : tensor<?xi64>) beta = 0.25 per_token : tensor<?x7xf16>, tensor<?xf32>
  return %d : tensor<?x7xf16>
}
func.func @kl_50257_bf16(%x: tensor<?x50257xbf16>, %t: tensor<?x50257xbf16>) -> tensor<?xf32> {
  %l = liger.kl_div %x, %t reduction = batchmean per_token : tensor<?x50257xbf16>
  return %l : tensor<?xf32>
}
func.func @kl_50257_bf16_grad(%t: tensor<?x50257xbf16>, %g: tensor<?xf32>) -> tensor<?x50257xbf16> {
  %d = liger.kl_div_grad %t, %g reduction = batchmean log_target per_token : tensor<?x50257xbf16>, tensor<?xf32>
  return %d : tensor<?x50257xbf16>
}
func.func @jsd_50257_bf16(%x: tensor<?x50257xbf16>, %y: tensor<?x50257xbf16>, %l: tensor<?xi64>) -> tensor<?xf32> {
  %r = liger.jsd %x, %y labels(%l : tensor<?xi64>) beta = 0.25 per_token : tensor<?x50257xbf16>
  return %r : tensor<?xf32>
}
func.func @jsd_50257_bf16_grad(%x: tensor<?x50257xbf16>, %y: tensor<?x50257xbf16>, %l: tensor<?xi64>, %g: tensor<?xf32>) -> tensor<?x50257xbf16> {
  %d = liger.jsd_grad %x, %y, %g labels(%l : tensor<?xi64>) beta = 0.25 per_token : tensor<?x50257xbf16>, tensor<?xf32>
  return %d : tensor<?x50257xbf16>
}
func.func @kl_128256_bf16(%x: tensor<?x128256xbf16>, %t: tensor<?x128256xbf16>) -> tensor<?xf32> {
  %l = liger.kl_div %x, %t reduction = batchmean per_token : tensor<?x128256xbf16>
  return %l : tensor<?xf32>
}
func.func @kl_128256_bf16_grad(%t: tensor<?x128256xbf16>, %g: tensor<?xf32>) -> tensor<?x128256xbf16> {
  %d = liger.kl_div_grad %t, %g reduction = batchmean log_target per_token : tensor<?x128256xbf16>, tensor<?xf32>
  return %d : tensor<?x128256xbf16>
}
func.func @jsd_262147_f32(%x: tensor<?x262147xf32>, %y: tensor<?x262147xf32>, %l: tensor<?xi64>) -> tensor<?xf32> {
  %r = liger.jsd %x, %y labels(%l : tensor<?xi64>) beta = 0.25 per_token : tensor<?x262147xf32>
  return %r : tensor<?xf32>
}
func.func @jsd_262147_f32_grad(%x: tensor<?x262147xf32>, %y: tensor<?x262147xf32>, %l: tensor<?xi64>, %g: tensor<?xf32>) -> tensor<?x262147xf32> {
  %d = liger.jsd_grad %x, %y, %g labels(%l : tensor<?xi64>) beta = 0.25 per_token : tensor<?x262147xf32>, tensor<?xf32>
  return %d : tensor<?x262147xf32>
}
func.func @kl_262147_bf16(%x: tensor<?x262147xbf16>, %t: tensor<?x262147xbf16>) -> tensor<?xf32> {
  %l = liger.kl_div %x, %t reduction = batchmean per_token : tensor<?x262147xbf16>
  return %l : tensor<?xf32>
}
func.func @kl_262147_bf16_grad(%t: tensor<?x262147xbf16>, %g: tensor<?xf32>) -> tensor<?x262147xbf16> {
  %d = liger.kl_div_grad %t, %g reduction = batchmean log_target per_token : tensor<?x262147xbf16>, tensor<?xf32>
  return %d : tensor<?x262147xbf16>
}
func.func @jsd_fused_128256_bf16(%x: tensor<?x128256xbf16>, %y: tensor<?x128256xbf16>, %g: tensor<?xf32>, %l: tensor<?xi64>) -> (tensor<?xf32>, tensor<?x128256xbf16>) {
  %r, %d = liger.fusion rowwise(%x, %y, %g, %l) : (tensor<?x128256xbf16>, tensor<?x128256xbf16>, tensor<?xf32>, tensor<?xi64>) -> (tensor<?xf32>, tensor<?x128256xbf16>) {
  ^bb0(%a: tensor<?x128256xbf16>, %b: tensor<?x128256xbf16>, %c: tensor<?xf32>, %e: tensor<?xi64>):
    %0 = liger.jsd %a, %b labels(%e : tensor<?xi64>) per_token : tensor<?x128256xbf16>
    %1 = liger.jsd_grad %a, %b, %c labels(%e : tensor<?xi64>) per_token : tensor<?x128256xbf16>, tensor<?xf32>
    liger.yield %0, %1 : tensor<?xf32>, tensor<?x128256xbf16>
  }
  return %r, %d : tensor<?xf32>, tensor<?x128256xbf16>
}
func.func @jsd_logits_128256_bf16(%x: tensor<?x128256xbf16>, %y: tensor<?x128256xbf16>, %g: tensor<?xf32>) -> (tensor<?xf32>, tensor<?x128256xbf16>) {
  %r, %d = liger.fusion rowwise(%x, %y, %g) : (tensor<?x128256xbf16>, tensor<?x128256xbf16>, tensor<?xf32>) -> (tensor<?xf32>, tensor<?x128256xbf16>) {
  ^bb0(%a: tensor<?x128256xbf16>, %b: tensor<?x128256xbf16>, %c: tensor<?xf32>):
    %0 = liger.jsd %a, %b beta = 0.5 temperature = 2.0 per_token : tensor<?x128256xbf16>
    %1 = liger.jsd_grad %a, %b, %c beta = 0.5 temperature = 2.0 per_token : tensor<?x128256xbf16>, tensor<?xf32>
    liger.yield %0, %1 : tensor<?xf32>, tensor<?x128256xbf16>
  }
  return %r, %d : tensor<?xf32>, tensor<?x128256xbf16>
}
