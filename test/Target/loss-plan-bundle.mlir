// REQUIRES: ptxas
// RUN: rm -rf %t.bundle
// RUN: liger-compile %s --target=sm_90a --loss-memory-budget=256000 -o %t.bundle | FileCheck %s --check-prefix=COMPILE
// RUN: FileCheck %s --check-prefix=MANIFEST < %t.bundle/manifest.json
// RUN: FileCheck %s --check-prefix=NARROW < %t.bundle/manifest.json
// RUN: liger-bundle %t.bundle | FileCheck %s --check-prefix=ENTRIES
// RUN: not liger-compile %s --loss-memory-budget=0 -o %t.bad 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not liger-compile %s --target=sm_90a --no-matmul-kernels -o %t.plain 2>&1 | FileCheck %s --check-prefix=PLAIN
// RUN: not liger-compile %s --no-matmul-kernels --loss-memory-budget=1000000 -o %t.nomatmul 2>&1 | FileCheck %s --check-prefix=NOMATMUL
// RUN: not liger-compile %s --no-matmul-kernels --loss-dw-f32 -o %t.nomatmul32 2>&1 | FileCheck %s --check-prefix=NOMATMUL32
// RUN: not liger-compile %s --no-fuse --loss-dw-f32 -o %t.nofuse32 2>&1 | FileCheck %s --check-prefix=NOFUSE32
// RUN: not liger-compile %s --matmul-kernels --no-matmul-kernels -o %t.both 2>&1 | FileCheck %s --check-prefix=BOTH
// RUN: rm -rf %t.f32 && liger-compile %s --target=sm_90a --loss-memory-budget=256000 --loss-dw-f32 -o %t.f32
// RUN: FileCheck %s --check-prefix=F32 < %t.f32/manifest.json

// A training step's loss, written as the two lm_head ops: liger-fuse puts
// them in one loss group, liger-plan-loss writes the chunk functions, and
// the bundle holds their five kernels and the plan that runs them.
// COMPILE: liger-compile: 5 kernels for sm_90a in {{.+}} (1 loss group planned as chunks of them)
// MANIFEST:      "plans": [
// MANIFEST:          "chunk_tokens": 128,
// MANIFEST-NEXT:     "class_weight": false,
// MANIFEST-NEXT:     "dw_f32": false,
// MANIFEST-NEXT:     "function": "step",
// MANIFEST-NEXT:     "ignore_index": -100,
// MANIFEST-NEXT:     "kernels": {
// MANIFEST-NEXT:       "ce": "step_loss0_ce_rowwise_0",
// MANIFEST-NEXT:       "dw": "step_loss0_dw_matmul_0",
// MANIFEST-NEXT:       "dw0": "step_loss0_dw0_matmul_0",
// MANIFEST-NEXT:       "dx": "step_loss0_dx_matmul_0",
// MANIFEST-NEXT:       "logits": "step_loss0_logits_matmul_0"
// MANIFEST-NEXT:     },
// MANIFEST-NEXT:     "kind": "fused_linear_cross_entropy",
// MANIFEST-NEXT:     "mean": true,
// MANIFEST-NEXT:     "memory_budget": 256000
// The chunk's dx (one CTA per 128 rows of 256 columns) carries its
// narrow-tile variant, an entry point of the same cubin.
// NARROW:      "name": "step_loss0_dx_matmul_0",
// NARROW:      "narrow": {
// NARROW-NEXT:   "block": [
// NARROW-NEXT:     256,
// NARROW:        "grid": [
// NARROW-NEXT:     1,
// NARROW-NEXT:     "rows/64",
// NARROW:        "name": "step_loss0_dx_matmul_0_narrow",
// NARROW-NEXT:   "tensor_maps": [
// ENTRIES: step_loss0_dx_matmul_0: 24 arguments, 560 bytes; block [384, 1, 1]
// ENTRIES-NEXT: step_loss0_dx_matmul_0_narrow: 24 arguments, 560 bytes; block [256, 1, 1] (.reqntid)
// BAD: liger-compile: --loss-memory-budget must be positive, got 0
// NOMATMUL: liger-compile: --loss-memory-budget plans loss groups, which --no-matmul-kernels leaves uncompiled
// NOMATMUL32: liger-compile: --loss-dw-f32 plans loss groups, which --no-matmul-kernels leaves uncompiled
// NOFUSE32: liger-compile: --loss-dw-f32 plans loss groups, which --no-fuse leaves uncompiled
// BOTH: liger-compile: --matmul-kernels and --no-matmul-kernels contradict each other (matmul groups compile by default)
// With --loss-dw-f32: four kernels, dW accumulated into f32 (no dw0).
// F32:      "dw_f32": true,
// F32:      "kernels": {
// F32-NEXT:   "ce": "step_loss0_ce_rowwise_0",
// F32-NEXT:   "dw": "step_loss0_dw_matmul_0",
// F32-NEXT:   "dx": "step_loss0_dx_matmul_0",
// Without the matmul templates the loss group waits, and says so.
// PLAIN: liger-compile: no kernel to compile in {{.+}} (left out by --no-matmul-kernels: 1 loss group)
func.func @step(%h: tensor<?x256xbf16>, %w: tensor<1000x256xbf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x256xbf16>, tensor<1000x256xbf16>) {
  %l = liger.fused_linear_cross_entropy %h, %w, %t label_smoothing = 0.1 : tensor<?x256xbf16>, tensor<1000x256xbf16>, tensor<?xi64>
  %dh, %dw = liger.fused_linear_cross_entropy_grad %h, %w, %t, %g label_smoothing = 0.1 : tensor<?x256xbf16>, tensor<1000x256xbf16>, tensor<?xi64>, tensor<f32>
  return %l, %dh, %dw : tensor<f32>, tensor<?x256xbf16>, tensor<1000x256xbf16>
}
