// RUN: liger-opt %s --liger-select-kernel-config --split-input-file | FileCheck %s
// RUN: liger-opt %s --liger-select-kernel-config --liger-lower-to-gpu --split-input-file | FileCheck %s --check-prefix=GPU
// RUN: liger-opt %s --liger-select-kernel-config=chip=sm_80 --split-input-file | FileCheck %s --check-prefix=SM80

// 14336 bf16: 16-byte vectors, 256 threads (7 chunks each).
// CHECK-LABEL: func.func @wide
//       CHECK:   liger.fusion rowwise(%{{.+}}) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 8>}
// GPU-LABEL: gpu.func @wide_rowwise_0
//  GPU-SAME:   known_block_size = array<i32: 256, 1, 1>
func.func @wide(%x: tensor<?x14336xbf16>) -> tensor<?x14336xbf16> {
  %y = liger.fusion rowwise(%x) : (tensor<?x14336xbf16>) -> tensor<?x14336xbf16> {
  ^bb0(%a: tensor<?x14336xbf16>):
    %s = liger.silu %a : tensor<?x14336xbf16>
    liger.yield %s : tensor<?x14336xbf16>
  }
  return %y : tensor<?x14336xbf16>
}

// -----

// A short row of f32 whose length 4 does not divide: 2-wide vectors, one
// warp.
// CHECK-LABEL: func.func @short
//       CHECK:   liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 32, vector_width = 2>
func.func @short(%x: tensor<?x6xf32>) -> tensor<?x6xf32> {
  %y = liger.fusion rowwise(%x) : (tensor<?x6xf32>) -> tensor<?x6xf32> {
  ^bb0(%a: tensor<?x6xf32>):
    %s = liger.softmax %a : tensor<?x6xf32>
    liger.yield %s : tensor<?x6xf32>
  }
  return %y : tensor<?x6xf32>
}

// -----

// Rows of odd length: the widest vector that divides the row (7 f32 and
// 1001 bf16 take one element, 1002 f16 two), so that every row starts on a
// chunk boundary.
// CHECK-LABEL: func.func @odd_rows
//       CHECK:   liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 32, vector_width = 1>
//       CHECK:   liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 1>
//       CHECK:   liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 2>
func.func @odd_rows(%a: tensor<?x7xf32>, %b: tensor<?x1001xbf16>, %c: tensor<?x1002xf16>) -> (tensor<?x7xf32>, tensor<?x1001xbf16>, tensor<?x1002xf16>) {
  %x = liger.fusion rowwise(%a) : (tensor<?x7xf32>) -> tensor<?x7xf32> {
  ^bb0(%v: tensor<?x7xf32>):
    %s = liger.softmax %v : tensor<?x7xf32>
    liger.yield %s : tensor<?x7xf32>
  }
  %y = liger.fusion rowwise(%b) : (tensor<?x1001xbf16>) -> tensor<?x1001xbf16> {
  ^bb0(%v: tensor<?x1001xbf16>):
    %s = liger.silu %v : tensor<?x1001xbf16>
    liger.yield %s : tensor<?x1001xbf16>
  }
  %z = liger.fusion rowwise(%c) : (tensor<?x1002xf16>) -> tensor<?x1002xf16> {
  ^bb0(%v: tensor<?x1002xf16>):
    %s = liger.silu %v : tensor<?x1002xf16>
    liger.yield %s : tensor<?x1002xf16>
  }
  return %x, %y, %z : tensor<?x7xf32>, tensor<?x1001xbf16>, tensor<?x1002xf16>
}

// -----

// Long rows of one-element chunks: more threads where that keeps the row in
// registers (softmax over 32001 f32 holds x across its reductions: 63
// chunks a thread at 512; no spill fallback: it keeps the width that
// divides it), else 512 threads that loop over their chunks, with 256 as
// the spill fallback liger-compile takes where ptxas spills at 512 (SiLU
// over 50257 bf16 holds nothing, and would unroll 50 chunks at 1024 where
// such a program unrolls at most 8; softmax over 50257). A looped row is
// peeled to 16-byte chunks (8 bf16) rather than read one element at a time.
// CHECK-LABEL: func.func @long_rows
//       CHECK:   liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 1>}
//       CHECK:   liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 8>, liger.spill_fallback = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 8>}
//       CHECK:   liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 8>, liger.spill_fallback = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 8>}
// GPU-LABEL: gpu.func @long_rows_rowwise_1
//  GPU-SAME:   known_block_size = array<i32: 512, 1, 1>
//       GPU:   scf.for
func.func @long_rows(%a: tensor<?x32001xf32>, %b: tensor<?x50257xbf16>) -> (tensor<?x32001xf32>, tensor<?x50257xbf16>, tensor<?x50257xbf16>) {
  %x = liger.fusion rowwise(%a) : (tensor<?x32001xf32>) -> tensor<?x32001xf32> {
  ^bb0(%v: tensor<?x32001xf32>):
    %s = liger.softmax %v : tensor<?x32001xf32>
    liger.yield %s : tensor<?x32001xf32>
  }
  %y = liger.fusion rowwise(%b) : (tensor<?x50257xbf16>) -> tensor<?x50257xbf16> {
  ^bb0(%v: tensor<?x50257xbf16>):
    %s = liger.silu %v : tensor<?x50257xbf16>
    liger.yield %s : tensor<?x50257xbf16>
  }
  %z = liger.fusion rowwise(%b) : (tensor<?x50257xbf16>) -> tensor<?x50257xbf16> {
  ^bb0(%v: tensor<?x50257xbf16>):
    %s = liger.softmax %v : tensor<?x50257xbf16>
    liger.yield %s : tensor<?x50257xbf16>
  }
  return %x, %y, %z : tensor<?x32001xf32>, tensor<?x50257xbf16>, tensor<?x50257xbf16>
}

