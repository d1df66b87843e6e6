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
//  CHECK-SAME:     liger.kernel_info = #liger.kernel_info<kernel_template = rowwise, ops = "liger.add_rms_norm", grid = ["rows", 1, 1], threads = 256, shared_memory_bytes = {{[0-9]+}}, vector_width = 8,
//  CHECK-SAME:     nvvm.reqntid = array<i32: 256, 1, 1>
//       CHECK:     gpu.dynamic_shared_memory
//       CHECK:     vector.load %{{.+}}[%{{.+}}, %{{.+}}] {alignment = 16 : i64} : memref<?x4096xbf16>, vector<8xbf16>
//       CHECK:     vector.store {{.*}} : memref<?x4096xbf16>, vector<8xbf16>
//       CHECK:     vector.reduction <add>
//       CHECK:     gpu.shuffle  xor
//       CHECK:     gpu.barrier
//       CHECK:     math.rsqrt
// Its f32 arithmetic may contract into FMAs (as nvcc's and Triton's).
//       CHECK:     arith.mulf %{{.+}}, %{{.+}} fastmath<contract> : vector<8xf32>
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
  %y, %r = liger.fusion rowwise(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 32, vector_width = 2>}
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
//  CHECK-SAME:   liger.kernel_info = #liger.kernel_info<kernel_template = rope, ops = "liger.rope", grid = ["tokens", 1, 1]
//       CHECK:   scf.for
//       CHECK:     vector.load %[[Q]]{{.*}} {alignment = 16 : i64} : memref<?x32x?x128xbf16>, vector<8xbf16>
//       CHECK:     vector.load %[[C]]
//       CHECK:   else
//       CHECK:     vector.load %[[K]]
func.func @rope(%q: tensor<?x32x?x128xbf16>, %k: tensor<?x8x?x128xbf16>, %c: tensor<1x?x128xbf16>, %s: tensor<1x?x128xbf16>) -> (tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>) {
  %a, %b = liger.rope %q, %k, %c, %s : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<1x?x128xbf16>
  return %a, %b : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>
}

// -----

// One value as q and k, one table as cos and sin: the group's inputs are
// (q, table), each a parameter once, read by both of its operands; the
// outputs follow.
// CHECK-LABEL: gpu.func @rope_aliased_rowwise_0
//  CHECK-SAME:   (%[[Q:.+]]: memref<?x4x?x64xbf16>, %[[T:.+]]: memref<1x?x64xbf16>, %[[QO:.+]]: memref<?x4x?x64xbf16>, %[[KO:.+]]: memref<?x4x?x64xbf16>)
//  CHECK-SAME:   params = [#liger.kernel_param<name = "input0", role = input, kind = heads, dtype = bf16, length = 64, outer = 4>, #liger.kernel_param<name = "input1", role = input, kind = tables, dtype = bf16, length = 64, outer = 1>, #liger.kernel_param<name = "output0", role = output, kind = heads, dtype = bf16, length = 64, outer = 4>, #liger.kernel_param<name = "output1", role = output, kind = heads, dtype = bf16, length = 64, outer = 4>]
//       CHECK:   scf.for
//       CHECK:     vector.load %[[Q]]
//       CHECK:     vector.load %[[T]]
//       CHECK:     vector.load %[[T]]
//       CHECK:     vector.store {{.*}}, %[[QO]]
//       CHECK:   else
//       CHECK:     vector.load %[[Q]]
//       CHECK:     vector.store {{.*}}, %[[KO]]
func.func @rope_aliased(%q: tensor<?x4x?x64xbf16>, %c: tensor<1x?x64xbf16>) -> (tensor<?x4x?x64xbf16>, tensor<?x4x?x64xbf16>) {
  %a, %b = liger.rope %q, %q, %c, %c : tensor<?x4x?x64xbf16>, tensor<?x4x?x64xbf16>, tensor<1x?x64xbf16>
  return %a, %b : tensor<?x4x?x64xbf16>, tensor<?x4x?x64xbf16>
}

// -----

