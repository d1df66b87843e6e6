// RUN: liger-opt %s --liger-lower-to-gpu --split-input-file | FileCheck %s

// A row program pinned to a thread-block cluster (`cluster = K` in its
// kernel_config, sm_90): the grid is [rows, K] in clusters of 1 x K, and
// CTA y of row x (its rank in the cluster) takes the part of the row from
// y times ceil(H / (K W)) W columns, the last CTA the rest. Each CTA runs
// the loop form over its part, keeps the row inputs its later passes read
// again in shared memory, and combines each pass's block reductions across
// the cluster: thread 0 writes its CTA's values, the cluster meets
// (barrier.cluster arrive / wait), and every thread reads every CTA's
// values through distributed shared memory (mapa), in rank order. The
// cluster meets once more before the kernel returns, so that no CTA leaves
// while another may still read its values.
//
// Softmax over 50264 bf16 in a cluster of 4 at 256 threads: parts of 12568
// columns (1571 chunks), the last 12560 (1570): the groups of chunks every
// CTA has in full are unmasked, the last is masked to the CTA's part's end.
// The part is staged whole (7 chunks a thread, 14336 elements), so the
// second pass reads nothing from memory.
// CHECK-LABEL: gpu.func @ragged_rowwise_0(
//  CHECK-SAME:     grid = ["rows", 4, 1]
//  CHECK-SAME:     nvvm.cluster_dim = array<i32: 1, 4, 1>
//       CHECK:   %[[BASE:.+]] = arith.muli %block_id_y, %c12568
//       CHECK:   %[[REST:.+]] = arith.subi %c50264, %[[BASE]]
//       CHECK:   %[[END:.+]] = arith.minsi %{{.+}}, %[[REST]]
//       CHECK:   %[[STAGE:.+]] = memref.view %{{.+}}[%c80][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<14336xbf16, #gpu.address_space<workgroup>>
//       CHECK:   scf.for
//       CHECK:     %[[COL:.+]] = arith.addi %[[BASE]], %{{.+}}
//       CHECK:     vector.load %arg0[%block_id_x, %[[COL]]]
//       CHECK:     vector.store %{{.+}}, %[[STAGE]]
//       CHECK:   arith.cmpi ult, %{{.+}}, %[[END]]
//       CHECK:   gpu.barrier
//       CHECK:   %[[SLOTS:.+]] = memref.view %{{.+}}[%c72][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<2xf32, #gpu.address_space<workgroup>>
//       CHECK:   arith.cmpi eq, %thread_id_x, %c0
//       CHECK:   memref.store %{{.+}}, %[[SLOTS]]
//       CHECK:   nvvm.cluster.arrive
//  CHECK-NEXT:   nvvm.cluster.wait
//       CHECK:   nvvm.mapa %{{.+}}, %c0_i32 : !llvm.ptr<3> -> !llvm.ptr<7>
//       CHECK:   llvm.load %{{.+}} : !llvm.ptr<7> -> f32
//       CHECK:   nvvm.mapa %{{.+}}, %c1_i32
//       CHECK:   nvvm.mapa %{{.+}}, %c2_i32
//       CHECK:   nvvm.mapa %{{.+}}, %c3_i32
//   CHECK-NOT:   nvvm.mapa
//   CHECK-NOT:   vector.load %arg0
//       CHECK:   vector.store %{{.+}}, %arg1[%block_id_x, %{{.+}}]
//   CHECK-NOT:   vector.load %arg0
//       CHECK:   nvvm.cluster.arrive
//  CHECK-NEXT:   nvvm.cluster.wait
//  CHECK-NEXT:   gpu.return
func.func @ragged(%x: tensor<?x50264xbf16>) -> tensor<?x50264xbf16> {
  %y = liger.fusion rowwise(%x) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 8, cluster = 4>} : (tensor<?x50264xbf16>) -> tensor<?x50264xbf16> {
  ^bb0(%a: tensor<?x50264xbf16>):
    %s = liger.softmax %a : tensor<?x50264xbf16>
    liger.yield %s : tensor<?x50264xbf16>
  }
  return %y : tensor<?x50264xbf16>
}