// -----

// A program that holds nothing (SiLU) unrolls at most 8 chunks a thread:
// over 20480 bf16, 10 chunks at 256 threads, so 512 threads take 5 each.
// One that holds its row across a reduction (softmax over the same row)
// keeps 256 threads and 10 chunks.
// CHECK-LABEL: func.func @streaming_rows
//       CHECK:   liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 8>
//       CHECK:   liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 8>
// GPU-LABEL: gpu.func @streaming_rows_rowwise_0
//  GPU-SAME:   known_block_size = array<i32: 512, 1, 1>
//   GPU-NOT:   scf.for
//       GPU:   gpu.return
func.func @streaming_rows(%b: tensor<?x20480xbf16>) -> (tensor<?x20480xbf16>, tensor<?x20480xbf16>) {
  %y = liger.fusion rowwise(%b) : (tensor<?x20480xbf16>) -> tensor<?x20480xbf16> {
  ^bb0(%v: tensor<?x20480xbf16>):
    %s = liger.silu %v : tensor<?x20480xbf16>
    liger.yield %s : tensor<?x20480xbf16>
  }
  %z = liger.fusion rowwise(%b) : (tensor<?x20480xbf16>) -> tensor<?x20480xbf16> {
  ^bb0(%v: tensor<?x20480xbf16>):
    %s = liger.softmax %v : tensor<?x20480xbf16>
    liger.yield %s : tensor<?x20480xbf16>
  }
  return %y, %z : tensor<?x20480xbf16>, tensor<?x20480xbf16>
}

// -----

// Near-misses of the peeled default: a looped row with a weight (RMSNorm
// over 50257 bf16, its weight indexed by column alone) keeps one-element
// chunks; a group whose first input is bf16 and whose program first reads
// an f32 row is peeled to 16 bytes of f32 (4), the narrower of the two.
// CHECK-LABEL: func.func @peel_near_misses
//       CHECK:   liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 1>, liger.spill_fallback = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 1>}
//       CHECK:   liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 4>, liger.spill_fallback = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 4>}
// GPU-LABEL: gpu.func @peel_near_misses_rowwise_0
//  GPU-SAME:   vector_width = 1
// GPU-LABEL: gpu.func @peel_near_misses_rowwise_1
//  GPU-SAME:   vector_width = 4
//       GPU:   vector.load %arg1[%block_id_x, %{{.+}}] {alignment = 16 : i64} : memref<?x50257xf32>, vector<4xf32>
func.func @peel_near_misses(%x: tensor<?x50257xbf16>, %w: tensor<50257xbf16>, %f: tensor<?x50257xf32>) -> (tensor<?x50257xbf16>, tensor<?x50257xf32>, tensor<?x50257xbf16>) {
  %y = liger.fusion rowwise(%x, %w) : (tensor<?x50257xbf16>, tensor<50257xbf16>) -> tensor<?x50257xbf16> {
  ^bb0(%a: tensor<?x50257xbf16>, %c: tensor<50257xbf16>):
    %0 = liger.rms_norm %a, %c : tensor<?x50257xbf16>, tensor<50257xbf16>
    liger.yield %0 : tensor<?x50257xbf16>
  }
  %r:2 = liger.fusion rowwise(%x, %f) : (tensor<?x50257xbf16>, tensor<?x50257xf32>) -> (tensor<?x50257xf32>, tensor<?x50257xbf16>) {
  ^bb0(%a: tensor<?x50257xbf16>, %b: tensor<?x50257xf32>):
    %s = liger.softmax %b : tensor<?x50257xf32>
    %t = liger.silu %a : tensor<?x50257xbf16>
    liger.yield %s, %t : tensor<?x50257xf32>, tensor<?x50257xbf16>
  }
  return %y, %r#0, %r#1 : tensor<?x50257xbf16>, tensor<?x50257xf32>, tensor<?x50257xbf16>
}

// -----