// A group whose inputs are in another order than the op's operands (sin,
// k, q, cos): the parameters are the group's inputs in their order, each
// bound to the operand that reads it.
// CHECK-LABEL: gpu.func @rope_reordered_rowwise_0
//  CHECK-SAME:   (%[[S:.+]]: memref<1x?x64xbf16>, %[[K:.+]]: memref<?x2x?x64xbf16>, %[[Q:.+]]: memref<?x4x?x64xbf16>, %[[C:.+]]: memref<1x?x64xbf16>, %{{.+}}: memref<?x4x?x64xbf16>, %{{.+}}: memref<?x2x?x64xbf16>)
//  CHECK-SAME:   params = [#liger.kernel_param<name = "input0", role = input, kind = tables, dtype = bf16, length = 64, outer = 1>, #liger.kernel_param<name = "input1", role = input, kind = heads, dtype = bf16, length = 64, outer = 2>, #liger.kernel_param<name = "input2", role = input, kind = heads, dtype = bf16, length = 64, outer = 4>, #liger.kernel_param<name = "input3", role = input, kind = tables, dtype = bf16, length = 64, outer = 1>, #liger.kernel_param<name = "output0", role = output, kind = heads, dtype = bf16, length = 64, outer = 4>, #liger.kernel_param<name = "output1", role = output, kind = heads, dtype = bf16, length = 64, outer = 2>]
//       CHECK:   scf.for
//       CHECK:     vector.load %[[Q]]
//       CHECK:     vector.load %[[C]]
//       CHECK:     vector.load %[[S]]
//       CHECK:   else
//       CHECK:     vector.load %[[K]]
func.func @rope_reordered(%q: tensor<?x4x?x64xbf16>, %k: tensor<?x2x?x64xbf16>, %c: tensor<1x?x64xbf16>, %s: tensor<1x?x64xbf16>) -> (tensor<?x4x?x64xbf16>, tensor<?x2x?x64xbf16>) {
  %r:2 = liger.fusion rowwise(%s, %k, %q, %c) : (tensor<1x?x64xbf16>, tensor<?x2x?x64xbf16>, tensor<?x4x?x64xbf16>, tensor<1x?x64xbf16>) -> (tensor<?x4x?x64xbf16>, tensor<?x2x?x64xbf16>) {
  ^bb0(%bs: tensor<1x?x64xbf16>, %bk: tensor<?x2x?x64xbf16>, %bq: tensor<?x4x?x64xbf16>, %bc: tensor<1x?x64xbf16>):
    %a, %b = liger.rope %bq, %bk, %bc, %bs : tensor<?x4x?x64xbf16>, tensor<?x2x?x64xbf16>, tensor<1x?x64xbf16>
    liger.yield %a, %b : tensor<?x4x?x64xbf16>, tensor<?x2x?x64xbf16>
  }
  return %r#0, %r#1 : tensor<?x4x?x64xbf16>, tensor<?x2x?x64xbf16>
}

// -----

