// RUN: liger-opt %s --liger-lower-to-gpu --split-input-file | FileCheck %s
// RUN: liger-opt %s --liger-lower-to-gpu=chip=sm_80 --split-input-file | FileCheck %s --check-prefix=SM80

// add + RMSNorm over rows of 4096 bf16: one CTA of 256 threads per row,
// each thread two 8-wide chunks (16-byte loads), a shuffle + shared-memory
// sum, the sum kept in registers between the add and the norm.
// CHECK-LABEL: func.func @add_rms_norm
//       CHECK:   liger.fusion rowwise{{.*}}attributes {liger.kernel = @liger_kernels::@add_rms_norm_rowwise_0}
// CHECK-LABEL: gpu.module @liger_kernels [#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx86">]
//       CHECK:   gpu.func @add_rms_norm_rowwise_0(%{{.+}}: memref<?x4096xbf16>, %{{.+}}: memref<?x4096xbf16>, %{{.+}}: memref<4096xbf16>, %{{.+}}: memref<?x4096xbf16>, %{{.+}}: memref<?x4096xbf16>) kernel
//  CHECK-SAME:     known_block_size = array<i32: 256, 1, 1>
//  CHECK-SAME:     liger.kernel_info = {{{.*}}hidden = 4096 : i64{{.*}}ops = "liger.add_rms_norm"{{.*}}threads = 256 : i64, vector_width = 8 : i64}
//       CHECK:     gpu.dynamic_shared_memory
//       CHECK:     vector.load %{{.+}}[%{{.+}}, %{{.+}}] {alignment = 16 : i64} : memref<?x4096xbf16>, vector<8xbf16>
//       CHECK:     vector.store {{.*}} : memref<?x4096xbf16>, vector<8xbf16>
//       CHECK:     vector.reduction <add>
//       CHECK:     gpu.shuffle  xor
//       CHECK:     gpu.barrier
//       CHECK:     math.rsqrt
// SM80: gpu.module @liger_kernels [#nvvm.target<O = 3, chip = "sm_80", features = "+ptx86">]
func.func @add_rms_norm(%x: tensor<?x4096xbf16>, %r: tensor<?x4096xbf16>, %w: tensor<4096xbf16>) -> (tensor<?x4096xbf16>, tensor<?x4096xbf16>) {
  %y, %s = liger.fusion rowwise(%x, %r, %w) : (tensor<?x4096xbf16>, tensor<?x4096xbf16>, tensor<4096xbf16>) -> (tensor<?x4096xbf16>, tensor<?x4096xbf16>) {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<?x4096xbf16>, %c: tensor<4096xbf16>):
    %n, %sum = liger.add_rms_norm %a, %b, %c eps = 1.0e-5 : tensor<?x4096xbf16>, tensor<4096xbf16>
    liger.yield %n, %sum : tensor<?x4096xbf16>, tensor<?x4096xbf16>
  }
  return %y, %s : tensor<?x4096xbf16>, tensor<?x4096xbf16>
}

// -----

// A row of 1000 f32 (4-wide vectors, 250 chunks over 256 threads): the
// chunk is masked (the last 6 threads have none).
// CHECK-LABEL: gpu.func @softmax_rowwise_0
//  CHECK-SAME:   known_block_size = array<i32: 256, 1, 1>
//       CHECK:   arith.cmpi ult, %{{.+}}, %c1000
//  CHECK-NEXT:   scf.if
//       CHECK:   vector.reduction <maximumf>
func.func @softmax(%x: tensor<?x1000xf32>) -> tensor<?x1000xf32> {
  %y = liger.softmax %x : tensor<?x1000xf32>
  return %y : tensor<?x1000xf32>
}

// -----