// A looped program that reduces across rows (RMSNorm's backward over 32001
// bf16: dW summed over the rows of each CTA) keeps 256 threads and has no
// spill fallback: its grid is four CTAs an SM, which 512 threads would run
// in two waves (nor is it peeled: its weight and dW are indexed by column
// alone). The same row's forward fits the register form at 512 threads,
// with no fallback.
// CHECK-LABEL: func.func @loop_across_rows
//       CHECK:   liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 1>}
//       CHECK:   liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 1>}
// GPU-LABEL: gpu.func @loop_across_rows_rowwise_0
//  GPU-SAME:   known_block_size = array<i32: 256, 1, 1>
//       GPU:   scf.for
func.func @loop_across_rows(%dy: tensor<?x32001xbf16>, %x: tensor<?x32001xbf16>, %w: tensor<32001xbf16>, %r: tensor<?xf32>) -> (tensor<?x32001xbf16>, tensor<32001xbf16>, tensor<?x32001xbf16>) {
  %dx, %dw = liger.fusion rowwise(%dy, %x, %w, %r) : (tensor<?x32001xbf16>, tensor<?x32001xbf16>, tensor<32001xbf16>, tensor<?xf32>) -> (tensor<?x32001xbf16>, tensor<32001xbf16>) {
  ^bb0(%a: tensor<?x32001xbf16>, %b: tensor<?x32001xbf16>, %c: tensor<32001xbf16>, %d: tensor<?xf32>):
    %0, %1 = liger.rms_norm_grad %a, %b, %c, %d : tensor<?x32001xbf16>, tensor<32001xbf16>, tensor<?xf32>
    liger.yield %0, %1 : tensor<?x32001xbf16>, tensor<32001xbf16>
  }
  %y = liger.fusion rowwise(%x, %w) : (tensor<?x32001xbf16>, tensor<32001xbf16>) -> tensor<?x32001xbf16> {
  ^bb0(%a: tensor<?x32001xbf16>, %c: tensor<32001xbf16>):
    %0 = liger.rms_norm %a, %c : tensor<?x32001xbf16>, tensor<32001xbf16>
    liger.yield %0 : tensor<?x32001xbf16>
  }
  return %dx, %dw, %y : tensor<?x32001xbf16>, tensor<32001xbf16>, tensor<?x32001xbf16>
}

// -----

// The cross-entropy template peels rows that do not start on a chunk// -----

// Both templates peel rows that do not start on a chunk boundary, so
// GPT-2's vocabulary keeps 16-byte chunks in the cross-entropy template and
// in the (looped) row program over the same row.
// CHECK-LABEL: func.func @gpt2_vocabulary
//       CHECK:   liger.kernel_config = #liger.kernel_config<kernel_template = cross_entropy, threads = 1024, vector_width = 8, ctas_per_sm = 1>}
//       CHECK:   liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 8>, liger.spill_fallback = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 8>}
func.func @gpt2_vocabulary(%x: tensor<?x50257xbf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x50257xbf16>, tensor<?x50257xbf16>) {
  %r:2 = liger.fusion rowwise(%x, %t, %g) : (tensor<?x50257xbf16>, tensor<?xi64>, tensor<f32>) -> (tensor<f32>, tensor<?x50257xbf16>) {
  ^bb0(%a: tensor<?x50257xbf16>, %b: tensor<?xi64>, %c: tensor<f32>):
    %l = liger.cross_entropy %a, %b : tensor<?x50257xbf16>, tensor<?xi64>
    %d = liger.cross_entropy_grad %a, %b, %c : tensor<?x50257xbf16>, tensor<?xi64>, tensor<f32>
    liger.yield %l, %d : tensor<f32>, tensor<?x50257xbf16>
  }
  %s = liger.fusion rowwise(%x) : (tensor<?x50257xbf16>) -> tensor<?x50257xbf16> {
  ^bb0(%v: tensor<?x50257xbf16>):
    %y = liger.softmax %v : tensor<?x50257xbf16>
    liger.yield %y : tensor<?x50257xbf16>
  }
  return %r#0, %r#1, %s : tensor<f32>, tensor<?x50257xbf16>, tensor<?x50257xbf16>
}

// -----