// RMSNorm backward: dx per row, dW summed over all rows. Two kernels: the
// first loops over rows with the grid's stride, carrying the dW chunks in
// registers, and writes one f32 partial row per CTA into the workspace; the
// finishing kernel sums the partials of 32 features per CTA (32 warps, then
// shared memory) and rounds dW once.
// CHECK-LABEL: gpu.func @rms_norm_grad_rowwise_0(
//  CHECK-SAME:     %{{.+}}: memref<?x4096xbf16>, %{{.+}}: memref<?x4096xbf16>, %{{.+}}: memref<4096xbf16>, %{{.+}}: memref<?xf32>, %{{.+}}: memref<?x4096xbf16>, %[[DW:.+]]: memref<4096xbf16>, %[[WS:.+]]: memref<?x4096xf32>) kernel
//  CHECK-SAME:     liger.kernel_info = #liger.kernel_info<kernel_template = rowwise, ops = "liger.rms_norm_grad", grid = ["ctas", 1, 1]
//  CHECK-SAME:     #liger.kernel_param<name = "workspace0", role = workspace, kind = partials, dtype = f32, length = 4096>], finish = <name = "rms_norm_grad_rowwise_0_finish", grid = 128, threads = 1024, shared_memory_bytes = 4096>, ctas_per_sm = 4>
//       CHECK:     %[[CTA:.+]] = gpu.block_id  x
//       CHECK:     %[[ROWS:.+]] = memref.dim %{{.+}}, %c0
//       CHECK:     %[[STRIDE:.+]] = gpu.grid_dim  x
//       CHECK:     %[[ACC:.+]]:2 = scf.for %[[ROW:.+]] = %[[CTA]] to %[[ROWS]] step %[[STRIDE]] iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>)
//       CHECK:       gpu.barrier
//       CHECK:       vector.store %{{.+}}, %{{.+}}[%[[ROW]], %{{.+}}] {{.*}} : memref<?x4096xbf16>, vector<8xbf16>
//       CHECK:       scf.yield %{{.+}}, %{{.+}} : vector<8xf32>, vector<8xf32>
//       CHECK:     vector.store %[[ACC]]#0, %[[WS]][%[[CTA]], %{{.+}}] {alignment = 16 : i64} : memref<?x4096xf32>, vector<8xf32>
//       CHECK:     vector.store %[[ACC]]#1, %[[WS]][%[[CTA]], %{{.+}}]
//       CHECK:     gpu.return
// CHECK-LABEL: gpu.func @rms_norm_grad_rowwise_0_finish(
//  CHECK-SAME:     known_block_size = array<i32: 1024, 1, 1>
//   CHECK-NOT:     liger.kernel_info
//       CHECK:     %[[CTAS:.+]] = memref.dim %{{.+}}, %c0{{.*}} : memref<?x4096xf32>
//       CHECK:     scf.for %{{.+}} = %{{.+}} to %[[CTAS]] step %c32
//       CHECK:       memref.load {{.*}} : memref<?x4096xf32>
//       CHECK:     gpu.barrier
//       CHECK:     scf.if
//       CHECK:       arith.truncf %{{.+}} : f32 to bf16
//       CHECK:       memref.store %{{.+}}, %{{.+}}[%{{.+}}] : memref<4096xbf16>
func.func @rms_norm_grad(%dy: tensor<?x4096xbf16>, %x: tensor<?x4096xbf16>, %w: tensor<4096xbf16>, %r: tensor<?xf32>) -> (tensor<?x4096xbf16>, tensor<4096xbf16>) {
  %dx, %dw = liger.rms_norm_grad %dy, %x, %w, %r : tensor<?x4096xbf16>, tensor<4096xbf16>, tensor<?xf32>
  return %dx, %dw : tensor<?x4096xbf16>, tensor<4096xbf16>
}

// -----

// Near-miss of the above: a per-feature step after the weight gradient (here
// an add of another [H] input) runs in the finishing kernel; rows of rank 3
// are flattened; a 64-wide row takes one warp.
// CHECK-LABEL: gpu.func @grad_then_feature_add_rowwise_0(
//  CHECK-SAME:     known_block_size = array<i32: 32, 1, 1>
//  CHECK-SAME:     ops = "liger.rms_norm_grad, liger.add"
//  CHECK-SAME:     finish = <name = "grad_then_feature_add_rowwise_0_finish", grid = 2,
// CHECK-LABEL: gpu.func @grad_then_feature_add_rowwise_0_finish(
//  CHECK-SAME:     %[[W:[^:]+]]: memref<64xbf16>, %{{.+}}: memref<?xf32>, %{{.+}}: memref<?x64xbf16>, %[[OUT:[^:]+]]: memref<64xbf16>, %{{.+}}: memref<?x64xf32>)
//       CHECK:     scf.if
//       CHECK:       %[[DW:.+]] = arith.truncf %{{.+}} : f32 to bf16
//       CHECK:       %[[WV:.+]] = memref.load %[[W]][%[[COL:.+]]] : memref<64xbf16>
//       CHECK:       arith.extf %[[DW]]
//       CHECK:       arith.extf %[[WV]]
//       CHECK:       %[[SUM:.+]] = arith.truncf %{{.+}} : f32 to bf16
//       CHECK:       memref.store %[[SUM]], %[[OUT]][%[[COL]]] : memref<64xbf16>
func.func @grad_then_feature_add(%dy: tensor<2x?x64xbf16>, %x: tensor<2x?x64xbf16>, %w: tensor<64xbf16>, %r: tensor<2x?xf32>) -> (tensor<2x?x64xbf16>, tensor<64xbf16>) {
  %g:2 = liger.fusion rowwise(%dy, %x, %w, %r) : (tensor<2x?x64xbf16>, tensor<2x?x64xbf16>, tensor<64xbf16>, tensor<2x?xf32>) -> (tensor<2x?x64xbf16>, tensor<64xbf16>) {
  ^bb0(%a: tensor<2x?x64xbf16>, %b: tensor<2x?x64xbf16>, %c: tensor<64xbf16>, %d: tensor<2x?xf32>):
    %dx, %dw = liger.rms_norm_grad %a, %b, %c, %d : tensor<2x?x64xbf16>, tensor<64xbf16>, tensor<2x?xf32>
    %acc = liger.add %dw, %c : tensor<64xbf16>
    liger.yield %dx, %acc : tensor<2x?x64xbf16>, tensor<64xbf16>
  }
  return %g#0, %g#1 : tensor<2x?x64xbf16>, tensor<64xbf16>
}