// -----

// A row the register form would hold (RMSNorm over 4096) takes the loop
// form in a cluster of 2: each CTA 2048 columns. The weight is read at the
// row's columns (the CTA's part's), and the per-row rstd, the same in
// every CTA of the cluster, is stored by thread 0 of the first.
// CHECK-LABEL: gpu.func @rstd_rowwise_0(
//  CHECK-SAME:     grid = ["rows", 2, 1]
//  CHECK-SAME:     nvvm.cluster_dim = array<i32: 1, 2, 1>
//       CHECK:   %[[BASE:.+]] = arith.muli %block_id_y, %c2048
//       CHECK:   %[[LOCAL:.+]] = arith.muli %{{[0-9]+}}, %c8
//       CHECK:   %[[COL:.+]] = arith.addi %[[BASE]], %[[LOCAL]]
//       CHECK:   vector.load %arg0[%block_id_x, %[[COL]]]
//       CHECK:   vector.store %{{.+}}, %[[STAGE:.+]][%[[LOCAL]]]
//       CHECK:   %[[T0:.+]] = arith.cmpi eq, %thread_id_x, %c0
//       CHECK:   nvvm.mapa %{{.+}}, %c1_i32
//       CHECK:   %[[R0:.+]] = arith.cmpi eq, %block_id_y, %c0
//       CHECK:   %[[FIRST:.+]] = arith.andi %[[T0]], %[[R0]] : i1
//       CHECK:   scf.if %[[FIRST]] {
//  CHECK-NEXT:     memref.store %{{.+}}, %arg3[%block_id_x] : memref<?xf32>
//       CHECK:   vector.load %[[STAGE]][%[[LOCAL]]]
//       CHECK:   vector.load %arg1[%[[COL]]] {alignment = 16 : i64} : memref<4096xbf16>
//       CHECK:   vector.store %{{.+}}, %arg2[%block_id_x, %[[COL]]]
//       CHECK:   gpu.return
func.func @rstd(%x: tensor<?x4096xbf16>, %w: tensor<4096xbf16>) -> (tensor<?x4096xbf16>, tensor<?xf32>) {
  %y, %r = liger.fusion rowwise(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 8, cluster = 2>} : (tensor<?x4096xbf16>, tensor<4096xbf16>) -> (tensor<?x4096xbf16>, tensor<?xf32>) {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<4096xbf16>):
    %0, %1 = liger.rms_norm %a, %b eps = 1.0e-6 rstd : tensor<?x4096xbf16>, tensor<4096xbf16>
    liger.yield %0, %1 : tensor<?x4096xbf16>, tensor<?xf32>
  }
  return %y, %r : tensor<?x4096xbf16>, tensor<?xf32>
}

// -----

// Near-miss: the same RMSNorm without a cluster keeps the register form
// (no loop, no cluster, rstd stored by thread 0 alone).
// CHECK-LABEL: gpu.func @rstd_whole_rowwise_0(
//  CHECK-SAME:     grid = ["rows", 1, 1]
//   CHECK-NOT:     nvvm.cluster_dim
//   CHECK-NOT:   block_id  y
//   CHECK-NOT:   scf.for
//   CHECK-NOT:   nvvm.mapa
//       CHECK:   gpu.return
func.func @rstd_whole(%x: tensor<?x4096xbf16>, %w: tensor<4096xbf16>) -> (tensor<?x4096xbf16>, tensor<?xf32>) {
  %y, %r = liger.fusion rowwise(%x, %w) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 8>} : (tensor<?x4096xbf16>, tensor<4096xbf16>) -> (tensor<?x4096xbf16>, tensor<?xf32>) {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<4096xbf16>):
    %0, %1 = liger.rms_norm %a, %b eps = 1.0e-6 rstd : tensor<?x4096xbf16>, tensor<4096xbf16>
    liger.yield %0, %1 : tensor<?x4096xbf16>, tensor<?xf32>
  }
  return %y, %r : tensor<?x4096xbf16>, tensor<?xf32>
}

