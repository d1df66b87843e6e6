// The bundle writer reads each kernel's liger.kernel_info into the kernel
// ABI's structs (lib/Target/GpuBinary.cpp, kernelSpecOf) and checks the
// manifest as the runtime will (verifyManifest) before it writes anything:
// a kernel the runtime would refuse is a diagnostic on it, and no bundle is
// written. Each case is a module whose gpu.module holds a hand-written
// kernel beside a group that names it.
// REQUIRES: ptxas
// RUN: rm -rf %t && split-file %s %t
// RUN: not liger-compile %t/template.mlir -o %t/template.bundle 2>&1 | FileCheck %s --check-prefix=TEMPLATE
// RUN: not liger-compile %t/ops.mlir -o %t/ops.bundle 2>&1 | FileCheck %s --check-prefix=OPS
// RUN: not liger-compile %t/grid.mlir -o %t/grid.bundle 2>&1 | FileCheck %s --check-prefix=GRID
// RUN: not liger-compile %t/param.mlir -o %t/param.bundle 2>&1 | FileCheck %s --check-prefix=PARAM
// RUN: not liger-compile %t/role.mlir -o %t/role.bundle 2>&1 | FileCheck %s --check-prefix=ROLE
// RUN: not liger-compile %t/kind.mlir -o %t/kind.bundle 2>&1 | FileCheck %s --check-prefix=KIND
// RUN: not liger-compile %t/dtype.mlir -o %t/dtype.bundle 2>&1 | FileCheck %s --check-prefix=DTYPE
// RUN: not liger-compile %t/map.mlir -o %t/map.bundle 2>&1 | FileCheck %s --check-prefix=MAP
// RUN: not liger-compile %t/orphan.mlir -o %t/orphan.bundle 2>&1 | FileCheck %s --check-prefix=ORPHAN
// RUN: not liger-compile %t/abi.mlir -o %t/abi.bundle 2>&1 | FileCheck %s --check-prefix=VERIFY
// RUN: not ls %t/abi.bundle

// TEMPLATE: error: liger.kernel_info: unknown template 'tiled'
// OPS: error: liger.kernel_info: no string 'ops'
// GRID: error: liger.kernel_info: unknown grid size 'cols'
// PARAM: error: liger.kernel_info: no integer 'heads'
// ROLE: error: liger.kernel_info: parameter 'input0' has an unknown role 'inout'
// KIND: error: liger.kernel_info: parameter 'input0' has an unknown kind 'cube'
// DTYPE: error: liger.kernel_info: parameter 'input0' has element type 'f64', which the kernel ABI does not carry (bf16, f16, f32, i32, i64)
// MAP: error: liger.kernel_info: a tensor map's swizzle is 96 bytes, not 32, 64 or 128
// ORPHAN: error: no fusion group names kernel @orphan (liger.kernel): its function is unknown
// VERIFY: error: the bundle's manifest breaks the kernel ABI: {{.+}}abi.bundle: modules[0].kernels[0]: a kernel has workspaces if and only if it has a 'finish' kernel

