// liger-gpu-pipeline runs liger-compile's stages up to the gpu.module of
// kernels (canonicalize; fuse and plan the loss groups; choose each group's
// configuration and lower it): the same builders, so the same IR.
// RUN: liger-opt %s --liger-gpu-pipeline > %t.pipeline.mlir
// RUN: liger-compile %s --emit=gpu -o - | liger-opt > %t.compile.mlir
// RUN: diff %t.pipeline.mlir %t.compile.mlir
// RUN: FileCheck %s < %t.pipeline.mlir
// RUN: liger-opt %s --liger-gpu-pipeline=chip=sm_80 | FileCheck %s --check-prefix=SM80
// RUN: liger-opt %s --liger-gpu-pipeline=fuse=false | FileCheck %s --check-prefix=NOFUSE
// RUN: liger-opt %s --liger-gpu-pipeline="fuse=false matmul-kernels=false" | FileCheck %s --check-prefix=NONE
// RUN: liger-opt %s --liger-gpu-pipeline=report=true -o /dev/null | FileCheck %s --check-prefix=REPORT
// Every option reaches its pass, visible in the printed pipeline.
// RUN: liger-opt %s --liger-gpu-pipeline --dump-pass-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=DEFAULT
// RUN: liger-opt %s --liger-gpu-pipeline=matmul-kernels=false --dump-pass-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOMATMUL
// RUN: liger-opt %s --liger-gpu-pipeline="chip=sm_80 features=+ptx80 norm-prologue=true matmul-kernels=true matmul-schedule=pingpong loss-memory-budget=1048576 loss-dw-f32=true" --dump-pass-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=OPTIONS
// RUN: echo '{"version": 1, "entries": []}' > %t.json
// RUN: liger-opt %s --liger-gpu-pipeline="matmul-config-table=%t.json" --dump-pass-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=TABLE

// The projection becomes a wgmma kernel (a producer and two consumer
// warpgroups), the residual add + RMSNorm a rowwise one.
// CHECK-LABEL: func.func @layer
// CHECK: liger.fusion matmul
// CHECK-SAME: liger.kernel = @liger_kernels::@layer_matmul_0
// CHECK: liger.fusion rowwise
// CHECK-SAME: liger.kernel = @liger_kernels::@layer_rowwise_1
// CHECK: gpu.module @liger_kernels [#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx86">]
// CHECK: gpu.func @layer_matmul_0
// CHECK-SAME: known_block_size = array<i32: 384, 1, 1>
// CHECK: nvvm.wgmma.mma_async
// CHECK: gpu.func @layer_rowwise_1

// On sm_80 the projection is an mma.sync kernel of 8 warps.
// SM80: gpu.module @liger_kernels [#nvvm.target<O = 3, chip = "sm_80", features = "+ptx86">]
// SM80: gpu.func @layer_matmul_0
// SM80-SAME: known_block_size = array<i32: 256, 1, 1>
// SM80: nvvm.mma.sync

// Without fusion the add and the norm are a kernel each, and the projection
// alone is a matmul kernel (liger-lower-to-gpu wraps it); without matmul
// kernels too, the projection waits.
// NOFUSE-LABEL: func.func @layer
// NOFUSE: liger.fusion matmul
// NOFUSE-SAME: @layer_matmul_0
// NOFUSE-NEXT: ^bb0
// NOFUSE-NEXT: liger.linear
// NOFUSE: gpu.func @layer_matmul_0
// NOFUSE: gpu.func @layer_rowwise_1
// NOFUSE: gpu.func @layer_rowwise_2
// NONE-LABEL: func.func @layer
// NONE: liger.linear
// NONE-NOT: liger.fusion matmul
// NONE: gpu.func @layer_rowwise_0
// NONE: gpu.func @layer_rowwise_1

// REPORT: [liger-fuse-add-rms-norm] fused liger.add, liger.rms_norm into a rowwise group

// DEFAULT: builtin.module(
// DEFAULT-NEXT: canonicalize{
// DEFAULT-NEXT: liger-fuse-linear-cross-entropy{
// DEFAULT: liger-fuse-norm-linear{{{.*}} fold=false
// DEFAULT-NEXT: liger-fuse-elementwise{
// DEFAULT-NEXT: liger-plan-loss{dw-f32=false memory-budget=536870912}
// DEFAULT-NEXT: liger-fuse-cross-entropy-grad{
// DEFAULT-NEXT: liger-select-kernel-config{chip=sm_90a matmul-config-table= matmul-schedule=auto}
// DEFAULT-NEXT: liger-lower-to-gpu{chip=sm_90a features=+ptx86 matmul-config-table= matmul-kernels=true matmul-schedule=auto wrap-ops=true}
// DEFAULT-NEXT: )

// With matmul-kernels=false no loss group is planned and no matmul group
// lowered.
// NOMATMUL: liger-fuse-elementwise{
// NOMATMUL-NOT: liger-plan-loss
// NOMATMUL: liger-select-kernel-config{chip=sm_90a matmul-config-table= matmul-schedule=auto}
// NOMATMUL-NEXT: liger-lower-to-gpu{chip=sm_90a features=+ptx86 matmul-config-table= matmul-kernels=false matmul-schedule=auto wrap-ops=true}

// OPTIONS: liger-fuse-norm-linear{{{.*}} fold=true
// OPTIONS-NEXT: liger-fuse-elementwise{
// OPTIONS-NEXT: liger-plan-loss{dw-f32=true memory-budget=1048576}
// OPTIONS-NEXT: liger-fuse-cross-entropy-grad{
// OPTIONS-NEXT: liger-select-kernel-config{chip=sm_80 matmul-config-table= matmul-schedule=pingpong}
// OPTIONS-NEXT: liger-lower-to-gpu{chip=sm_80 features=+ptx80 matmul-config-table= matmul-kernels=true matmul-schedule=pingpong wrap-ops=true}

// TABLE: liger-select-kernel-config{chip=sm_90a matmul-config-table={{.+}}.json matmul-schedule=auto}
// TABLE-NEXT: liger-lower-to-gpu{chip=sm_90a features=+ptx86 matmul-config-table={{.+}}.json matmul-kernels=true

func.func @layer(%x: tensor<?x512xbf16>, %w: tensor<1024x512xbf16>, %r: tensor<?x1024xbf16>, %g: tensor<1024xbf16>) -> tensor<?x1024xbf16> {
  %y = liger.linear %x, %w : tensor<?x512xbf16>, tensor<1024x512xbf16>
  %s = liger.add %y, %r : tensor<?x1024xbf16>
  %n = liger.rms_norm %s, %g : tensor<?x1024xbf16>, tensor<1024xbf16>
  return %n : tensor<?x1024xbf16>
}
