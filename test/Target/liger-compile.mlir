// liger-compile end to end: fusion, the rowwise kernels, PTX through LLVM
// NVPTX, the cubin through ptxas, and the bundle's manifest.
// REQUIRES: ptxas
// RUN: rm -rf %t.bundle %t.dump
// RUN: liger-compile %s -o %t.bundle --dump-dir=%t.dump --fusion-report --no-matmul-kernels | FileCheck %s --check-prefix=OUT
// RUN: rm -rf %t.default && liger-compile %s -o %t.default | FileCheck %s --check-prefix=DEFAULT
// RUN: rm -rf %t.false && liger-compile %s -o %t.false --matmul-kernels=false | FileCheck %s --check-prefix=FALSE
// RUN: rm -rf %t.f32 && liger-compile %S/Inputs/f32-projection.mlir -o %t.f32 2>&1 | FileCheck %s --check-prefix=TEMPLATE
// RUN: FileCheck %s --check-prefix=MANIFEST < %t.bundle/manifest.json
// RUN: FileCheck %s --check-prefix=PTX < %t.bundle/liger_kernels.sm_90a.ptx
// RUN: ptxas -arch=sm_90a -v %t.bundle/liger_kernels.sm_90a.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: liger-compile %s --target=sm_80 --emit=ptx -o %t.sm80.ptx
// RUN: ptxas -arch=sm_80 -v %t.sm80.ptx -o %t.sm80.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: not grep -n maxntid %t.bundle/liger_kernels.sm_90a.ptx %t.sm80.ptx
// RUN: ls %t.dump | FileCheck %s --check-prefix=DUMP
// RUN: not liger-compile %s --target=sm_90 -o %t.bad 2>&1 | FileCheck %s --check-prefix=BADTARGET
// RUN: not liger-compile %S/Inputs/lm-head-step.mlir --no-matmul-kernels -o %t.none 2>&1 | FileCheck %s --check-prefix=NOKERNEL
// RUN: not liger-compile %s --ptx-features=+ptx99 -o %t.bad 2>&1 | FileCheck %s --check-prefix=BADPTX

// OUT: [liger-fuse-add-rms-norm] fused liger.add, liger.rms_norm into a rowwise group
// OUT: [liger-fuse-elementwise] fused liger.silu, liger.mul into a rowwise group
// OUT: liger-compile: 2 kernels for sm_90a in {{.*}}.bundle (left out by --no-matmul-kernels: 1 liger.linear)

// By default the matmul templates compile the projection too.
// DEFAULT: liger-compile: 3 kernels for sm_90a in {{.*}}.default{{$}}
// --matmul-kernels=false says --no-matmul-kernels.
// FALSE: liger-compile: 2 kernels for sm_90a in {{.*}}.false (left out by --no-matmul-kernels: 1 liger.linear)
// A group the templates refuse is left with a warning, and counted apart
// from what has no template at all.
// TEMPLATE: warning: left for a later matmul template: wgmma takes bf16 or f16 inputs
// TEMPLATE: liger-compile: 1 kernel for sm_90a in {{.*}}.f32 (left by their templates, see the warnings: 1 matmul group)

// MANIFEST: "format": "liger-bundle",
// MANIFEST: "arch": "sm_90a",
// MANIFEST: "cubin": "liger_kernels.sm_90a.cubin",
// MANIFEST-NEXT: "cubin_sha256": "{{[0-9a-f]+}}",
// MANIFEST: "abi": "memref-descriptor",
// MANIFEST: "block": [
// MANIFEST-NEXT: 256,
// MANIFEST: "dynamic_shared_memory_bytes": 36,
// MANIFEST-NEXT: "function": "layer",
// MANIFEST: "name": "layer_rowwise_0",
// MANIFEST: "ops": "liger.add_rms_norm",
// MANIFEST: "dtype": "bf16",
// MANIFEST-NEXT: "kind": "rows",
// MANIFEST-NEXT: "name": "input0",
// MANIFEST-NEXT: "role": "input",
// MANIFEST-NEXT: "shape": [
// MANIFEST-NEXT: "rows",
// MANIFEST-NEXT: 4096
// MANIFEST: "name": "layer_rowwise_1",
// MANIFEST: "version": 3

// 16-byte vector loads, warp shuffles, barriers, and the dynamic shared
// memory buffer as an aligned extern (the upstream overlap fix).
// PTX: .extern .shared .align 1024 .b8 __dynamic_shmem__0[];
// PTX: .entry layer_rowwise_0(
// The block size the manifest gives is required (.reqntid: the driver
// refuses another), not only a maximum.
// PTX-NOT: .maxntid
// PTX: .reqntid 256, 1, 1
// PTX: ld.global.v4.b32
// PTX: shfl.sync.bfly.b32
// PTX: bar.sync
// PTX: st.global.v4.b32

// PTXAS-NOT: {{[1-9][0-9]*}} bytes spill
// PTXAS: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// No kernel after the last one matched spills either.
// PTXAS-NOT: {{[1-9][0-9]*}} bytes spill

// DUMP: 00-liger.mlir
// DUMP: 01-fused.mlir
// DUMP: 02-gpu.mlir
// DUMP: 03-llvm.mlir
// DUMP: liger_kernels.sm_90a.cubin
// DUMP: liger_kernels.sm_90a.ptx

// Nothing to compile with --no-matmul-kernels (the loss group needs the
// matmul templates, which plan it: Target/loss-plan-bundle.mlir): the tool
// says what waits for a template.
// NOKERNEL: liger-compile: no kernel to compile in {{.*}}lm-head-step.mlir (left out by --no-matmul-kernels: 1 loss group)

// BADTARGET: liger-compile: unsupported GPU target 'sm_90' (supported: sm_80, sm_86, sm_90a)
// BADPTX: liger-compile: PTX ISA version in '+ptx99' is outside what liger uses (+ptx70 to +ptx88)

func.func @layer(%h: tensor<?x4096xbf16>, %res: tensor<?x4096xbf16>, %g: tensor<4096xbf16>,
                 %w: tensor<4096x4096xbf16>, %a: tensor<?x4096xbf16>, %b: tensor<?x4096xbf16>)
    -> (tensor<?x4096xbf16>, tensor<?x4096xbf16>, tensor<?x4096xbf16>) {
  %s = liger.add %h, %res : tensor<?x4096xbf16>
  %n = liger.rms_norm %s, %g eps = 1.0e-5 : tensor<?x4096xbf16>, tensor<4096xbf16>
  %p = liger.linear %n, %w : tensor<?x4096xbf16>, tensor<4096x4096xbf16>
  %t = liger.silu %a : tensor<?x4096xbf16>
  %m = liger.mul %t, %b : tensor<?x4096xbf16>
  return %p, %s, %m : tensor<?x4096xbf16>, tensor<?x4096xbf16>, tensor<?x4096xbf16>
}
