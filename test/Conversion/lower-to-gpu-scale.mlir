// RUN: liger-opt %s --liger-lower-to-gpu --split-input-file | FileCheck %s

// A group that only scales rows (liger.scale of two group inputs) starts
// each row by reading its factor and comparing the output's buffer with
// the input's: written over its input with a factor of exactly 1, the row
// is skipped, no load and no store. A scalar factor is read once.
// CHECK-LABEL: gpu.func @scale_rowwise_0(
//  CHECK-SAME:     %[[IN:.+]]: memref<?x7xbf16>, %[[F:.+]]: memref<f32>, %[[OUT:.+]]: memref<?x7xbf16>)
//       CHECK:   %[[FACTOR:.+]] = memref.load %[[F]][] : memref<f32>
//       CHECK:   %[[ONE:.+]] = arith.cmpf oeq, %[[FACTOR]], %{{.+}} : f32
//       CHECK:   %[[PO:.+]] = memref.extract_aligned_pointer_as_index %[[OUT]]
//       CHECK:   %[[PI:.+]] = memref.extract_aligned_pointer_as_index %[[IN]]
//       CHECK:   %[[SAME:.+]] = arith.cmpi eq, %[[PI]], %[[PO]] : index
//       CHECK:   %[[SKIP:.+]] = arith.andi %[[ONE]], %[[SAME]] : i1
//       CHECK:   %[[WORK:.+]] = arith.xori %[[SKIP]], %true : i1
//       CHECK:   scf.if %[[WORK]] {
//       CHECK:     vector.load %[[IN]]
//       CHECK:     arith.mulf
//       CHECK:     vector.store %{{.+}}, %[[OUT]]
//       CHECK:   gpu.return
func.func @scale(%d: tensor<?x7xbf16>, %g: tensor<f32>) -> tensor<?x7xbf16> {
  %s = liger.scale %d, %g : tensor<?x7xbf16>, tensor<f32>
  return %s : tensor<?x7xbf16>
}

// -----

// One factor per row (GPT-2's 50257, a peeled loop): the row's own.
// CHECK-LABEL: gpu.func @scale_rows_rowwise_0(
//  CHECK-SAME:     %[[IN:.+]]: memref<?x50257xbf16>, %[[F:.+]]: memref<?xf32>, %[[OUT:.+]]: memref<?x50257xbf16>)
//       CHECK:   %[[FACTOR:.+]] = memref.load %[[F]][%block_id_x] : memref<?xf32>
//       CHECK:   arith.cmpf oeq, %[[FACTOR]]
//       CHECK:   memref.extract_aligned_pointer_as_index %[[OUT]]
//       CHECK:   scf.if
//       CHECK:     scf.for
//       CHECK:       vector.load %[[IN]]{{.*}} vector<8xbf16>
func.func @scale_rows(%d: tensor<?x50257xbf16>, %g: tensor<?xf32>) -> tensor<?x50257xbf16> {
  %s = liger.scale %d, %g : tensor<?x50257xbf16>, tensor<?xf32>
  return %s : tensor<?x50257xbf16>
}

// -----

// Near-misses: a scale of a value the group computes (its output is never
// its input's buffer), and a group with a second output beside the
// scale's, keep no guard.
// CHECK-LABEL: gpu.func @scale_of_silu_rowwise_0(
//   CHECK-NOT:   memref.extract_aligned_pointer_as_index
//       CHECK:   gpu.return
// CHECK-LABEL: gpu.func @scale_and_silu_rowwise_0(
//   CHECK-NOT:   memref.extract_aligned_pointer_as_index
//       CHECK:   gpu.return
func.func @scale_of_silu(%d: tensor<?x64xf32>, %g: tensor<f32>) -> tensor<?x64xf32> {
  %r = liger.fusion rowwise(%d, %g) : (tensor<?x64xf32>, tensor<f32>) -> tensor<?x64xf32> {
  ^bb0(%a: tensor<?x64xf32>, %b: tensor<f32>):
    %0 = liger.silu %a : tensor<?x64xf32>
    %1 = liger.scale %0, %b : tensor<?x64xf32>, tensor<f32>
    liger.yield %1 : tensor<?x64xf32>
  }
  return %r : tensor<?x64xf32>
}
func.func @scale_and_silu(%d: tensor<?x64xf32>, %g: tensor<f32>) -> (tensor<?x64xf32>, tensor<?x64xf32>) {
  %r:2 = liger.fusion rowwise(%d, %g) : (tensor<?x64xf32>, tensor<f32>) -> (tensor<?x64xf32>, tensor<?x64xf32>) {
  ^bb0(%a: tensor<?x64xf32>, %b: tensor<f32>):
    %0 = liger.scale %a, %b : tensor<?x64xf32>, tensor<f32>
    %1 = liger.silu %a : tensor<?x64xf32>
    liger.yield %0, %1 : tensor<?x64xf32>, tensor<?x64xf32>
  }
  return %r#0, %r#1 : tensor<?x64xf32>, tensor<?x64xf32>
}