// Near-miss: a pinned configuration stays. A matmul group gets a tile
// configuration: f32 takes 32-element (128-byte) K slices, a 64-column tile
// (64 does not divide by 128).
// CHECK-LABEL: func.func @pinned_and_matmul
//       CHECK:   liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 64, vector_width = 4>
//       CHECK:   liger.fusion matmul{{.*}}liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, threads = 384, tile_m = 128, tile_n = 64, tile_k = 32, stages = 5>
// GPU-LABEL: gpu.func @pinned_and_matmul_rowwise_0
//  GPU-SAME:   known_block_size = array<i32: 64, 1, 1>
func.func @pinned_and_matmul(%x: tensor<?x64xf32>, %w: tensor<64x64xf32>) -> (tensor<?x64xf32>, tensor<?x64xf32>) {
  %y = liger.fusion rowwise(%x) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 64, vector_width = 4>} : (tensor<?x64xf32>) -> tensor<?x64xf32> {
  ^bb0(%a: tensor<?x64xf32>):
    %s = liger.silu %a : tensor<?x64xf32>
    liger.yield %s : tensor<?x64xf32>
  }
  %p = liger.fusion matmul(%x, %w) : (tensor<?x64xf32>, tensor<64x64xf32>) -> tensor<?x64xf32> {
  ^bb0(%a: tensor<?x64xf32>, %b: tensor<64x64xf32>):
    %l = liger.linear %a, %b : tensor<?x64xf32>, tensor<64x64xf32>
    liger.yield %l : tensor<?x64xf32>
  }
  return %y, %p : tensor<?x64xf32>, tensor<?x64xf32>
}

// -----

// Llama-3-8B's projections on sm_90a: 128 x 256 tiles, 64-element (128-byte)
// K slices, 4 stages of 48 KiB; a gate/up pair takes 128 columns of each;
// 16 static rows (decode) take a 64-row tile, one consumer warpgroup and 5
// stages. On sm_80: mma.sync with 32-element K slices.
// CHECK-LABEL: func.func @llama_projections
//       CHECK:   liger.fusion matmul{{.*}}#liger.kernel_config<kernel_template = matmul_wgmma, threads = 384, tile_m = 128, tile_n = 256, tile_k = 64, stages = 4>
//       CHECK:   liger.fusion matmul{{.*}}#liger.kernel_config<kernel_template = matmul_wgmma, threads = 384, tile_m = 128, tile_n = 128, tile_k = 64, stages = 4>
//       CHECK:   liger.fusion matmul{{.*}}#liger.kernel_config<kernel_template = matmul_wgmma, threads = 256, tile_m = 64, tile_n = 256, tile_k = 64, stages = 5>
// SM80-LABEL: func.func @llama_projections
//       SM80:   #liger.kernel_config<kernel_template = matmul_mma_sync, threads = 256, tile_m = 128, tile_n = 128, tile_k = 32, stages = 5>
//       SM80:   #liger.kernel_config<kernel_template = matmul_mma_sync, threads = 256, tile_m = 128, tile_n = 64, tile_k = 32, stages = 5>
//       SM80:   #liger.kernel_config<kernel_template = matmul_mma_sync, threads = 128, tile_m = 64, tile_n = 128, tile_k = 32, stages = 5>
func.func @llama_projections(%x: tensor<?x4096xbf16>, %wq: tensor<4096x4096xbf16>, %wg: tensor<14336x4096xbf16>, %wu: tensor<14336x4096xbf16>, %t: tensor<16x4096xbf16>) -> (tensor<?x4096xbf16>, tensor<?x14336xbf16>, tensor<16x4096xbf16>) {
  %q = liger.fusion matmul(%x, %wq) : (tensor<?x4096xbf16>, tensor<4096x4096xbf16>) -> tensor<?x4096xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<4096x4096xbf16>):
    %l = liger.linear %a, %b : tensor<?x4096xbf16>, tensor<4096x4096xbf16>
    liger.yield %l : tensor<?x4096xbf16>
  }
  %h = liger.fusion matmul(%x, %wg, %wu) : (tensor<?x4096xbf16>, tensor<14336x4096xbf16>, tensor<14336x4096xbf16>) -> tensor<?x14336xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %g: tensor<14336x4096xbf16>, %u: tensor<14336x4096xbf16>):
    %lg = liger.linear %a, %g : tensor<?x4096xbf16>, tensor<14336x4096xbf16>
    %lu = liger.linear %a, %u : tensor<?x4096xbf16>, tensor<14336x4096xbf16>
    %s = liger.swiglu %lg, %lu : tensor<?x14336xbf16>
    liger.yield %s : tensor<?x14336xbf16>
  }
  %d = liger.fusion matmul(%t, %wq) : (tensor<16x4096xbf16>, tensor<4096x4096xbf16>) -> tensor<16x4096xbf16> {
  ^bb0(%a: tensor<16x4096xbf16>, %b: tensor<4096x4096xbf16>):
    %l = liger.linear %a, %b : tensor<16x4096xbf16>, tensor<4096x4096xbf16>
    liger.yield %l : tensor<16x4096xbf16>
  }
  return %q, %h, %d : tensor<?x4096xbf16>, tensor<?x14336xbf16>, tensor<16x4096xbf16>
}

// -----

