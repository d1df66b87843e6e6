// RUN: liger-opt %s --liger-lower-expand-shape --split-input-file | FileCheck %s

// The pass has no failure mode (an expand_shape either splits one dynamic
// size into several and is lowered, or is left alone), so it has no
// -invalid companion.

// The flattened tokens split back into batch and sequence: the sizes come
// from output_shape, the batch's stride is the sequence's size times 64.
//       CHECK: #[[T64:.+]] = affine_map<()[s0] -> (s0 * 64)>
// CHECK-LABEL: func.func @tokens_split_in_two
//  CHECK-SAME:   (%[[Y:.+]]: memref<?x64xf32>, %[[B:.+]]: index, %[[T:.+]]: index)
//       CHECK:   %[[BASE:.+]], %{{.+}}, %{{.+}}, %{{.+}} = memref.extract_strided_metadata %[[Y]]
//       CHECK:   %[[S0:.+]] = affine.apply #[[T64]]()[%[[T]]]
//       CHECK:   %[[E:.+]] = memref.reinterpret_cast %[[BASE]] to offset: [0], sizes: [%[[B]], %[[T]], 64], strides: [%[[S0]], 64, 1] : memref<f32> to memref<?x?x64xf32>
//   CHECK-NOT:   memref.expand_shape
//       CHECK:   return %[[E]]
func.func @tokens_split_in_two(%y: memref<?x64xf32>, %b: index, %t: index) -> memref<?x?x64xf32> {
  %e = memref.expand_shape %y [[0, 1], [2]] output_shape [%b, %t, 64] : memref<?x64xf32> into memref<?x?x64xf32>
  return %e : memref<?x?x64xf32>
}

// -----

// Two dynamic sizes around a static one in one group: strides from the
// inside out, 8, 8*T, 4*8*T, folded where they are static.
//   CHECK-DAG: #[[T8:.+]] = affine_map<()[s0] -> (s0 * 8)>
//   CHECK-DAG: #[[T32:.+]] = affine_map<()[s0] -> (s0 * 32)>
// CHECK-LABEL: func.func @mixed_group
//  CHECK-SAME:   (%[[Y:.+]]: memref<?x8xf32>, %[[B:.+]]: index, %[[T:.+]]: index)
//       CHECK:   %[[BASE:.+]], %{{.+}}, %{{.+}}, %{{.+}} = memref.extract_strided_metadata %[[Y]]
//   CHECK-DAG:   %[[S1:.+]] = affine.apply #[[T8]]()[%[[T]]]
//   CHECK-DAG:   %[[S0:.+]] = affine.apply #[[T32]]()[%[[T]]]
//       CHECK:   memref.reinterpret_cast %[[BASE]] to offset: [0], sizes: [%[[B]], 4, %[[T]], 8], strides: [%[[S0]], %[[S1]], 8, 1]
func.func @mixed_group(%y: memref<?x8xf32>, %b: index, %t: index) -> memref<?x4x?x8xf32> {
  %e = memref.expand_shape %y [[0, 1, 2], [3]] output_shape [%b, 4, %t, 8] : memref<?x8xf32> into memref<?x4x?x8xf32>
  return %e : memref<?x4x?x8xf32>
}

// -----

// A strided source (rows of 16 out of 32, at a dynamic offset): the
// sequence's stride is the source row's 32, not 16, and the offset carries
// over.
// CHECK-LABEL: func.func @strided_source
//  CHECK-SAME:   (%[[Y:.+]]: memref<?x16xf32, strided<[32, 1], offset: ?>>, %[[B:.+]]: index, %[[T:.+]]: index)
//       CHECK:   %[[BASE:.+]], %[[OFF:.+]], %{{.+}}, %{{.+}} = memref.extract_strided_metadata %[[Y]]
//       CHECK:   %[[S0:.+]] = affine.apply #{{.+}}()[%[[T]]]
//       CHECK:   memref.reinterpret_cast %[[BASE]] to offset: [%[[OFF]]], sizes: [%[[B]], %[[T]], 16], strides: [%[[S0]], 32, 1]
func.func @strided_source(%y: memref<?x16xf32, strided<[32, 1], offset: ?>>, %b: index, %t: index) -> memref<?x?x16xf32, strided<[?, 32, 1], offset: ?>> {
  %e = memref.expand_shape %y [[0, 1], [2]] output_shape [%b, %t, 16] : memref<?x16xf32, strided<[32, 1], offset: ?>> into memref<?x?x16xf32, strided<[?, 32, 1], offset: ?>>
  return %e : memref<?x?x16xf32, strided<[?, 32, 1], offset: ?>>
}

// -----

// Near-misses left to upstream: one dynamic size per group, and a static
// split.
// CHECK-LABEL: func.func @one_dynamic_size_per_group
//       CHECK:   memref.expand_shape %{{.+}} {{\[}}[0, 1], [2]] output_shape [%{{.+}}, 4, 64]
//       CHECK:   memref.expand_shape %{{.+}} {{\[}}[0], [1, 2]] output_shape [2, 4, 16]
//   CHECK-NOT:   memref.reinterpret_cast
func.func @one_dynamic_size_per_group(%y: memref<?x64xf32>, %z: memref<2x64xf32>, %b: index) -> (memref<?x4x64xf32>, memref<2x4x16xf32>) {
  %e = memref.expand_shape %y [[0, 1], [2]] output_shape [%b, 4, 64] : memref<?x64xf32> into memref<?x4x64xf32>
  %f = memref.expand_shape %z [[0], [1, 2]] output_shape [2, 4, 16] : memref<2x64xf32> into memref<2x4x16xf32>
  return %e, %f : memref<?x4x64xf32>, memref<2x4x16xf32>
}
