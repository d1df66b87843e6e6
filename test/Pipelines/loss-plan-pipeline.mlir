// liger-loss-plan-pipeline fuses the lm_head loss and plans it as the GPU
// path does, the other fusions left out: the same IR as its two passes,
// its options reaching liger-plan-loss. The CPU reference of a planned loss
// (python/liger/reference.py) runs it.
// RUN: liger-opt %s --liger-loss-plan-pipeline="memory-budget=256000 dw-f32=true" > %t.pipeline.mlir
// RUN: liger-opt %s --liger-fuse-linear-cross-entropy --liger-plan-loss="memory-budget=256000 dw-f32=true" > %t.passes.mlir
// RUN: diff %t.pipeline.mlir %t.passes.mlir
// RUN: FileCheck %s < %t.pipeline.mlir
// RUN: liger-opt %s --liger-loss-plan-pipeline --dump-pass-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=DEFAULT
// RUN: liger-opt %s --liger-loss-plan-pipeline="memory-budget=256000 dw-f32=true" --dump-pass-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=OPTIONS

// The loss is planned in chunks; the add before the projection is not
// fused (liger-fuse-elementwise is not part of the pipeline).
// CHECK-LABEL: func.func @step
//       CHECK:   liger.add
//   CHECK-NOT:   liger.fusion rowwise
//       CHECK:   liger.fusion loss
//  CHECK-SAME:   liger.plan = {
// CHECK-LABEL: func.func @step_loss0_logits
// CHECK-LABEL: func.func @step_loss0_ce

// DEFAULT: builtin.module(
// DEFAULT-NEXT: liger-fuse-linear-cross-entropy{
// DEFAULT-NEXT: liger-plan-loss{dw-f32=false memory-budget=536870912}
// OPTIONS: liger-plan-loss{dw-f32=true memory-budget=256000}
func.func @step(%x: tensor<?x64xbf16>, %r: tensor<?x64xbf16>, %w: tensor<1000x64xbf16>, %t: tensor<?xi64>) -> tensor<f32> {
  %h = liger.add %x, %r : tensor<?x64xbf16>
  %logits = liger.linear %h, %w : tensor<?x64xbf16>, tensor<1000x64xbf16>
  %l = liger.cross_entropy %logits, %t : tensor<?x1000xbf16>, tensor<?xi64>
  return %l : tensor<f32>
}