// Gradient products: dx's B operand (W, read N-major) in 64-column boxes
// (N = 1000 takes 128-wide tiles); dW's rows are dy's 4096 features.
// CHECK-LABEL: func.func @gradients
//       CHECK:   liger.fusion matmul{{.*}}#liger.kernel_config<kernel_template = matmul_wgmma, threads = 384, tile_m = 128, tile_n = 128, tile_k = 64, stages = 5>
//       CHECK:   liger.fusion matmul{{.*}}#liger.kernel_config<kernel_template = matmul_wgmma, threads = 384, tile_m = 128, tile_n = 256, tile_k = 64, stages = 4>
// SM80-LABEL: func.func @gradients
//       SM80:   liger.fusion matmul{{.*}}#liger.kernel_config<kernel_template = matmul_mma_sync, threads = 256, tile_m = 128, tile_n = 64, tile_k = 32, stages = 5>
//       SM80:   liger.fusion matmul{{.*}}#liger.kernel_config<kernel_template = matmul_mma_sync, threads = 256, tile_m = 128, tile_n = 128, tile_k = 32, stages = 5>
func.func @gradients(%dy: tensor<?x4096xbf16>, %w: tensor<4096x1000xbf16>, %x: tensor<?x1024xbf16>) -> (tensor<?x1000xbf16>, tensor<4096x1024xbf16>) {
  %dx = liger.fusion matmul(%dy, %w) : (tensor<?x4096xbf16>, tensor<4096x1000xbf16>) -> tensor<?x1000xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<4096x1000xbf16>):
    %g = liger.linear_grad_input %a, %b : tensor<?x4096xbf16>, tensor<4096x1000xbf16>
    liger.yield %g : tensor<?x1000xbf16>
  }
  %dw = liger.fusion matmul(%dy, %x) : (tensor<?x4096xbf16>, tensor<?x1024xbf16>) -> tensor<4096x1024xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<?x1024xbf16>):
    %g = liger.linear_grad_weight %a, %b : tensor<?x4096xbf16>, tensor<?x1024xbf16>
    liger.yield %g : tensor<4096x1024xbf16>
  }
  return %dx, %dw : tensor<?x1000xbf16>, tensor<4096x1024xbf16>
}

// -----

// q/k + RoPE: the widest column tile of whole heads dividing both
// projections (head_dim 16, widths 64 and 32: 32).
// CHECK-LABEL: func.func @qk_rope
//       CHECK:   liger.fusion matmul{{.*}}kernel_template = matmul_wgmma{{.*}}tile_n = 32,
// SM80-LABEL: func.func @qk_rope
//       SM80:   liger.fusion matmul{{.*}}kernel_template = matmul_mma_sync{{.*}}tile_n = 32,
func.func @qk_rope(%x: tensor<?x?x64xbf16>, %wq: tensor<64x64xbf16>, %wk: tensor<32x64xbf16>,
                   %cos: tensor<1x?x16xbf16>, %sin: tensor<1x?x16xbf16>)
    -> (tensor<?x4x?x16xbf16>, tensor<?x2x?x16xbf16>) {
  %r:2 = liger.fusion matmul(%x, %wq, %wk, %cos, %sin) : (tensor<?x?x64xbf16>, tensor<64x64xbf16>, tensor<32x64xbf16>, tensor<1x?x16xbf16>, tensor<1x?x16xbf16>) -> (tensor<?x4x?x16xbf16>, tensor<?x2x?x16xbf16>) {
  ^bb0(%bx: tensor<?x?x64xbf16>, %bwq: tensor<64x64xbf16>, %bwk: tensor<32x64xbf16>, %bcos: tensor<1x?x16xbf16>, %bsin: tensor<1x?x16xbf16>):
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %q = liger.linear %bx, %bwq : tensor<?x?x64xbf16>, tensor<64x64xbf16>
    %k = liger.linear %bx, %bwk : tensor<?x?x64xbf16>, tensor<32x64xbf16>
    %qb = tensor.dim %q, %c0 : tensor<?x?x64xbf16>
    %qt = tensor.dim %q, %c1 : tensor<?x?x64xbf16>
    %q4 = tensor.expand_shape %q [[0], [1], [2, 3]] output_shape [%qb, %qt, 4, 16] : tensor<?x?x64xbf16> into tensor<?x?x4x16xbf16>
    %k4 = tensor.expand_shape %k [[0], [1], [2, 3]] output_shape [%qb, %qt, 2, 16] : tensor<?x?x32xbf16> into tensor<?x?x2x16xbf16>
    %qi = tensor.empty(%qb, %qt) : tensor<?x4x?x16xbf16>
    %ki = tensor.empty(%qb, %qt) : tensor<?x2x?x16xbf16>
    %qh = linalg.transpose ins(%q4 : tensor<?x?x4x16xbf16>) outs(%qi : tensor<?x4x?x16xbf16>) permutation = [0, 2, 1, 3]
    %kh = linalg.transpose ins(%k4 : tensor<?x?x2x16xbf16>) outs(%ki : tensor<?x2x?x16xbf16>) permutation = [0, 2, 1, 3]
    %qr, %kr = liger.rope %qh, %kh, %bcos, %bsin : tensor<?x4x?x16xbf16>, tensor<?x2x?x16xbf16>, tensor<1x?x16xbf16>
    liger.yield %qr, %kr : tensor<?x4x?x16xbf16>, tensor<?x2x?x16xbf16>
  }
  return %r#0, %r#1 : tensor<?x4x?x16xbf16>, tensor<?x2x?x16xbf16>
}

