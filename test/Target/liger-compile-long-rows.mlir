// Rows past the register budget: the row program loops over each thread's
// chunks (a group of U chunks an iteration, the rest masked), one loop a
// pass over the row, so compile time does not grow with the row. Before,
// it unrolled the row: softmax over 262144 f32 took 25 s and 495 MiB to
// reach PTX, over 393216 more than 150 s, and RMSNorm over 2^31 - 1
// columns ran out of 10 GiB. Each run here is bounded in time, and ptxas
// takes every kernel on both targets without spills.
// REQUIRES: ptxas
// RUN: timeout 30 liger-compile %s --emit=gpu -o %t.gpu.mlir
// RUN: FileCheck %s --check-prefix=GPU < %t.gpu.mlir
// RUN: timeout 30 liger-compile %s --emit=ptx -o %t.ptx
// RUN: ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: timeout 30 liger-compile %s --target=sm_80 --emit=ptx -o %t.sm80.ptx
// RUN: ptxas -arch=sm_80 -v %t.sm80.ptx -o %t.sm80.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// Softmax over 2^20 f32 reads its row twice: pass 1 an online softmax (a
// running max and a sum rescaled when the max grows, four 16-byte chunks an
// iteration, loads first), one block reduction of the (max, sum) pair
// (warp 0's lanes past the warps select the identities);
// pass 2 writes every element. Nothing is unrolled over the row.
// GPU-LABEL: gpu.func @softmax_1m_rowwise_0(
//  GPU-SAME:     known_block_size = array<i32: 512, 1, 1>
//  GPU-SAME:     nvvm.minctasm = 2 : i32
//       GPU:     scf.for %{{.+}} = %{{.+}} to %{{.+}} step %c8192 iter_args(%{{.+}} = %{{.+}}, %{{.+}} = %{{.+}}) -> (f32, f32)
// GPU-COUNT-4:       vector.load %arg0
//   GPU-NOT:       vector.load
//       GPU:       vector.reduction <maximumf>
//       GPU:       math.exp %{{.+}} : f32
//       GPU:       math.exp %{{.+}} : vector<4xf32>
//       GPU:       scf.yield %{{.+}}, %{{.+}} : f32, f32
//       GPU:     gpu.barrier
//       GPU:     scf.if %{{.+}} {
// GPU-COUNT-2:       arith.select %{{.+}}, %{{.+}}, %{{.+}} : f32
//       GPU:     gpu.barrier
//       GPU:     scf.for
//       GPU:       arith.divf %{{.+}} : vector<4xf32>
//       GPU:       vector.store %{{.+}}, %arg1
//   GPU-NOT:     scf.for
//       GPU:     gpu.return

// The first case the issue timed past 150 s: 393216 f32, 384 iterations
// of 4 chunks a thread, no remainder.
// GPU-LABEL: gpu.func @softmax_393216_rowwise_0(
//       GPU:     scf.for
//   GPU-NOT:     arith.cmpi ult, %{{.+}}, %c393216
//       GPU:     scf.for
//       GPU:     gpu.return

// Near-miss: 16384 bf16 (8 chunks a thread, 64 elements held) stays in
// registers, unrolled, with no loop.
// GPU-LABEL: gpu.func @softmax_16384_rowwise_0(
//  GPU-SAME:     known_block_size = array<i32: 256, 1, 1>
//   GPU-NOT:     nvvm.minctasm
//   GPU-NOT:     scf.for
//       GPU:     gpu.return

// RMSNorm over 2^31 - 1 f32: one-element chunks, 8 an iteration; the
// 4095 chunks after the last full group come one at a time, the last
// masked; pass 1 the sum of squares, pass 2 the normalized row.
// GPU-LABEL: gpu.func @rms_norm_max_rowwise_0(
//       GPU:     scf.for %{{.+}} step %c4096 iter_args(%{{.+}}) -> (vector<1xf32>)
//       GPU:     arith.cmpi ult, %{{.+}}, %c2147483647
//       GPU:     scf.if %{{.+}} -> (vector<1xf32>)
//       GPU:     gpu.barrier
//       GPU:     math.rsqrt
//       GPU:     scf.for
//       GPU:       vector.store
//       GPU:     gpu.return

// add + RMSNorm: pass 1 adds, stores the new residual and sums its
// squares; pass 2 reads the residual back from the output it stored (one
// stream, not x and r again) to normalize it.
// GPU-LABEL: gpu.func @add_rms_norm_256k_rowwise_0(
//  GPU-SAME:     %[[X:[^:]+]]: memref<?x262144xbf16>, %[[R:[^:]+]]: memref<?x262144xbf16>, %[[W:[^:]+]]: memref<262144xbf16>, %[[Y:[^:]+]]: memref<?x262144xbf16>, %[[S:[^:]+]]: memref<?x262144xbf16>)
//       GPU:     scf.for
//       GPU:       vector.load %[[X]]
//       GPU:       vector.load %[[R]]
//       GPU:       vector.store %{{.+}}, %[[S]]
//       GPU:     gpu.barrier
//       GPU:     scf.for
//   GPU-NOT:       vector.load %[[X]]
//   GPU-NOT:       vector.load %[[R]]
//       GPU:       vector.load %[[S]]
//       GPU:       vector.load %[[W]]
//       GPU:       vector.store %{{.+}}, %[[Y]]
//       GPU:     gpu.return

