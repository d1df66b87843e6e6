// liger-compile on a group that reduces across rows (RMSNorm backward with
// its weight gradient): two kernels in the cubin, one manifest entry that
// names the finishing kernel and the workspace, ptxas accepting both for
// sm_90a and sm_80 without spills.
// REQUIRES: ptxas
// RUN: rm -rf %t.bundle
// RUN: liger-compile %s -o %t.bundle | FileCheck %s --check-prefix=OUT
// RUN: FileCheck %s --check-prefix=MANIFEST < %t.bundle/manifest.json
// RUN: FileCheck %s --check-prefix=PTX < %t.bundle/liger_kernels.sm_90a.ptx
// RUN: ptxas -arch=sm_90a -v %t.bundle/liger_kernels.sm_90a.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: liger-compile %s --target=sm_80 --emit=ptx -o %t.sm80.ptx
// RUN: ptxas -arch=sm_80 -v %t.sm80.ptx -o %t.sm80.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// OUT: liger-compile: 1 kernel for sm_90a in {{.*}}.bundle

// MANIFEST: "ctas_per_sm": 4,
// MANIFEST: "finish": {
// MANIFEST-NEXT: "block": [
// MANIFEST-NEXT: 1024,
// MANIFEST: "dynamic_shared_memory_bytes": 4096,
// MANIFEST-NEXT: "grid": [
// MANIFEST-NEXT: 160,
// MANIFEST: "name": "backward_rowwise_0_finish"
// MANIFEST: "grid": [
// MANIFEST-NEXT: "ctas",
// MANIFEST: "name": "backward_rowwise_0",
// MANIFEST: "name": "output1",
// MANIFEST-NEXT: "role": "output",
// MANIFEST-NEXT: "shape": [
// MANIFEST-NEXT: 5120
// MANIFEST-NEXT: ]
// MANIFEST: "dtype": "f32",
// MANIFEST-NEXT: "kind": "partials",
// MANIFEST-NEXT: "name": "workspace0",
// MANIFEST-NEXT: "role": "workspace",
// MANIFEST-NEXT: "shape": [
// MANIFEST-NEXT: "ctas",
// MANIFEST-NEXT: 5120

// PTX: .entry backward_rowwise_0(
// PTX: ld.global.v4.b32
// PTX: shfl.sync.bfly.b32
// PTX: bar.sync
// PTX: st.global.v4.b32
// PTX: .entry backward_rowwise_0_finish(
// PTX: ld.global.b32
// PTX: bar.sync
// PTX: st.global.b16

// PTXAS-NOT: {{[1-9][0-9]*}} bytes spill
// PTXAS: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// PTXAS: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
// No kernel after the last one matched spills either.
// PTXAS-NOT: {{[1-9][0-9]*}} bytes spill

func.func @backward(%dy: tensor<?x5120xbf16>, %x: tensor<?x5120xbf16>, %w: tensor<5120xbf16>, %r: tensor<?xf32>) -> (tensor<?x5120xbf16>, tensor<5120xbf16>) {
  %dx, %dw = liger.rms_norm_grad %dy, %x, %w, %r : tensor<?x5120xbf16>, tensor<5120xbf16>, tensor<?xf32>
  return %dx, %dw : tensor<?x5120xbf16>, tensor<5120xbf16>
}