// -----

// A cross-entropy loss and its gradient in one kernel over long rows
// (128256 bf16, 250 KiB): 1024 threads, one CTA per SM, so that the rows in
// flight stay in L2 for the gradient pass.
// CHECK-LABEL: func.func @ce_fused_long
//       CHECK:   liger.kernel_config = #liger.kernel_config<kernel_template = cross_entropy, threads = 1024, vector_width = 8, ctas_per_sm = 1>
// GPU-LABEL: gpu.func @ce_fused_long_rowwise_0
//  GPU-SAME:   known_block_size = array<i32: 1024, 1, 1>
func.func @ce_fused_long(%x: tensor<?x128256xbf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x128256xbf16>) {
  %r:2 = liger.fusion rowwise(%x, %t, %g) : (tensor<?x128256xbf16>, tensor<?xi64>, tensor<f32>) -> (tensor<f32>, tensor<?x128256xbf16>) {
  ^bb0(%a: tensor<?x128256xbf16>, %b: tensor<?xi64>, %c: tensor<f32>):
    %l = liger.cross_entropy %a, %b : tensor<?x128256xbf16>, tensor<?xi64>
    %d = liger.cross_entropy_grad %a, %b, %c : tensor<?x128256xbf16>, tensor<?xi64>, tensor<f32>
    liger.yield %l, %d : tensor<f32>, tensor<?x128256xbf16>
  }
  return %r#0, %r#1 : tensor<f32>, tensor<?x128256xbf16>
}

// -----

// Near-misses, each left at 256 threads: the loss alone (one pass over each
// row); the fused pair over rows under 64 KiB (32000 bf16); the fused pair
// with reduction = none (no per-CTA partials, a row per CTA).
// CHECK-LABEL: func.func @ce_near_misses
//       CHECK:   liger.kernel_config = #liger.kernel_config<kernel_template = cross_entropy, threads = 256, vector_width = 8>
//       CHECK:   liger.kernel_config = #liger.kernel_config<kernel_template = cross_entropy, threads = 256, vector_width = 8>
//       CHECK:   liger.kernel_config = #liger.kernel_config<kernel_template = cross_entropy, threads = 256, vector_width = 8>
func.func @ce_near_misses(%x: tensor<?x128256xbf16>, %y: tensor<?x32000xbf16>, %t: tensor<?xi64>, %g: tensor<f32>, %gn: tensor<?xf32>) -> (tensor<f32>, tensor<f32>, tensor<?x32000xbf16>, tensor<?xf32>, tensor<?x128256xbf16>) {
  %l = liger.fusion rowwise(%x, %t) : (tensor<?x128256xbf16>, tensor<?xi64>) -> tensor<f32> {
  ^bb0(%a: tensor<?x128256xbf16>, %b: tensor<?xi64>):
    %0 = liger.cross_entropy %a, %b : tensor<?x128256xbf16>, tensor<?xi64>
    liger.yield %0 : tensor<f32>
  }
  %s:2 = liger.fusion rowwise(%y, %t, %g) : (tensor<?x32000xbf16>, tensor<?xi64>, tensor<f32>) -> (tensor<f32>, tensor<?x32000xbf16>) {
  ^bb0(%a: tensor<?x32000xbf16>, %b: tensor<?xi64>, %c: tensor<f32>):
    %0 = liger.cross_entropy %a, %b : tensor<?x32000xbf16>, tensor<?xi64>
    %1 = liger.cross_entropy_grad %a, %b, %c : tensor<?x32000xbf16>, tensor<?xi64>, tensor<f32>
    liger.yield %0, %1 : tensor<f32>, tensor<?x32000xbf16>
  }
  %n:2 = liger.fusion rowwise(%x, %t, %gn) : (tensor<?x128256xbf16>, tensor<?xi64>, tensor<?xf32>) -> (tensor<?xf32>, tensor<?x128256xbf16>) {
  ^bb0(%a: tensor<?x128256xbf16>, %b: tensor<?xi64>, %c: tensor<?xf32>):
    %0 = liger.cross_entropy %a, %b reduction = none : tensor<?x128256xbf16>, tensor<?xi64>
    %1 = liger.cross_entropy_grad %a, %b, %c reduction = none : tensor<?x128256xbf16>, tensor<?xi64>, tensor<?xf32>
    liger.yield %0, %1 : tensor<?xf32>, tensor<?x128256xbf16>
  }
  return %l, %s#0, %s#1, %n#0, %n#1 : tensor<f32>, tensor<f32>, tensor<?x32000xbf16>, tensor<?xf32>, tensor<?x128256xbf16>
}

// -----

