// RUN: liger-opt %s --liger-lower-to-gpu --split-input-file | FileCheck %s

// The loop form's staging: a row past the register budget that several
// passes read keeps the part of it that fits the CTA's share of shared
// memory (two CTAs an SM by default: (227 KiB + 1 KiB) / 2, less the 1 KiB
// each CTA reserves and the 1 KiB static section ptxas gives the kernel)
// after the passes' block-reduction areas. The first pass reading the row stores
// each chunk it loads there when the chunk lies in the staged part; the
// later passes read that part back from there (each thread its own chunks)
// and the rest from memory. Every other pass runs backwards over the row.
//
// A softmax over 128256 bf16 at 256 threads (pinned; the default is 512):
// an online (max, sum) pass, then the store.
// The reduction area takes 72 bytes, so the stage starts at 80 and holds
// 27 of each thread's 63 chunks: 27 x 256 x 8 = 55296 elements.
// CHECK-LABEL: gpu.func @softmax_rowwise_0(
//  CHECK-SAME:     shared_memory_bytes = 110672,
//  CHECK-SAME:     nvvm.minctasm = 2 : i32
//       CHECK:   %[[STAGE:.+]] = memref.view %{{.+}}[%c80][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<55296xbf16, #gpu.address_space<workgroup>>
//       CHECK:   scf.for %[[C0:.+]] = %[[START:.+]] to %{{.+}} step %c4096 iter_args({{.+}}) -> (f32, f32) {
//       CHECK:     %[[X0:.+]] = vector.load %arg0[%block_id_x, %[[C0]]] {alignment = 16 : i64} : memref<?x128256xbf16>, vector<8xbf16>
//       CHECK:     %[[IN0:.+]] = arith.cmpi ult, %[[C0]], %c55296
//  CHECK-NEXT:     scf.if %[[IN0]] {
//  CHECK-NEXT:       vector.store %[[X0]], %[[STAGE]][%[[C0]]] {alignment = 16 : i64} : memref<55296xbf16, #gpu.address_space<workgroup>>, vector<8xbf16>
//       CHECK:   gpu.barrier
// The second pass: its chunks from the last group down.
//       CHECK:   scf.for %[[IV:.+]] = %[[START2:.+]] to %{{.+}} step %c4096
//       CHECK:     %[[TWICE:.+]] = arith.muli %[[START2]], %c2
//       CHECK:     %[[LAST:.+]] = arith.addi %[[TWICE]], %c122880
//       CHECK:     %[[C1:.+]] = arith.subi %[[LAST]], %[[IV]]
//       CHECK:     %[[IN1:.+]] = arith.cmpi ult, %[[C1]], %c55296
//       CHECK:     scf.if %[[IN1]] -> (vector<8xbf16>) {
//  CHECK-NEXT:       vector.load %[[STAGE]][%[[C1]]]
//       CHECK:     } else {
//  CHECK-NEXT:       vector.load %arg0[%block_id_x, %[[C1]]]
//       CHECK:     vector.store %{{.+}}, %arg1[%block_id_x, %[[C1]]]
//       CHECK:   gpu.return
func.func @softmax(%x: tensor<?x128256xbf16>) -> tensor<?x128256xbf16> {
  %y = liger.fusion rowwise(%x) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 8>} : (tensor<?x128256xbf16>) -> tensor<?x128256xbf16> {
  ^bb0(%a: tensor<?x128256xbf16>):
    %s = liger.softmax %a : tensor<?x128256xbf16>
    liger.yield %s : tensor<?x128256xbf16>
  }
  return %y : tensor<?x128256xbf16>
}

// -----

// Pinned at one CTA an SM (512 threads): the share is 226 KiB (227 less
// the static section);
// of a thread's 32 chunks, 28 fit (28 x 512 x 8 = 114688 elements) after a
// 144-byte reduction area, and ptxas is bound to one CTA an SM.
// CHECK-LABEL: gpu.func @softmax_one_cta_rowwise_0(
//  CHECK-SAME:     shared_memory_bytes = 229520,
//  CHECK-SAME:     nvvm.minctasm = 1 : i32
//       CHECK:   memref.view %{{.+}}[%c144][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<114688xbf16, #gpu.address_space<workgroup>>
func.func @softmax_one_cta(%x: tensor<?x128256xbf16>) -> tensor<?x128256xbf16> {
  %y = liger.fusion rowwise(%x) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 8, ctas_per_sm = 1>} : (tensor<?x128256xbf16>) -> tensor<?x128256xbf16> {
  ^bb0(%a: tensor<?x128256xbf16>):
    %s = liger.softmax %a : tensor<?x128256xbf16>
    liger.yield %s : tensor<?x128256xbf16>
  }
  return %y : tensor<?x128256xbf16>
}

// -----

// Near-miss: reuse_loads = false stages nothing (the reduction area alone);
// the second pass still runs backwards.
// CHECK-LABEL: gpu.func @softmax_no_reuse_rowwise_0(
//  CHECK-SAME:     shared_memory_bytes = 72,
//   CHECK-NOT:   memref<{{[0-9]+}}xbf16, #gpu.address_space<workgroup>>
//       CHECK:   arith.subi
//   CHECK-NOT:   memref<{{[0-9]+}}xbf16, #gpu.address_space<workgroup>>
//       CHECK:   gpu.return
func.func @softmax_no_reuse(%x: tensor<?x128256xbf16>) -> tensor<?x128256xbf16> {
  %y = liger.fusion rowwise(%x) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 8, reuse_loads = false>} : (tensor<?x128256xbf16>) -> tensor<?x128256xbf16> {
  ^bb0(%a: tensor<?x128256xbf16>):
    %s = liger.softmax %a : tensor<?x128256xbf16>
    liger.yield %s : tensor<?x128256xbf16>
  }
  return %y : tensor<?x128256xbf16>
}

// -----

// Near-miss: a KL divergence per token reads each row once, in one pass:
// nothing staged, nothing backwards (at 256 threads, pinned).
// CHECK-LABEL: gpu.func @kl_one_pass_rowwise_0(
//  CHECK-SAME:     shared_memory_bytes = 36,
//   CHECK-NOT:   memref<{{[0-9]+}}xbf16, #gpu.address_space<workgroup>>
//   CHECK-NOT:   arith.subi %{{.+}}, %arg
//       CHECK:   gpu.return
func.func @kl_one_pass(%x: tensor<?x128256xbf16>, %t: tensor<?x128256xbf16>) -> tensor<?xf32> {
  %y = liger.fusion rowwise(%x, %t) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 8>} : (tensor<?x128256xbf16>, tensor<?x128256xbf16>) -> tensor<?xf32> {
  ^bb0(%a: tensor<?x128256xbf16>, %b: tensor<?x128256xbf16>):
    %l = liger.kl_div %a, %b reduction = batchmean per_token : tensor<?x128256xbf16>
    liger.yield %l : tensor<?xf32>
  }
  return %y : tensor<?xf32>
}
