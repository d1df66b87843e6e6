// The bundle writer turns each kernel's #liger.kernel_info into the kernel
// ABI's KernelSpec (lib/Target/GpuBinary.cpp; the attribute's own rules are
// test/Dialect/Liger/kernel-attrs-invalid.mlir) and checks the whole
// manifest as the runtime will (verifyManifest) before it writes anything:
// a kernel no group names, or a bundle the runtime would refuse, is a
// diagnostic, and no bundle is written. Each case is a module whose
// gpu.module holds a hand-written kernel beside a group that names it.
// REQUIRES: ptxas
// RUN: rm -rf %t && split-file %s %t
// RUN: not liger-compile %t/orphan.mlir -o %t/orphan.bundle 2>&1 | FileCheck %s --check-prefix=ORPHAN
// RUN: not liger-compile %t/abi.mlir -o %t/abi.bundle 2>&1 | FileCheck %s --check-prefix=VERIFY
// RUN: not ls %t/abi.bundle

// ORPHAN: error: no fusion group names kernel @orphan (liger.kernel): its function is unknown
// A finishing kernel named as a kernel of the bundle: each kernel alone is
// valid, the manifest is not.
// VERIFY: error: the bundle's manifest breaks the kernel ABI: {{.+}}abi.bundle: modules[0].kernels[0].finish: kernel name 'k' is also modules[0].kernels[0]'s

//--- orphan.mlir
func.func @f(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %y = liger.fusion rowwise(%x) attributes {liger.kernel = @liger_kernels::@k} : (tensor<?x64xf32>) -> tensor<?x64xf32> {
  ^bb0(%a: tensor<?x64xf32>):
    %s = liger.silu %a : tensor<?x64xf32>
    liger.yield %s : tensor<?x64xf32>
  }
  return %y : tensor<?x64xf32>
}
gpu.module @liger_kernels [#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k() kernel {
    gpu.return
  }
  gpu.func @orphan() kernel attributes {liger.kernel_info = #liger.kernel_info<kernel_template = rowwise, ops = "liger.silu", grid = ["rows", 1, 1], threads = 256, shared_memory_bytes = 0, vector_width = 4, params = [#liger.kernel_param<name = "input0", role = input, kind = rows, dtype = f32, length = 64>]>} {
    gpu.return
  }
}
//--- abi.mlir
func.func @f(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %y = liger.fusion rowwise(%x) attributes {liger.kernel = @liger_kernels::@k} : (tensor<?x64xf32>) -> tensor<?x64xf32> {
  ^bb0(%a: tensor<?x64xf32>):
    %s = liger.silu %a : tensor<?x64xf32>
    liger.yield %s : tensor<?x64xf32>
  }
  return %y : tensor<?x64xf32>
}
gpu.module @liger_kernels [#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k() kernel attributes {liger.kernel_info = #liger.kernel_info<kernel_template = rowwise, ops = "liger.silu", grid = ["ctas", 1, 1], threads = 256, shared_memory_bytes = 0, vector_width = 4, params = [#liger.kernel_param<name = "input0", role = input, kind = rows, dtype = f32, length = 64>, #liger.kernel_param<name = "workspace0", role = workspace, kind = partials, dtype = f32, length = 64>], finish = <name = "k", grid = 1, threads = 256, shared_memory_bytes = 0>, ctas_per_sm = 4>} {
    gpu.return
  }
}