// -----

// The chunks of x that the sum of squares loaded stay in registers for the
// normalization (reuse_loads, the default): two loads of x for two chunks,
// none after the reduction's shuffles. Near-miss: reuse_loads = false reads
// x again through the caches.
// CHECK-LABEL: gpu.func @reuse_rowwise_0(
//       CHECK:     vector.load %arg0
//       CHECK:     vector.load %arg0
//       CHECK:     gpu.shuffle
//   CHECK-NOT:     vector.load %arg0
//       CHECK:     vector.load %arg1
//   CHECK-NOT:     vector.load %arg0
//       CHECK:     gpu.return
// CHECK-LABEL: gpu.func @no_reuse_rowwise_0(
//       CHECK:     vector.load %arg0
//       CHECK:     vector.load %arg0
//       CHECK:     gpu.shuffle
//       CHECK:     vector.load %arg0
//       CHECK:     vector.load %arg0
//       CHECK:     gpu.return
func.func @reuse(%x: tensor<?x256xf32>, %w: tensor<256xf32>) -> tensor<?x256xf32> {
  %y = liger.fusion rowwise(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 32, vector_width = 4>} : (tensor<?x256xf32>, tensor<256xf32>) -> tensor<?x256xf32> {
  ^bb0(%a: tensor<?x256xf32>, %b: tensor<256xf32>):
    %n = liger.rms_norm %a, %b eps = 1.0e-6 : tensor<?x256xf32>, tensor<256xf32>
    liger.yield %n : tensor<?x256xf32>
  }
  return %y : tensor<?x256xf32>
}
func.func @no_reuse(%x: tensor<?x256xf32>, %w: tensor<256xf32>) -> tensor<?x256xf32> {
  %y = liger.fusion rowwise(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 32, vector_width = 4, reuse_loads = false>} : (tensor<?x256xf32>, tensor<256xf32>) -> tensor<?x256xf32> {
  ^bb0(%a: tensor<?x256xf32>, %b: tensor<256xf32>):
    %n = liger.rms_norm %a, %b eps = 1.0e-6 : tensor<?x256xf32>, tensor<256xf32>
    liger.yield %n : tensor<?x256xf32>
  }
  return %y : tensor<?x256xf32>
}

// -----

// LayerNorm's backward reads the statistics its forward saved; its two row
// sums (of g and of g x_hat) do not read each other and share one block
// reduction: two vector reductions, then the shuffles of both values side by
// side (five in the warp, three across the 8 warps), two barriers in all.
// CHECK-LABEL: gpu.func @layer_norm_grad_rowwise_0(
//  CHECK-SAME:     %{{.+}}: memref<?x4096xbf16>, %{{.+}}: memref<?x4096xbf16>, %{{.+}}: memref<4096xbf16>, %[[MEAN:.+]]: memref<?xf32>, %[[RSTD:.+]]: memref<?xf32>, %{{.+}}: memref<?x4096xbf16>,
//  CHECK-SAME:     shared_memory_bytes = 72
//       CHECK:     scf.for %[[ROW:.+]] = %{{.+}} to
//   CHECK-DAG:       memref.load %[[MEAN]][%[[ROW]]] : memref<?xf32>
//   CHECK-DAG:       memref.load %[[RSTD]][%[[ROW]]] : memref<?xf32>
//       CHECK:       %[[SUM1:.+]] = vector.reduction <add>
//       CHECK:       %[[SUM2:.+]] = vector.reduction <add>
//   CHECK-NOT:       gpu.barrier
//       CHECK:       gpu.shuffle  xor %[[SUM1]], %c16
//       CHECK:       gpu.shuffle  xor %[[SUM2]], %c16
// CHECK-COUNT-8:     gpu.shuffle  xor
//   CHECK-NOT:       gpu.shuffle
//       CHECK:       gpu.barrier
// CHECK-COUNT-6:     gpu.shuffle  xor
//   CHECK-NOT:       gpu.shuffle
//       CHECK:       gpu.barrier
//   CHECK-NOT:       gpu.barrier
//   CHECK-NOT:       gpu.shuffle
//       CHECK:       scf.yield
//       CHECK:     gpu.return
// CHECK-LABEL: gpu.func @layer_norm_grad_rowwise_0_finish(
func.func @layer_norm_grad(%dy: tensor<?x4096xbf16>, %x: tensor<?x4096xbf16>, %w: tensor<4096xbf16>, %m: tensor<?xf32>, %r: tensor<?xf32>) -> (tensor<?x4096xbf16>, tensor<4096xbf16>, tensor<4096xbf16>) {
  %dx, %dw, %db = liger.layer_norm_grad %dy, %x, %w, %m, %r : tensor<?x4096xbf16>, tensor<4096xbf16>, tensor<?xf32>
  return %dx, %dw, %db : tensor<?x4096xbf16>, tensor<4096xbf16>, tensor<4096xbf16>
}