// A pinned configuration is used as given; rstd (one value per row) is
// stored by thread 0.
// CHECK-LABEL: gpu.func @pinned_rowwise_0
//  CHECK-SAME:   memref<?x64xf32>, %{{.+}}: memref<64xf32>, %{{.+}}: memref<?x64xf32>, %[[RSTD:.+]]: memref<?xf32>)
//  CHECK-SAME:   known_block_size = array<i32: 32, 1, 1>
//       CHECK:   vector.load {{.*}} : memref<?x64xf32>, vector<2xf32>
//       CHECK:   scf.if
//       CHECK:     memref.store %{{.+}}, %[[RSTD]][%{{.+}}] : memref<?xf32>
func.func @pinned(%x: tensor<?x64xf32>, %w: tensor<64xf32>) -> (tensor<?x64xf32>, tensor<?xf32>) {
  %y, %r = liger.fusion rowwise(%x, %w) attributes {liger.kernel_config = {threads = 32 : i64, vector_width = 2 : i64}}
      : (tensor<?x64xf32>, tensor<64xf32>) -> (tensor<?x64xf32>, tensor<?xf32>) {
  ^bb0(%a: tensor<?x64xf32>, %b: tensor<64xf32>):
    %n, %rs = liger.rms_norm %a, %b rstd : tensor<?x64xf32>, tensor<64xf32>
    liger.yield %n, %rs : tensor<?x64xf32>, tensor<?xf32>
  }
  return %y, %r : tensor<?x64xf32>, tensor<?xf32>
}

// -----

// A rowwise op outside any group becomes a kernel of its own; matmul groups
// are left for their own template.
// CHECK-LABEL: func.func @lone_op_and_matmul
//       CHECK:   liger.fusion matmul
//   CHECK-NOT:     liger.kernel
//       CHECK:   liger.fusion rowwise{{.*}}liger.kernel = @liger_kernels::@lone_op_and_matmul_rowwise_0
//       CHECK:     liger.silu
// CHECK-LABEL: gpu.module @liger_kernels
//       CHECK:   gpu.func @lone_op_and_matmul_rowwise_0
//   CHECK-NOT:   gpu.func
func.func @lone_op_and_matmul(%x: tensor<?x64xf32>, %w: tensor<64x64xf32>) -> tensor<?x64xf32> {
  %p = liger.fusion matmul(%x, %w) : (tensor<?x64xf32>, tensor<64x64xf32>) -> tensor<?x64xf32> {
  ^bb0(%a: tensor<?x64xf32>, %b: tensor<64x64xf32>):
    %l = liger.linear %a, %b : tensor<?x64xf32>, tensor<64x64xf32>
    liger.yield %l : tensor<?x64xf32>
  }
  %s = liger.silu %p : tensor<?x64xf32>
  return %s : tensor<?x64xf32>
}

// -----

// RoPE: one CTA per token over all heads of q and k; each thread loads a
// chunk and its rotate-half partner (16-byte vectors) and writes both.
// CHECK-LABEL: gpu.func @rope_rowwise_0
//  CHECK-SAME:   (%[[Q:.+]]: memref<?x32x?x128xbf16>, %[[K:.+]]: memref<?x8x?x128xbf16>, %[[C:.+]]: memref<1x?x128xbf16>, %[[S:.+]]: memref<1x?x128xbf16>, %{{.+}}: memref<?x32x?x128xbf16>, %{{.+}}: memref<?x8x?x128xbf16>)
//  CHECK-SAME:   known_block_size = array<i32: 256, 1, 1>
//  CHECK-SAME:   grid = "tokens"
//  CHECK-SAME:   template = "rope"
//       CHECK:   scf.for
//       CHECK:     vector.load %[[Q]]{{.*}} {alignment = 16 : i64} : memref<?x32x?x128xbf16>, vector<8xbf16>
//       CHECK:     vector.load %[[C]]
//       CHECK:   else
//       CHECK:     vector.load %[[K]]
func.func @rope(%q: tensor<?x32x?x128xbf16>, %k: tensor<?x8x?x128xbf16>, %c: tensor<1x?x128xbf16>, %s: tensor<1x?x128xbf16>) -> (tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>) {
  %a, %b = liger.rope %q, %k, %c, %s : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<1x?x128xbf16>
  return %a, %b : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>
}
