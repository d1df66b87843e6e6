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

// Near-miss: a width that divides the row (50256) peels nothing; the
// default configuration of an odd row that fits the register form (softmax
// over 1001 bf16) keeps the one-element chunks that divide it, unpeeled.
// The default over 50257 loops, and is peeled to 16-byte chunks.
// CHECK-LABEL: gpu.func @softmax_whole_chunks_rowwise_0(
//   CHECK-NOT:   arith.remui %{{.+}}, %c8
//   CHECK-NOT:   memref.load %arg0
//       CHECK:   gpu.return
// CHECK-LABEL: gpu.func @softmax_fits_registers_rowwise_0(
//  CHECK-SAME:   vector_width = 1
//   CHECK-NOT:   arith.remui %{{.+}}, %c8
//   CHECK-NOT:   memref.load %arg0
//       CHECK:   gpu.return
// CHECK-LABEL: gpu.func @softmax_default_rowwise_0(
//  CHECK-SAME:   vector_width = 8
//       CHECK:   arith.remui %{{.+}}, %c8 : index
//       CHECK:   memref.load %arg0
//       CHECK:   gpu.return
func.func @softmax_whole_chunks(%x: tensor<?x50256xbf16>) -> tensor<?x50256xbf16> {
  %y = liger.fusion rowwise(%x) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 8>} : (tensor<?x50256xbf16>) -> tensor<?x50256xbf16> {
  ^bb0(%a: tensor<?x50256xbf16>):
    %s = liger.softmax %a : tensor<?x50256xbf16>
    liger.yield %s : tensor<?x50256xbf16>
  }
  return %y : tensor<?x50256xbf16>
}
func.func @softmax_fits_registers(%x: tensor<?x1001xbf16>) -> tensor<?x1001xbf16> {
  %y = liger.softmax %x : tensor<?x1001xbf16>
  return %y : tensor<?x1001xbf16>
}
func.func @softmax_default(%x: tensor<?x50257xbf16>) -> tensor<?x50257xbf16> {
  %y = liger.softmax %x : tensor<?x50257xbf16>
  return %y : tensor<?x50257xbf16>
}

// -----

// A plain sum over a peeled row (softmax_grad's sum of y · dy over 15 f32
// in 4-wide chunks: 15 mod 4 = 3 in the head's product): a single element
// goes into the accumulator from lane 0 only (counted once, not W times).
// CHECK-LABEL: gpu.func @softmax_grad_fifteen_rowwise_0(
//       CHECK:   %[[M:.+]] = arith.muli %block_id_x, %c3 : index
//  CHECK-NEXT:   %[[MIS:.+]] = arith.remui %[[M]], %c4 : index
//       CHECK:   %[[ACC:.+]] = scf.if %{{.+}} -> (vector<4xf32>) {
//       CHECK:   scf.if %{{.+}} -> (vector<4xf32>) {
//       CHECK:     %[[LANE0:.+]] = arith.constant dense<[true, false, false, false]> : vector<4xi1>
//       CHECK:     arith.select %[[LANE0]], %{{.+}}, %[[ACC]] : vector<4xi1>, vector<4xf32>
//       CHECK:   vector.reduction <add>
func.func @softmax_grad_fifteen(%y: tensor<?x15xf32>, %dy: tensor<?x15xf32>) -> tensor<?x15xf32> {
  %r = liger.fusion rowwise(%y, %dy) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 32, vector_width = 4>} : (tensor<?x15xf32>, tensor<?x15xf32>) -> tensor<?x15xf32> {
  ^bb0(%a: tensor<?x15xf32>, %b: tensor<?x15xf32>):
    %g = liger.softmax_grad %a, %b : tensor<?x15xf32>
    liger.yield %g : tensor<?x15xf32>
  }
  return %r : tensor<?x15xf32>
}

// -----

// An output of the first pass read back by the second (silu's, which the
// softmax reads): a single element reads it at its own column.
// CHECK-LABEL: gpu.func @silu_then_softmax_rowwise_0(
//       CHECK:   %[[COL:.+]] = arith.select %{{.+}}, %thread_id_x, %{{.+}} : index
//       CHECK:   memref.load %arg0[%block_id_x, %[[COL]]] : memref<?x15xf32>
//       CHECK:   memref.store %{{.+}}, %arg1[%block_id_x, %[[COL]]] : memref<?x15xf32>
//       CHECK:   memref.load %arg1[%block_id_x, %[[COL]]] : memref<?x15xf32>
//       CHECK:   memref.store %{{.+}}, %arg2[%block_id_x, %[[COL]]] : memref<?x15xf32>
func.func @silu_then_softmax(%x: tensor<?x15xf32>) -> (tensor<?x15xf32>, tensor<?x15xf32>) {
  %r:2 = liger.fusion rowwise(%x) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 32, vector_width = 4>} : (tensor<?x15xf32>) -> (tensor<?x15xf32>, tensor<?x15xf32>) {
  ^bb0(%a: tensor<?x15xf32>):
    %s = liger.silu %a : tensor<?x15xf32>
    %m = liger.softmax %s : tensor<?x15xf32>
    liger.yield %s, %m : tensor<?x15xf32>, tensor<?x15xf32>
  }
  return %r#0, %r#1 : tensor<?x15xf32>, tensor<?x15xf32>
}