// LayerNorm: three passes (the mean, the variance about it, the output).
// GPU-LABEL: gpu.func @layer_norm_256k_rowwise_0(
//       GPU:     scf.for
//       GPU:     gpu.barrier
//       GPU:     scf.for
//       GPU:     gpu.barrier
//       GPU:     scf.for
//       GPU:       vector.store
//       GPU:     gpu.return

// RMSNorm's backward over 262147 bf16: the weight gradient's per-CTA sums
// live in the CTA's row of the workspace (identity first, then each row
// adds into the thread's own columns), not in registers; the partials are
// then already in place for the finishing kernel.
// GPU-LABEL: gpu.func @rms_norm_grad_262147_rowwise_0(
//  GPU-SAME:     %[[WS:[^:]+]]: memref<?x262147xf32>) kernel
//  GPU-SAME:     ctas_per_sm = 4
//       GPU:     scf.for
//       GPU:       vector.store %{{.+}}, %[[WS]]
//       GPU:     scf.for %[[ROW:.+]] = %{{.+}} to %{{.+}} step %{{.+}} {
//       GPU:       scf.for
//       GPU:         %[[ACC:.+]] = vector.load %[[WS]]
//       GPU:         vector.store %{{.+}}, %[[WS]]
//       GPU:       gpu.barrier
//       GPU:       scf.for
//       GPU:         vector.store %{{.+}}, %{{.+}}[%[[ROW]], %{{.+}}] {{.*}} : memref<?x262147xbf16>, vector<1xbf16>
//   GPU-NOT:     vector.store %{{.+}}, %[[WS]]
//       GPU:     gpu.return
// GPU-LABEL: gpu.func @rms_norm_grad_262147_rowwise_0_finish(

// SiLU then a product over 256000 bf16: nothing is reduced, but the SiLU's
// chunks wait in registers for the product's step, so the row does not fit
// (32 chunks of 8 a thread at 1024 threads spilled): it loops.
// GPU-LABEL: gpu.func @silu_mul_256000_rowwise_0(
//  GPU-SAME:     known_block_size = array<i32: 512, 1, 1>
//       GPU:     scf.for
//       GPU:       math.exp
//       GPU:       vector.store
//       GPU:     gpu.return

// PTXAS-NOT: {{[1-9][0-9]*}} bytes spill
// PTXAS: Compiling entry function '{{.*}}_rowwise_0'
// PTXAS-NOT: {{[1-9][0-9]*}} bytes spill

func.func @softmax_1m(%x: tensor<?x1048576xf32>) -> tensor<?x1048576xf32> {
  %y = liger.softmax %x : tensor<?x1048576xf32>
  return %y : tensor<?x1048576xf32>
}

func.func @softmax_393216(%x: tensor<?x393216xf32>) -> tensor<?x393216xf32> {
  %y = liger.softmax %x : tensor<?x393216xf32>
  return %y : tensor<?x393216xf32>
}

func.func @softmax_16384(%x: tensor<?x16384xbf16>) -> tensor<?x16384xbf16> {
  %y = liger.softmax %x : tensor<?x16384xbf16>
  return %y : tensor<?x16384xbf16>
}

func.func @rms_norm_max(%x: tensor<?x2147483647xf32>, %w: tensor<2147483647xf32>) -> tensor<?x2147483647xf32> {
  %y = liger.rms_norm %x, %w eps = 1.0e-6 : tensor<?x2147483647xf32>, tensor<2147483647xf32>
  return %y : tensor<?x2147483647xf32>
}

func.func @add_rms_norm_256k(%x: tensor<?x262144xbf16>, %r: tensor<?x262144xbf16>, %w: tensor<262144xbf16>) -> (tensor<?x262144xbf16>, tensor<?x262144xbf16>) {
  %y, %s = liger.add_rms_norm %x, %r, %w eps = 1.0e-5 : tensor<?x262144xbf16>, tensor<262144xbf16>
  return %y, %s : tensor<?x262144xbf16>, tensor<?x262144xbf16>
}

func.func @layer_norm_256k(%x: tensor<?x262144xf32>, %w: tensor<262144xf32>, %b: tensor<262144xf32>) -> tensor<?x262144xf32> {
  %y = liger.layer_norm %x, %w, %b eps = 1.0e-5 : tensor<?x262144xf32>, tensor<262144xf32>, tensor<262144xf32>
  return %y : tensor<?x262144xf32>
}

func.func @rms_norm_grad_262147(%dy: tensor<?x262147xbf16>, %x: tensor<?x262147xbf16>, %w: tensor<262147xbf16>, %r: tensor<?xf32>) -> (tensor<?x262147xbf16>, tensor<262147xbf16>) {
  %dx, %dw = liger.rms_norm_grad %dy, %x, %w, %r : tensor<?x262147xbf16>, tensor<262147xbf16>, tensor<?xf32>
  return %dx, %dw : tensor<?x262147xbf16>, tensor<262147xbf16>
}

func.func @silu_mul_256000(%a: tensor<?x256000xbf16>, %b: tensor<?x256000xbf16>) -> tensor<?x256000xbf16> {
  %s = liger.silu %a : tensor<?x256000xbf16>
  %y = liger.mul %s, %b : tensor<?x256000xbf16>
  return %y : tensor<?x256000xbf16>
}