// -----

// The groups of chunks unmasked are those every CTA has in full: over 8184
// bf16 in a cluster of 2 at 256 threads (1023 chunks), the first CTA's part
// is 512 chunks, one group of 2 a thread, but the last's is 511, so no
// group is unmasked (no loop); the thread's second chunk is masked to the
// part's end.
// CHECK-LABEL: gpu.func @short_last_rowwise_0(
//       CHECK:   %[[BASE:.+]] = arith.muli %block_id_y, %c4096
//       CHECK:   %[[END:.+]] = arith.minsi
//   CHECK-NOT:   scf.for
//       CHECK:   arith.cmpi ult, %{{.+}}, %[[END]]
//   CHECK-NOT:   scf.for
//       CHECK:   gpu.return
func.func @short_last(%x: tensor<?x8184xbf16>) -> tensor<?x8184xbf16> {
  %y = liger.fusion rowwise(%x) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 8, cluster = 2>} : (tensor<?x8184xbf16>) -> tensor<?x8184xbf16> {
  ^bb0(%a: tensor<?x8184xbf16>):
    %s = liger.softmax %a : tensor<?x8184xbf16>
    liger.yield %s : tensor<?x8184xbf16>
  }
  return %y : tensor<?x8184xbf16>
}

// -----

// LayerNorm's forward reads its row in three passes, with a reduction
// after each of the first two (the mean, then the variance): each is
// combined across the cluster in slots of its own (at 68 and 140, after
// its block-reduction area), and the stage starts after both.
// CHECK-LABEL: gpu.func @layer_norm_rowwise_0(
//  CHECK-SAME:     nvvm.cluster_dim = array<i32: 1, 8, 1>
//       CHECK:   memref.view %{{.+}}[%c144][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<33280xf16, #gpu.address_space<workgroup>>
//       CHECK:   memref.view %{{.+}}[%c68][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<1xf32, #gpu.address_space<workgroup>>
//       CHECK:   nvvm.cluster.arrive
//       CHECK:   nvvm.mapa %{{.+}}, %c7_i32
//       CHECK:   memref.view %{{.+}}[%c140][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<1xf32, #gpu.address_space<workgroup>>
//       CHECK:   nvvm.cluster.arrive
//       CHECK:   nvvm.mapa %{{.+}}, %c7_i32
//       CHECK:   scf.for
//       CHECK:   nvvm.cluster.arrive
//  CHECK-NEXT:   nvvm.cluster.wait
//  CHECK-NEXT:   gpu.return
func.func @layer_norm(%x: tensor<?x262147xf16>, %w: tensor<262147xf16>, %b: tensor<262147xf16>) -> (tensor<?x262147xf16>, tensor<?xf32>, tensor<?xf32>) {
  %y:3 = liger.fusion rowwise(%x, %w, %b) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 1, cluster = 8>} : (tensor<?x262147xf16>, tensor<262147xf16>, tensor<262147xf16>) -> (tensor<?x262147xf16>, tensor<?xf32>, tensor<?xf32>) {
  ^bb0(%a: tensor<?x262147xf16>, %c: tensor<262147xf16>, %d: tensor<262147xf16>):
    %0, %1, %2 = liger.layer_norm %a, %c, %d eps = 1.0e-5 stats : tensor<?x262147xf16>, tensor<262147xf16>, tensor<262147xf16>
    liger.yield %0, %1, %2 : tensor<?x262147xf16>, tensor<?xf32>, tensor<?xf32>
  }
  return %y#0, %y#1, %y#2 : tensor<?x262147xf16>, tensor<?xf32>, tensor<?xf32>
}
