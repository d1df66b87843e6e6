// RUN: liger-compile %s --target=sm_90a --loss-memory-budget=17920000 --emit=gpu -o - | FileCheck %s
// RUN: liger-compile %s --target=sm_90a --loss-memory-budget=4730880000 --emit=gpu -o - | FileCheck %s --check-prefix=LONG
// RUN: liger-compile %s --target=sm_90a --loss-memory-budget=17920000 --matmul-schedule=persistent --emit=gpu -o - | FileCheck %s --check-prefix=PERSISTENT

// A loss plan's chunk functions launch at most a chunk's rows
// (liger.chunk_rows), a number the launch knows and the compiler does not:
// a matmul kernel of theirs whose grid at the chunk's rows is under two
// waves of 132 SMs gets a narrow-tile variant (64-row tiles), which the
// launcher runs where it fills the GPU better. Here a chunk is 128 tokens
// of 70000 bf16 logits.
// CHECK-LABEL: func.func @step_loss0_logits(
//  CHECK-SAME:   liger.chunk_rows = 128
// CHECK-LABEL: func.func @step_loss0_dx(
//  CHECK-SAME:   liger.chunk_rows = 128
// CHECK-LABEL: gpu.module @liger_kernels
// A plain projection outside a plan: its rows are unbounded, no variant.
//       CHECK: gpu.func @proj_matmul_0(
//   CHECK-NOT:   narrow =
//  CHECK-SAME:   liger.kernel_info = #liger.kernel_info<kernel_template = matmul, ops = "liger.linear", grid = [1, "rows/128", 1]
//   CHECK-NOT:   narrow =
//  CHECK-SAME:   nvvm.reqntid
// The logits: 547 column tiles of 128 fill the GPU at any row count.
//       CHECK: gpu.func @step_loss0_logits_matmul_0(
//   CHECK-NOT:   narrow =
//  CHECK-SAME:   grid = [547, "rows/128", 1]
//   CHECK-NOT:   narrow =
//  CHECK-SAME:   nvvm.reqntid
// dx = G · W: one column tile of 256, one CTA per 128 rows; its variant has
// one per 64, 256 threads (one consumer warpgroup), its own A box.
//       CHECK: gpu.func @step_loss0_dx_matmul_0(
//  CHECK-SAME:   grid = [1, "rows/128", 1], threads = 384
//  CHECK-SAME:   narrow = <name = "step_loss0_dx_matmul_0_narrow", grid = [1, "rows/64", 1], threads = 256, shared_memory_bytes = {{[0-9]+}}, tensor_maps = [#liger.tensor_map<param = 0, box_rows = 64, box_cols = 64, swizzle = 128>
//       CHECK: gpu.func @step_loss0_dx_matmul_0_narrow(
//  CHECK-SAME:   known_block_size = array<i32: 256, 1, 1>
//   CHECK-NOT:   liger.kernel_info
//  CHECK-SAME:   nvvm.reqntid
// dW: a static [70000, 256] output, no row tiles.
//       CHECK: gpu.func @step_loss0_dw0_matmul_0(
//   CHECK-NOT:   narrow =
//  CHECK-SAME:   nvvm.reqntid
//       CHECK: gpu.func @step_loss0_dw_matmul_0(
//   CHECK-NOT:   narrow =
//  CHECK-SAME:   nvvm.reqntid

// A chunk of 33792 tokens is 264 row tiles, two waves: no variant.
// LONG: liger.chunk_rows = 33792
// LONG-NOT: narrow =
// LONG: gpu.func @step_loss0_dw_matmul_0(

// A schedule that loops over tiles (one CTA per SM) has no variant.
// PERSISTENT: gpu.func @step_loss0_dx_matmul_0(
// PERSISTENT-SAME: grid = ["sms", 1, 1]
// PERSISTENT-NOT: narrow =
// PERSISTENT: gpu.func @step_loss0_dw_matmul_0(

func.func @step(%h: tensor<?x256xbf16>, %w: tensor<70000x256xbf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x256xbf16>, tensor<70000x256xbf16>) {
  %l = liger.fused_linear_cross_entropy %h, %w, %t : tensor<?x256xbf16>, tensor<70000x256xbf16>, tensor<?xi64>
  %dh, %dw = liger.fused_linear_cross_entropy_grad %h, %w, %t, %g : tensor<?x256xbf16>, tensor<70000x256xbf16>, tensor<?xi64>, tensor<f32>
  return %l, %dh, %dw : tensor<f32>, tensor<?x256xbf16>, tensor<70000x256xbf16>
}

func.func @proj(%x: tensor<?x256xbf16>, %w: tensor<256x256xbf16>) -> tensor<?x256xbf16> {
  %y = liger.linear %x, %w : tensor<?x256xbf16>, tensor<256x256xbf16>
  return %y : tensor<?x256xbf16>
}