// -----

// Near-miss: the forward's variance reads the mean, so each reduction keeps
// its own block step (the mean's barriers before the variance's shuffles);
// thread 0 stores the mean and rstd, the forward's statistics.
// CHECK-LABEL: gpu.func @layer_norm_stats_rowwise_0(
//  CHECK-SAME:     %{{.+}}: memref<?x4096xbf16>, %{{.+}}: memref<4096xbf16>, %{{.+}}: memref<4096xbf16>, %{{.+}}: memref<?x4096xbf16>, %[[MEAN:.+]]: memref<?xf32>, %[[RSTD:.+]]: memref<?xf32>)
//       CHECK:     vector.reduction <add>
// CHECK-COUNT-5:   gpu.shuffle  xor
//       CHECK:     gpu.barrier
// CHECK-COUNT-3:   gpu.shuffle  xor
//       CHECK:     gpu.barrier
//       CHECK:     memref.store %{{.+}}, %[[MEAN]][%{{.+}}] : memref<?xf32>
//       CHECK:     vector.reduction <add>
// CHECK-COUNT-5:   gpu.shuffle  xor
//       CHECK:     gpu.barrier
// CHECK-COUNT-3:   gpu.shuffle  xor
//       CHECK:     gpu.barrier
//       CHECK:     math.rsqrt
//       CHECK:     memref.store %{{.+}}, %[[RSTD]][%{{.+}}] : memref<?xf32>
//   CHECK-NOT:     gpu.barrier
//       CHECK:     gpu.return
func.func @layer_norm_stats(%x: tensor<?x4096xbf16>, %w: tensor<4096xbf16>, %b: tensor<4096xbf16>) -> (tensor<?x4096xbf16>, tensor<?xf32>, tensor<?xf32>) {
  %y, %m, %r = liger.layer_norm %x, %w, %b stats : tensor<?x4096xbf16>, tensor<4096xbf16>, tensor<4096xbf16>
  return %y, %m, %r : tensor<?x4096xbf16>, tensor<?xf32>, tensor<?xf32>
}

// -----

// The loop form (a row past the register budget): the reductions of a pass
// share its block step too. LayerNorm's backward over 262147 bf16 (one-
// element chunks) runs two passes over the row: the sums with dW and db,
// then dx; one pair of barriers.
// CHECK-LABEL: gpu.func @layer_norm_grad_long_rowwise_0(
//       CHECK:     scf.for %[[ROW:.+]] = %{{.+}} to
//       CHECK:       scf.for
//       CHECK:       %[[SUM1:.+]] = vector.reduction <add>
//       CHECK:       %[[SUM2:.+]] = vector.reduction <add>
//       CHECK:       gpu.shuffle  xor %[[SUM1]], %c16
//       CHECK:       gpu.shuffle  xor %[[SUM2]], %c16
//       CHECK:       gpu.barrier
//       CHECK:       gpu.barrier
//       CHECK:       scf.for
//   CHECK-NOT:       gpu.barrier
//       CHECK:     gpu.return
func.func @layer_norm_grad_long(%dy: tensor<?x262147xbf16>, %x: tensor<?x262147xbf16>, %w: tensor<262147xbf16>, %m: tensor<?xf32>, %r: tensor<?xf32>) -> (tensor<?x262147xbf16>, tensor<262147xbf16>, tensor<262147xbf16>) {
  %dx, %dw, %db = liger.layer_norm_grad %dy, %x, %w, %m, %r : tensor<?x262147xbf16>, tensor<262147xbf16>, tensor<?xf32>
  return %dx, %dw, %db : tensor<?x262147xbf16>, tensor<262147xbf16>, tensor<262147xbf16>
}
