// RUN: liger-opt %s --liger-lower-to-gpu --split-input-file | FileCheck %s

// A pinned vector width that does not divide the row (GPT-2's 50257 bf16 in
// 16-byte chunks): each row is peeled. Row r's first chunk boundary is its
// head, (8 - r (50257 mod 8) mod 8) mod 8 elements in; its full chunks,
// 6281 of them (50248 elements, the same in every row), are 16-byte loads
// from there, staged by their offset from the head; its 9 other elements
// (the head, then those after the full chunks) are single elements, one a
// thread, after each pass's chunks, held in every lane of a chunk and
// summed from lane 0 only.
// CHECK-LABEL: gpu.func @softmax_peeled_rowwise_0(
//       CHECK:   %[[MIS:.+]] = arith.remui %{{.+}}, %c8 : index
//       CHECK:   %[[SUB:.+]] = arith.subi %c8, %[[MIS]] : index
//       CHECK:   %[[HEAD:.+]] = arith.remui %[[SUB]], %c8 : index
//       CHECK:   scf.for %[[OFF:.+]] = %{{.+}} to %{{.+}} step %c8192
//       CHECK:     %[[COL:.+]] = arith.addi %[[HEAD]], %[[OFF]] : index
//       CHECK:     vector.load %arg0[%block_id_x, %[[COL]]] {alignment = 16 : i64} : memref<?x50257xbf16>, vector<8xbf16>
//       CHECK:     vector.store %{{.+}}, %{{.+}}[%[[OFF]]] {alignment = 16 : i64} : memref<{{[0-9]+}}xbf16, #gpu.address_space<workgroup>>, vector<8xbf16>
//       CHECK:   arith.cmpi ult, %{{.+}}, %c50248 : index
// The single elements of the first pass (the max and the sum of exponentials).
//       CHECK:   %[[INHEAD:.+]] = arith.cmpi ult, %thread_id_x, %[[HEAD]] : index
//       CHECK:   %[[AFTER:.+]] = arith.addi %thread_id_x, %c50248 : index
//       CHECK:   %[[SCOL:.+]] = arith.select %[[INHEAD]], %thread_id_x, %[[AFTER]] : index
//       CHECK:   %[[MINE:.+]] = arith.cmpi ult, %thread_id_x, %c9 : index
//       CHECK:   scf.if %[[MINE]] -> (f32, f32) {
//       CHECK:     %[[LANE0:.+]] = arith.constant dense<[true, false, false, false, false, false, false, false]> : vector<8xi1>
//       CHECK:     memref.load %arg0[%block_id_x, %[[SCOL]]] : memref<?x50257xbf16>
//       CHECK:     arith.select %[[LANE0]], %{{.+}}, %{{.+}} : vector<8xi1>, vector<8xf32>
//       CHECK:     vector.reduction <add>
//       CHECK:   gpu.shuffle  xor
// The second pass stores its chunks, then its single elements one by one.
//       CHECK:   vector.store %{{.+}}, %arg1[%block_id_x, %{{.+}}] {alignment = 16 : i64} : memref<?x50257xbf16>, vector<8xbf16>
//       CHECK:   scf.if %{{.+}} {
//       CHECK:     memref.store %{{.+}}, %arg1[%block_id_x, %{{.+}}] : memref<?x50257xbf16>
//       CHECK:   gpu.return
func.func @softmax_peeled(%x: tensor<?x50257xbf16>) -> tensor<?x50257xbf16> {
  %y = liger.fusion rowwise(%x) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 8>} : (tensor<?x50257xbf16>) -> tensor<?x50257xbf16> {
  ^bb0(%a: tensor<?x50257xbf16>):
    %s = liger.softmax %a : tensor<?x50257xbf16>
    liger.yield %s : tensor<?x50257xbf16>
  }
  return %y : tensor<?x50257xbf16>
}

// -----

// A row shorter than a chunk and its head: single elements only.
// CHECK-LABEL: gpu.func @silu_seven_rowwise_0(
//   CHECK-NOT:   vector.load
//       CHECK:   arith.cmpi ult, %thread_id_x, %c7 : index
//       CHECK:   scf.if
//       CHECK:     memref.load %arg0[%block_id_x, %{{.+}}] : memref<?x7xbf16>
//       CHECK:     memref.store %{{.+}}, %arg1[%block_id_x, %{{.+}}] : memref<?x7xbf16>
//   CHECK-NOT:   vector.load
//       CHECK:   gpu.return
func.func @silu_seven(%x: tensor<?x7xbf16>) -> tensor<?x7xbf16> {
  %y = liger.fusion rowwise(%x) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 32, vector_width = 8>} : (tensor<?x7xbf16>) -> tensor<?x7xbf16> {
  ^bb0(%a: tensor<?x7xbf16>):
    %s = liger.silu %a : tensor<?x7xbf16>
    liger.yield %s : tensor<?x7xbf16>
  }
  return %y : tensor<?x7xbf16>
}

// -----

// Near-miss: a width that divides the row (50256) peels nothing, and the
// default configuration of an odd row keeps one-element chunks (the peeled
// form is pinned only).
// CHECK-LABEL: gpu.func @softmax_whole_chunks_rowwise_0(
//   CHECK-NOT:   arith.remui %{{.+}}, %c8
//   CHECK-NOT:   memref.load %arg0
//       CHECK:   gpu.return
// CHECK-LABEL: gpu.func @softmax_default_rowwise_0(
//  CHECK-SAME:   vector_width = 1
//   CHECK-NOT:   memref.load %arg0
//       CHECK:   gpu.return
func.func @softmax_whole_chunks(%x: tensor<?x50256xbf16>) -> tensor<?x50256xbf16> {
  %y = liger.fusion rowwise(%x) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 8>} : (tensor<?x50256xbf16>) -> tensor<?x50256xbf16> {
  ^bb0(%a: tensor<?x50256xbf16>):
    %s = liger.softmax %a : tensor<?x50256xbf16>
    liger.yield %s : tensor<?x50256xbf16>
  }
  return %y : tensor<?x50256xbf16>
}
func.func @softmax_default(%x: tensor<?x50257xbf16>) -> tensor<?x50257xbf16> {
  %y = liger.softmax %x : tensor<?x50257xbf16>
  return %y : tensor<?x50257xbf16>
}