//--- template.mlir
func.func @f(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %y = liger.fusion rowwise(%x) attributes {liger.kernel = @liger_kernels::@k} : (tensor<?x64xf32>) -> tensor<?x64xf32> {
  ^bb0(%a: tensor<?x64xf32>):
    %s = liger.silu %a : tensor<?x64xf32>
    liger.yield %s : tensor<?x64xf32>
  }
  return %y : tensor<?x64xf32>
}
gpu.module @liger_kernels [#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k() kernel attributes {liger.kernel_info = {template = "tiled", ops = "liger.silu", threads = 256 : i64, shared_memory_bytes = 0 : i64, vector_width = 4 : i64, grid = "rows", params = []}} {
    gpu.return
  }
}
//--- ops.mlir
func.func @f(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %y = liger.fusion rowwise(%x) attributes {liger.kernel = @liger_kernels::@k} : (tensor<?x64xf32>) -> tensor<?x64xf32> {
  ^bb0(%a: tensor<?x64xf32>):
    %s = liger.silu %a : tensor<?x64xf32>
    liger.yield %s : tensor<?x64xf32>
  }
  return %y : tensor<?x64xf32>
}
gpu.module @liger_kernels [#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k() kernel attributes {liger.kernel_info = {template = "rowwise", threads = 256 : i64, shared_memory_bytes = 0 : i64, vector_width = 4 : i64, grid = "rows", params = []}} {
    gpu.return
  }
}
//--- grid.mlir
func.func @f(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %y = liger.fusion rowwise(%x) attributes {liger.kernel = @liger_kernels::@k} : (tensor<?x64xf32>) -> tensor<?x64xf32> {
  ^bb0(%a: tensor<?x64xf32>):
    %s = liger.silu %a : tensor<?x64xf32>
    liger.yield %s : tensor<?x64xf32>
  }
  return %y : tensor<?x64xf32>
}
gpu.module @liger_kernels [#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k() kernel attributes {liger.kernel_info = {template = "rowwise", ops = "liger.silu", threads = 256 : i64, shared_memory_bytes = 0 : i64, vector_width = 4 : i64, grid = ["cols", "1", "1"], params = []}} {
    gpu.return
  }
}
//--- param.mlir
func.func @f(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %y = liger.fusion rowwise(%x) attributes {liger.kernel = @liger_kernels::@k} : (tensor<?x64xf32>) -> tensor<?x64xf32> {
  ^bb0(%a: tensor<?x64xf32>):
    %s = liger.silu %a : tensor<?x64xf32>
    liger.yield %s : tensor<?x64xf32>
  }
  return %y : tensor<?x64xf32>
}
gpu.module @liger_kernels [#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k() kernel attributes {liger.kernel_info = {template = "rowwise", ops = "liger.silu", threads = 256 : i64, shared_memory_bytes = 0 : i64, vector_width = 4 : i64, grid = "rows", params = [{name = "input0", role = "input", kind = "rows", dtype = f32, length = 64 : i64}]}} {
    gpu.return
  }
}
//--- role.mlir
func.func @f(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %y = liger.fusion rowwise(%x) attributes {liger.kernel = @liger_kernels::@k} : (tensor<?x64xf32>) -> tensor<?x64xf32> {
  ^bb0(%a: tensor<?x64xf32>):
    %s = liger.silu %a : tensor<?x64xf32>
    liger.yield %s : tensor<?x64xf32>
  }
  return %y : tensor<?x64xf32>
}
gpu.module @liger_kernels [#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k() kernel attributes {liger.kernel_info = {template = "rowwise", ops = "liger.silu", threads = 256 : i64, shared_memory_bytes = 0 : i64, vector_width = 4 : i64, grid = "rows", params = [{name = "input0", role = "inout", kind = "rows", dtype = f32, length = 64 : i64, heads = 0 : i64}]}} {
    gpu.return
  }
}
//--- kind.mlir
func.func @f(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %y = liger.fusion rowwise(%x) attributes {liger.kernel = @liger_kernels::@k} : (tensor<?x64xf32>) -> tensor<?x64xf32> {
  ^bb0(%a: tensor<?x64xf32>):
    %s = liger.silu %a : tensor<?x64xf32>
    liger.yield %s : tensor<?x64xf32>
  }
  return %y : tensor<?x64xf32>
}
gpu.module @liger_kernels [#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k() kernel attributes {liger.kernel_info = {template = "rowwise", ops = "liger.silu", threads = 256 : i64, shared_memory_bytes = 0 : i64, vector_width = 4 : i64, grid = "rows", params = [{name = "input0", role = "input", kind = "cube", dtype = f32, length = 64 : i64, heads = 0 : i64}]}} {
    gpu.return
  }
}
//--- dtype.mlir
func.func @f(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %y = liger.fusion rowwise(%x) attributes {liger.kernel = @liger_kernels::@k} : (tensor<?x64xf32>) -> tensor<?x64xf32> {
  ^bb0(%a: tensor<?x64xf32>):
    %s = liger.silu %a : tensor<?x64xf32>
    liger.yield %s : tensor<?x64xf32>
  }
  return %y : tensor<?x64xf32>
}
gpu.module @liger_kernels [#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k() kernel attributes {liger.kernel_info = {template = "rowwise", ops = "liger.silu", threads = 256 : i64, shared_memory_bytes = 0 : i64, vector_width = 4 : i64, grid = "rows", params = [{name = "input0", role = "input", kind = "rows", dtype = f64, length = 64 : i64, heads = 0 : i64}]}} {
    gpu.return
  }
}
//--- map.mlir
func.func @f(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %y = liger.fusion rowwise(%x) attributes {liger.kernel = @liger_kernels::@k} : (tensor<?x64xf32>) -> tensor<?x64xf32> {
  ^bb0(%a: tensor<?x64xf32>):
    %s = liger.silu %a : tensor<?x64xf32>
    liger.yield %s : tensor<?x64xf32>
  }
  return %y : tensor<?x64xf32>
}
gpu.module @liger_kernels [#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx86">] {
  gpu.func @k() kernel attributes {liger.kernel_info = {template = "rowwise", ops = "liger.silu", threads = 256 : i64, shared_memory_bytes = 0 : i64, vector_width = 4 : i64, grid = "rows", params = [{name = "input0", role = "input", kind = "rows", dtype = f32, length = 64 : i64, heads = 0 : i64}], tensor_maps = [{param = 0 : i64, box = array<i64: 128, 64>, swizzle = 96 : i64}]}} {
    gpu.return
  }
}
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
  gpu.func @orphan() kernel attributes {liger.kernel_info = {template = "rowwise", ops = "liger.silu", threads = 256 : i64, shared_memory_bytes = 0 : i64, vector_width = 4 : i64, grid = "rows", params = []}} {
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
  gpu.func @k() kernel attributes {liger.kernel_info = {template = "rowwise", ops = "liger.silu", threads = 256 : i64, shared_memory_bytes = 0 : i64, vector_width = 4 : i64, grid = "rows", params = [{name = "input0", role = "input", kind = "rows", dtype = f32, length = 64 : i64, heads = 0 : i64}, {name = "workspace0", role = "workspace", kind = "partials", dtype = f32, length = 64 : i64, heads = 0 : i64}]}} {
    gpu.return
  }
}
