// liger-opt carries the upstream GPU path: a gpu.module lowers through NVVM
// to PTX for sm_90a (no ptxas needed for format=isa).
// RUN: liger-opt %s --convert-scf-to-cf --convert-gpu-to-nvvm --reconcile-unrealized-casts --gpu-module-to-binary="format=isa" | FileCheck %s

// CHECK: gpu.binary @kernels
// CHECK-SAME: .target sm_90a
// CHECK-SAME: mul.rn.f32
module attributes {gpu.container_module} {
  gpu.module @kernels [#nvvm.target<chip = "sm_90a", features = "+ptx86", O = 3>] {
    gpu.func @square(%a: memref<?xf32>, %n: index) kernel {
      %i = gpu.thread_id x
      %inb = arith.cmpi ult, %i, %n : index
      scf.if %inb {
        %x = memref.load %a[%i] : memref<?xf32>
        %y = arith.mulf %x, %x : f32
        memref.store %y, %a[%i] : memref<?xf32>
      }
      gpu.return
    }
  }
}
