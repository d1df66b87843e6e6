// Real cubins of every kernel template pass the loader's checks, and what
// each records is what its manifest says: liger-bundle opens a bundle as
// the runtime does (the digest, the cubin's structure, each kernel against
// the manifest) and prints per kernel the arguments and block its cubin
// confirmed, with its shared memory (the manifest's dynamic, the cubin's
// static). This file's functions are the RoPE template's; the others come
// from test/Target. Then damaged copies of a bundle's cubin and manifests
// that lie about it, each opened in its own process: refused with a
// message, never a crash (test/Integration/gpu/damaged_bundles.py, which
// the GPU suite launches too).
// REQUIRES: ptxas
// RUN: rm -rf %t && mkdir -p %t
// RUN: liger-compile %s -o %t/rope
// RUN: liger-compile %S/../Target/liger-compile.mlir --no-matmul-kernels -o %t/rowwise
// RUN: liger-compile %S/../Target/liger-compile-backward.mlir -o %t/backward
// RUN: liger-compile %S/../Target/liger-compile-cross-entropy.mlir -o %t/ce
// RUN: liger-compile %S/../Target/liger-compile-wgmma.mlir -o %t/wgmma
// RUN: liger-compile %S/../Target/liger-compile-matmul.mlir --target=sm_80 -o %t/mma80
// RUN: liger-compile %S/Inputs/mma-sync-grads.mlir -o %t/mma-grads
// RUN: liger-bundle %t/rope %t/rowwise %t/backward %t/ce %t/wgmma %t/mma80 %t/mma-grads | FileCheck %s
// RUN: %python %liger_src_root/test/Integration/gpu/damaged_bundles.py %liger_obj_root/bin/liger-bundle %t/wgmma %t/damaged | FileCheck %s --check-prefix=DAMAGED
// RUN: %python %liger_src_root/test/Integration/gpu/damaged_bundles.py %liger_obj_root/bin/liger-bundle %t/backward %t/damaged | FileCheck %s --check-prefix=FINISH

// RoPE: [B, H, T, D] heads (11 words) and tables (9), no shared memory.
// CHECK-LABEL: rope: 2 kernels
// CHECK: rope_rowwise_0: 62 arguments, 496 bytes; block [256, 1, 1] (.reqntid); shared memory 0 dynamic + 0 static
// CHECK: rope_grad_rowwise_0: 62 arguments, 496 bytes; block [256, 1, 1] (.reqntid)

// Rowwise, sm_90a: ptxas gives each kernel 1 KiB of static shared memory.
// CHECK-LABEL: rowwise: 2 kernels
// CHECK: layer_rowwise_0: 33 arguments, 264 bytes; block [256, 1, 1] (.reqntid); shared memory 36 dynamic + 1024 static

// A weight gradient and its finishing kernel: the same arguments.
// CHECK-LABEL: backward: 1 kernel
// CHECK: backward_rowwise_0: 43 arguments, 344 bytes; block [256, 1, 1] (.reqntid); shared memory 36 dynamic + 1024 static
// CHECK: backward_rowwise_0_finish: 43 arguments, 344 bytes; block [1024, 1, 1] (.reqntid); shared memory 4096 dynamic + 1024 static

// Cross-entropy: blocks of 128, 256 and 1024 threads.
// CHECK-LABEL: ce: 7 kernels
// CHECK: ce_mean_rowwise_0: 22 arguments, 176 bytes; block [128, 1, 1] (.reqntid)
// CHECK: ce_mean_rowwise_0_finish: 22 arguments, 176 bytes; block [128, 1, 1] (.reqntid)
// CHECK: ce_fused_large_rowwise_0: 32 arguments, 256 bytes; block [1024, 1, 1] (.reqntid); shared memory 230432 dynamic + 1024 static

// wgmma with TMA: 21 memref words, then three 128-byte descriptors at
// 64-byte aligned places (560 bytes in the bank).
// CHECK-LABEL: wgmma: 7 kernels
// CHECK: proj_matmul_0: 24 arguments, 560 bytes; block [384, 1, 1] (.reqntid); shared memory 197632 dynamic + 1024 static
// CHECK: lora_matmul_0: 52 arguments, 1072 bytes; block [384, 1, 1] (.reqntid)
// (The LoRA dx: the forward's parameters, W read MN-major.)
// CHECK: lora_dx_matmul_0: 52 arguments, 1072 bytes; block [384, 1, 1] (.reqntid)

// mma.sync for sm_80: no tensor maps, no static shared memory.
// CHECK-LABEL: mma80: 6 kernels
// CHECK: liger_kernels.sm_80.cubin: sm_80, 6 kernels
// CHECK: proj_matmul_0: 21 arguments, 168 bytes; block [256, 1, 1] (.reqntid); shared memory 61440 dynamic + 0 static
// CHECK: half_matmul_0: 21 arguments, 168 bytes; block [128, 1, 1] (.reqntid)

// mma.sync gradient products take no tensor maps, and their manifests list
// none (they listed two: refused as "23 arguments of 424 bytes").
// CHECK-LABEL: mma-grads: 2 kernels
// CHECK: ms_dx_512_1000_matmul_0: 21 arguments, 168 bytes; block [256, 1, 1] (.reqntid)
// CHECK: ms_dw_1000_520_matmul_0: 21 arguments, 168 bytes; block [256, 1, 1] (.reqntid)

// Every damaged cubin is refused under the manifest's digest; with the
// digest rewritten to match, the structure checks refuse what they read,
// and a flip in a kernel's code passes (only the digest catches it).
// DAMAGED: damaged: 48 cases with the manifest's digest: 48 refused, 0 accepted, 0 crashed
// DAMAGED: damaged: 48 cases with a digest that matches: {{[1-9][0-9]*}} refused, {{[0-9]+}} accepted, 0 crashed
// DAMAGED: lie half-block: refused
// DAMAGED: lie one-parameter-more: refused
// DAMAGED: lie one-tensor-map-fewer: refused
// DAMAGED: lie other-arch: refused
// Not in the cubin (docs/Design/Kernel-ABI.md):
// DAMAGED: lie grid-too-small: accepted
// DAMAGED: lie no-shared-memory: accepted
// FINISH: damaged: 48 cases with the manifest's digest: 48 refused, 0 accepted, 0 crashed
// FINISH: lie finish-half-block: refused

func.func @rope(%q: tensor<?x32x?x128xbf16>, %k: tensor<?x8x?x128xbf16>, %c: tensor<1x?x128xbf16>, %s: tensor<1x?x128xbf16>) -> (tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>) {
  %a, %b = liger.rope %q, %k, %c, %s : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<1x?x128xbf16>
  return %a, %b : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>
}

func.func @rope_grad(%q: tensor<?x32x?x128xbf16>, %k: tensor<?x8x?x128xbf16>, %c: tensor<1x?x128xbf16>, %s: tensor<1x?x128xbf16>) -> (tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>) {
  %a, %b = liger.rope_grad %q, %k, %c, %s : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>, tensor<1x?x128xbf16>
  return %a, %b : tensor<?x32x?x128xbf16>, tensor<?x8x?x128xbf16>
}
