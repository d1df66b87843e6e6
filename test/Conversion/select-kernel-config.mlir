// RUN: liger-opt %s --liger-select-kernel-config --split-input-file | FileCheck %s
// RUN: liger-opt %s --liger-select-kernel-config --liger-lower-to-gpu --split-input-file | FileCheck %s --check-prefix=GPU

// 14336 bf16: 16-byte vectors, 256 threads (7 chunks each).
// CHECK-LABEL: func.func @wide
//       CHECK:   liger.fusion rowwise(%{{.+}}) attributes {liger.kernel_config = {threads = 256 : i64, vector_width = 8 : i64}}
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
//       CHECK:   liger.kernel_config = {threads = 32 : i64, vector_width = 2 : i64}
func.func @short(%x: tensor<?x6xf32>) -> tensor<?x6xf32> {
  %y = liger.fusion rowwise(%x) : (tensor<?x6xf32>) -> tensor<?x6xf32> {
  ^bb0(%a: tensor<?x6xf32>):
    %s = liger.softmax %a : tensor<?x6xf32>
    liger.yield %s : tensor<?x6xf32>
  }
  return %y : tensor<?x6xf32>
}

// -----

// Near-miss: a pinned configuration stays; matmul groups get none.
// CHECK-LABEL: func.func @pinned_and_matmul
//       CHECK:   liger.kernel_config = {threads = 64 : i64, vector_width = 4 : i64}
//       CHECK:   liger.fusion matmul
//   CHECK-NOT:   liger.kernel_config
// GPU-LABEL: gpu.func @pinned_and_matmul_rowwise_0
//  GPU-SAME:   known_block_size = array<i32: 64, 1, 1>
func.func @pinned_and_matmul(%x: tensor<?x64xf32>, %w: tensor<64x64xf32>) -> (tensor<?x64xf32>, tensor<?x64xf32>) {
  %y = liger.fusion rowwise(%x) attributes {liger.kernel_config = {threads = 64 : i64, vector_width = 4 : i64}} : (tensor<?x64xf32>) -> tensor<?x64xf32> {
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