// Attention: key/value blocks of 128 rows up to D 128, of 64 past it (S's
// and O's accumulators stay in a consumer thread's registers), as many
// stages as fit in shared memory (three, and two for D 256); on sm_80 (less
// shared memory) two, and liger-lower-to-gpu then leaves the group (no
// wgmma there).
// CHECK-LABEL: func.func @attention_blocks
//       CHECK:   liger.kernel_config = #liger.kernel_config<kernel_template = attention, tile_n = 128, stages = 3>
//       CHECK:   liger.kernel_config = #liger.kernel_config<kernel_template = attention, tile_n = 64, stages = 2>
// GPU-LABEL: gpu.func @attention_blocks_attention_0
// GPU-LABEL: gpu.func @attention_blocks_attention_1
// SM80-LABEL: func.func @attention_blocks
//       SM80:   kernel_template = attention, tile_n = 128, stages = 2
func.func @attention_blocks(%q: tensor<?x32x?x128xbf16>, %k: tensor<?x8x?x128xbf16>, %w: tensor<?x8x?x256xbf16>) -> (tensor<?x32x?x128xbf16>, tensor<?x8x?x256xbf16>) {
  %o = liger.fusion attention(%q, %k) : (tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>) -> tensor<?x32x?x128xbf16> {
  ^bb0(%a: tensor<?x32x?x128xbf16>, %b: tensor<?x8x?x128xbf16>):
    %0 = liger.attention %a, %b, %b causal : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
    liger.yield %0 : tensor<?x32x?x128xbf16>
  }
  %p = liger.fusion attention(%w) : (tensor<?x8x?x256xbf16>) -> tensor<?x8x?x256xbf16> {
  ^bb0(%a: tensor<?x8x?x256xbf16>):
    %0 = liger.attention %a, %a, %a : tensor<?x8x?x256xbf16>, tensor<?x8x?x256xbf16>, tensor<?x8x?x256xbf16>
    liger.yield %0 : tensor<?x8x?x256xbf16>
  }
  return %o, %p : tensor<?x32x?x128xbf16>, tensor<?x8x?x256xbf16>
}

// -----

// The attention backward: key tiles of 128 rows (64 a consumer warpgroup),
// as many query-block stages as fit: three at D 128 (k's and v's tiles, q,
// dO and out a stage), four at D 64: a persistent kernel and the one that
// rounds dq from its f32 workspace each.
// CHECK-LABEL: func.func @attention_grad_blocks
//       CHECK:   liger.kernel_config = #liger.kernel_config<kernel_template = attention, tile_n = 128, stages = 3>
//       CHECK:   liger.kernel_config = #liger.kernel_config<kernel_template = attention, tile_n = 128, stages = 4>
// GPU-LABEL: gpu.func @attention_grad_blocks_attention_0(
// GPU-LABEL: gpu.func @attention_grad_blocks_attention_0_finish(
// GPU-LABEL: gpu.func @attention_grad_blocks_attention_1(
// SM80-LABEL: func.func @attention_grad_blocks
//       SM80:   kernel_template = attention, tile_n = 128, stages = 2
func.func @attention_grad_blocks(%q: tensor<?x32x?x128xbf16>, %k: tensor<?x8x?x128xbf16>, %l: tensor<?x32x?xf32>, %w: tensor<?x4x?x64xbf16>, %m: tensor<?x4x?xf32>) -> (tensor<?x32x?x128xbf16>, tensor<?x4x?x64xbf16>) {
  %g:3 = liger.fusion attention(%q, %k, %l) : (tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x32x?xf32>) -> (tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>) {
  ^bb0(%a: tensor<?x32x?x128xbf16>, %b: tensor<?x8x?x128xbf16>, %c: tensor<?x32x?xf32>):
    %0:3 = liger.attention_grad %a, %a, %b, %b saved(%a, %c : tensor<?x32x?x128xbf16>, tensor<?x32x?xf32>) causal : tensor<?x32x?x128xbf16>, tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
    liger.yield %0#0, %0#1, %0#2 : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<?x8x?x128xbf16>
  }
  %h:3 = liger.fusion attention(%w, %m) : (tensor<?x4x?x64xbf16>, tensor<?x4x?xf32>) -> (tensor<?x4x?x64xbf16>, tensor<?x4x?x64xbf16>, tensor<?x4x?x64xbf16>) {
  ^bb0(%a: tensor<?x4x?x64xbf16>, %c: tensor<?x4x?xf32>):
    %0:3 = liger.attention_grad %a, %a, %a, %a saved(%a, %c : tensor<?x4x?x64xbf16>, tensor<?x4x?xf32>) : tensor<?x4x?x64xbf16>, tensor<?x4x?x64xbf16>, tensor<?x4x?x64xbf16>, tensor<?x4x?x64xbf16>
    liger.yield %0#0, %0#1, %0#2 : tensor<?x4x?x64xbf16>, tensor<?x4x?x64xbf16>, tensor<?x4x?x64xbf16>
  }
  return %g#0, %h#0 : tensor<?x32x?x128xbf16>, tensor<?x4x?x64xbf16>
}

// -----

// Clusters: the selection gives no row program a cluster (a cluster is
// pinned). Split over 4 and 8 CTAs, softmax over 128256 bf16 and the JSD of
// two logit rows with its gradient, whose passes read their rows again
// from memory, ran slower than whole rows (docs/benchmarks.md, stop 60).
// CHECK-LABEL: func.func @clusters
//   CHECK-NOT:   cluster =
//       CHECK:   return
// GPU-LABEL: gpu.func @clusters_rowwise_0(
//  GPU-SAME:   grid = ["rows", 1, 1]
//   GPU-NOT:   nvvm.cluster_dim
func.func @clusters(%a: tensor<?x128256xbf16>, %b: tensor<?x50257xf32>, %c: tensor<?x50257xbf16>, %d: tensor<?x262147xf32>, %e: tensor<?x128256xbf16>, %g: tensor<?xf32>, %l: tensor<?xi64>, %w: tensor<128256xbf16>, %r: tensor<?xf32>) -> (tensor<?x128256xbf16>, tensor<?x50257xf32>, tensor<?x128256xbf16>, tensor<?x50257xbf16>, tensor<?x262147xf32>, tensor<?xf32>, tensor<?x128256xbf16>) {
  %0 = liger.fusion rowwise(%a) : (tensor<?x128256xbf16>) -> tensor<?x128256xbf16> {
  ^bb0(%v: tensor<?x128256xbf16>):
    %s = liger.softmax %v : tensor<?x128256xbf16>
    liger.yield %s : tensor<?x128256xbf16>
  }
  %1 = liger.fusion rowwise(%b) : (tensor<?x50257xf32>) -> tensor<?x50257xf32> {
  ^bb0(%v: tensor<?x50257xf32>):
    %s = liger.softmax %v : tensor<?x50257xf32>
    liger.yield %s : tensor<?x50257xf32>
  }
  %2 = liger.fusion rowwise(%a, %e, %g, %l) : (tensor<?x128256xbf16>, tensor<?x128256xbf16>, tensor<?xf32>, tensor<?xi64>) -> tensor<?x128256xbf16> {
  ^bb0(%x: tensor<?x128256xbf16>, %y: tensor<?x128256xbf16>, %u: tensor<?xf32>, %t: tensor<?xi64>):
    %s = liger.jsd_grad %x, %y, %u labels(%t : tensor<?xi64>) beta = 5.000000000e-01 ignore_index = -100 temperature = 1.000000000e+00 per_token : tensor<?x128256xbf16>, tensor<?xf32>
    liger.yield %s : tensor<?x128256xbf16>
  }
  %3 = liger.fusion rowwise(%c) : (tensor<?x50257xbf16>) -> tensor<?x50257xbf16> {
  ^bb0(%v: tensor<?x50257xbf16>):
    %s = liger.softmax %v : tensor<?x50257xbf16>
    liger.yield %s : tensor<?x50257xbf16>
  }
  %4 = liger.fusion rowwise(%d) : (tensor<?x262147xf32>) -> tensor<?x262147xf32> {
  ^bb0(%v: tensor<?x262147xf32>):
    %s = liger.softmax %v : tensor<?x262147xf32>
    liger.yield %s : tensor<?x262147xf32>
  }
  %5 = liger.fusion rowwise(%a, %e) : (tensor<?x128256xbf16>, tensor<?x128256xbf16>) -> tensor<?xf32> {
  ^bb0(%x: tensor<?x128256xbf16>, %y: tensor<?x128256xbf16>):
    %s = liger.kl_div %x, %y reduction = batchmean per_token : tensor<?x128256xbf16>
    liger.yield %s : tensor<?xf32>
  }
  %6:2 = liger.fusion rowwise(%a, %e, %w, %r) : (tensor<?x128256xbf16>, tensor<?x128256xbf16>, tensor<128256xbf16>, tensor<?xf32>) -> (tensor<?x128256xbf16>, tensor<128256xbf16>) {
  ^bb0(%x: tensor<?x128256xbf16>, %y: tensor<?x128256xbf16>, %v: tensor<128256xbf16>, %s: tensor<?xf32>):
    %dx, %dw = liger.rms_norm_grad %x, %y, %v, %s : tensor<?x128256xbf16>, tensor<128256xbf16>, tensor<?xf32>
    liger.yield %dx, %dw : tensor<?x128256xbf16>, tensor<128256xbf16>
  }
  return %0, %1, %2, %3, %4, %5, %6#0 : tensor<?x128256xbf16>, tensor<?x50257xf32>, tensor<?x128256xbf16>, tensor<?x50257xbf16>, tensor<?x262147xf32>, tensor<?xf32>, tensor<?x128256xbf16>
}
