// Cross-entropy and its gradient through their own template
// (CrossEntropyKernel.cpp): an online softmax streamed in 16-byte chunks
// (running max and rescaled sum, combined across warps with shuffles),
// the target's logit gathered, and with a reduced loss a grid of CTAs that
// loop over rows, write four partial sums each and a one-CTA finishing
// kernel. The gradient recomputes lse and writes every logit's gradient
// once, from a fixed grid of row-looping CTAs; a kernel with the SM to
// itself keeps what of the row fits in shared memory for its second pass.
// ptxas accepts every kernel without spills.
// REQUIRES: ptxas
// RUN: rm -rf %t.bundle
// RUN: liger-compile %s -o %t.bundle | FileCheck %s --check-prefix=OUT
// RUN: FileCheck %s --check-prefix=MANIFEST < %t.bundle/manifest.json
// RUN: FileCheck %s --check-prefix=PTX < %t.bundle/liger_kernels.sm_90a.ptx
// RUN: ptxas -arch=sm_90a -v %t.bundle/liger_kernels.sm_90a.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: liger-compile %s --emit=gpu -o - | FileCheck %s --check-prefix=GPU
// RUN: liger-compile %s --target=sm_80 --emit=ptx -o %t.sm80.ptx
// RUN: ptxas -arch=sm_80 -v %t.sm80.ptx -o %t.sm80.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: rm -rf %t.sm80 %t.sm86
// RUN: liger-compile %s --target=sm_80 -o %t.sm80 && FileCheck %s --check-prefix=SM80 < %t.sm80/manifest.json
// RUN: liger-compile %s --target=sm_86 -o %t.sm86 | FileCheck %s --check-prefix=OUT86
// RUN: FileCheck %s --check-prefix=SM86 < %t.sm86/manifest.json
// RUN: ptxas -arch=sm_86 -v %t.sm86/liger_kernels.sm_86.ptx -o %t.sm86.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// OUT: liger-compile: 7 kernels for sm_90a

// mean over bf16 logits: CTAs over rows, partials [ctas, 4], a finishing
// kernel writing the scalar loss (manifest keys are sorted).
// MANIFEST: "ctas_per_sm": 4,
// MANIFEST: "finish": {
// MANIFEST: "name": "ce_mean_rowwise_0_finish"
// MANIFEST: "grid": [
// MANIFEST-NEXT: "ctas",
// MANIFEST: "name": "ce_mean_rowwise_0",
// MANIFEST: "kind": "rows",
// MANIFEST: "shape": [
// MANIFEST-NEXT: "rows",
// MANIFEST-NEXT: 1000
// MANIFEST: "dtype": "i64",
// MANIFEST-NEXT: "kind": "row_scalars",
// MANIFEST: "dtype": "f32",
// MANIFEST-NEXT: "kind": "scalar",
// MANIFEST-NEXT: "name": "output0",
// MANIFEST: "kind": "partials",
// MANIFEST-NEXT: "name": "workspace0",
// MANIFEST-NEXT: "role": "workspace",
// MANIFEST-NEXT: "shape": [
// MANIFEST-NEXT: "ctas",
// MANIFEST-NEXT: 4
// MANIFEST: "template": "cross_entropy",
// reduction = none with every attribute: one CTA per row, per-token loss
// and z-loss, the class weights as a feature vector.
// MANIFEST: "grid": [
// MANIFEST-NEXT: "rows",
// MANIFEST: "name": "ce_none_rowwise_0",
// MANIFEST: "kind": "feature",
// MANIFEST: "kind": "row_scalars",
// MANIFEST-NEXT: "name": "output0",
// MANIFEST: "kind": "row_scalars",
// MANIFEST-NEXT: "name": "output1",
// The gradient: a fixed grid, the logits' gradient as rows.
// MANIFEST: "grid": [
// MANIFEST-NEXT: 1056,
// MANIFEST: "name": "ce_grad_rowwise_0",
// MANIFEST: "kind": "scalar",
// MANIFEST-NEXT: "name": "input2",
// MANIFEST: "kind": "rows",
// MANIFEST-NEXT: "name": "output0",

// The loss and its gradient (liger-fuse-cross-entropy-grad): one kernel
// over the rows and the finishing kernel of the mean.
// MANIFEST: "name": "ce_fused_rowwise_0_finish"
// MANIFEST: "name": "ce_fused_rowwise_0",
// MANIFEST-NEXT: "ops": "liger.cross_entropy, liger.cross_entropy_grad",
// MANIFEST: "kind": "scalar",
// MANIFEST-NEXT: "name": "input2",
// MANIFEST: "kind": "scalar",
// MANIFEST-NEXT: "name": "output0",
// MANIFEST: "kind": "rows",
// MANIFEST-NEXT: "name": "output1",
// MANIFEST: "kind": "partials",

// A pinned configuration (bench/cross_entropy.mlir's A/B): 1024 threads,
// one CTA per SM.
// MANIFEST: "block": [
// MANIFEST-NEXT: 1024,
// MANIFEST: "ctas_per_sm": 1,
// With the SM to itself, the kernel keeps each thread's first chunk of the
// row in shared memory between its passes (1000 columns: one per thread):
// the reduction area (1056 bytes for 32 warps), then 1024 x 16 bytes.
// MANIFEST: "dynamic_shared_memory_bytes": 17440,
// MANIFEST: "name": "ce_fused_pinned_rowwise_0",

// Llama-3's vocabulary, the default for a loss and its gradient over 250
// KiB rows (1024 threads, one CTA per SM): 14 of a thread's 16 chunks in
// shared memory, 1056 + 14 x 1024 x 16 = 230432 bytes (of sm_90a's 232448).
// MANIFEST: "block": [
// MANIFEST-NEXT: 1024,
// MANIFEST: "ctas_per_sm": 1,
// MANIFEST: "dynamic_shared_memory_bytes": 230432,
// MANIFEST: "name": "ce_fused_large_rowwise_0",
// The staging follows the target's shared memory per block: sm_80's 163
// KiB (compute capability 8.0 and 8.7) hold 10 chunks, 1056 + 10 x 1024 x
// 16 = 164896 bytes; sm_86's 99 KiB (8.6 and 8.9) hold 6, 99360 bytes.
// SM80: "dynamic_shared_memory_bytes": 164896,
// SM80-NEXT: "finish"
// SM80: "name": "ce_fused_large_rowwise_0",
// OUT86: liger-compile: 7 kernels for sm_86
// SM86: "arch": "sm_86",
// SM86: "dynamic_shared_memory_bytes": 99360,
// SM86-NEXT: "finish"
// SM86: "name": "ce_fused_large_rowwise_0",
// The same with reuse_loads = false: the reduction area alone.
// MANIFEST: "dynamic_shared_memory_bytes": 544,
// MANIFEST: "name": "ce_fused_large_reread_rowwise_0",

// GPU-LABEL: gpu.func @ce_mean_rowwise_0(
// GPU: scf.for {{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args
// GPU: scf.for
// GPU: vector.load {{.*}} : memref<?x1000xbf16>, vector<8xbf16>
// GPU: vector.reduction <maximumf>
// GPU: arith.maximumf
// GPU: math.exp
// GPU: gpu.shuffle xor
// GPU: gpu.barrier
// GPU: math.log
// GPU: memref.load {{.*}} : memref<?xi64>
// GPU-LABEL: gpu.func @ce_mean_rowwise_0_finish(
// GPU: memref.load {{.*}} : memref<?x4xf32>
// GPU: arith.divf
// GPU-LABEL: gpu.func @ce_none_rowwise_0(
// GPU: math.tanh {{.*}} : vector<4xf32>
// The gradient: exp as ex2.approx (fastmath afn: two instructions, not
// __nv_expf's ten; pass 1's exp(z - m) as exp2 of one fma); the target's
// logit read before the row's gradient is
// written (in place it is overwritten), every chunk's gradient a product
// with the row's scalars, no per-logit one-hot compare; then one scalar
// store, by the thread owning the target's chunk, adds the one-hot term.
// GPU-LABEL: gpu.func @ce_grad_rowwise_0(
// GPU: gpu.grid_dim x
// GPU: scf.for
// GPU: math.fma {{.*}} : vector<8xf32>
// GPU-NEXT: math.exp2 {{.*}} fastmath<afn> : vector<8xf32>
// GPU: %[[XT:.*]] = memref.load %arg0[%{{.*}}, %[[T:.*]]] : memref<?x128256xbf16>
// GPU-NEXT: %[[XF:.*]] = arith.extf %[[XT]] : bf16 to f32
// GPU-NOT: arith.cmpi eq, {{.*}} : vector<8xindex>
// GPU: math.tanh {{.*}} : vector<8xf32>
// GPU: math.exp {{.*}} fastmath<afn> : vector<8xf32>
// GPU: math.absf {{.*}} : vector<8xf32>
// GPU: arith.truncf {{.*}} : vector<8xf32> to vector<8xbf16>
// GPU: vector.store {{.*}} : memref<?x128256xbf16>, vector<8xbf16>
// GPU-NOT: arith.cmpi eq, {{.*}} : vector<8xindex>
// GPU: arith.cmpi eq, %thread_id_x
// GPU: scf.if
// GPU: arith.divf %[[XF]], {{.*}} : f32
// GPU: math.absf {{.*}} : f32
// GPU: arith.truncf {{.*}} : f32 to bf16
// GPU: memref.store {{.*}}, %arg3[%{{.*}}, %[[T]]] : memref<?x128256xbf16>
// GPU-LABEL: gpu.func @ce_fused_rowwise_0(
// GPU: vector.reduction <maximumf>
// GPU: math.log
// Every thread reads the target's logit for the loss, then a barrier: only
// past it may the thread owning that column write its gradient (over the
// logits, in place).
// GPU: memref.load %arg0[%{{.*}}, %{{.*}}] : memref<?x1000xbf16>
// GPU: gpu.barrier
// GPU-NOT: vector.store
// GPU: memref.load %arg0[%{{.*}}, %{{.*}}] : memref<?x1000xbf16>
// GPU: vector.store {{.*}} : memref<?x1000xbf16>, vector<8xbf16>
// GPU-LABEL: gpu.func @ce_fused_rowwise_0_finish(

// PTX: .visible .entry ce_mean_rowwise_0(
// PTX: shfl.sync.bfly.b32
// The gradient alone (a grid of 1056 CTAs, eight per SM) stages nothing:
// both passes read the logits from memory.
// PTX: .visible .entry ce_grad_rowwise_0(
// PTX-NOT: .shared.v4
// PTX: ld.global.v4.b32
// PTX-NOT: .shared.v4
// PTX: st.global.v4.b32
// PTX-NOT: .shared.v4
// PTX: .visible .entry ce_fused_rowwise_0(
// PTX-NOT: .shared.v4
// PTX: .visible .entry ce_fused_rowwise_0_finish(
// The first row's 14 staged chunks per thread go global -> shared by
// cp.async (at the thread's own columns, after the reduction area), one
// group; each row waits for its group, both passes read the staged chunks
// from shared memory (the rest from memory), and pass 2 copies the next
// row's chunks into the slots it has just read.
// PTX: .visible .entry ce_fused_large_rowwise_0(
// PTX: cp.async.cg.shared.global [%[[S:rd[0-9]+]]+1056], [%[[G:rd[0-9]+]]], 16;
// PTX-NEXT: cp.async.cg.shared.global [%[[S]]+17440], [%[[G]]+16384], 16;
// PTX-COUNT-12: cp.async.cg.shared.global
// PTX-NOT: cp.async.cg
// PTX: cp.async.commit_group;
// PTX-NOT: ld.shared.v4
// PTX: cp.async.wait_group 0;
// PTX: ld.shared.v4.b32
// PTX: st.global.v4.b32
// PTX: cp.async.cg.shared.global
// PTX: cp.async.commit_group;
// PTX: .visible .entry ce_fused_large_reread_rowwise_0(
// PTX-NOT: .shared.v4
// PTX: st.global.v4.b32
// PTX-NOT: .shared.v4
// PTX: .visible .entry

// PTXAS-NOT: {{[1-9][0-9]*}} bytes spill
// PTXAS: Compiling entry function 'ce_
// PTXAS-NOT: {{[1-9][0-9]*}} bytes spill

func.func @ce_mean(%x: tensor<?x1000xbf16>, %t: tensor<?xi64>) -> tensor<f32> {
  %l = liger.cross_entropy %x, %t : tensor<?x1000xbf16>, tensor<?xi64>
  return %l : tensor<f32>
}

func.func @ce_none(%x: tensor<?x32000xf32>, %t: tensor<?xi32>, %w: tensor<32000xf32>) -> (tensor<?xf32>, tensor<?xf32>) {
  %l, %z = liger.cross_entropy %x, %t weight(%w : tensor<32000xf32>) ignore_index = -1 label_smoothing = 0.1 reduction = none softcap = 30.0 lse_square_scale = 1.0e-4 z_loss : tensor<?x32000xf32>, tensor<?xi32>
  return %l, %z : tensor<?xf32>, tensor<?xf32>
}

func.func @ce_grad(%x: tensor<?x128256xbf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> tensor<?x128256xbf16> {
  %d = liger.cross_entropy_grad %x, %t, %g label_smoothing = 0.1 softcap = 30.0 lse_square_scale = 1.0e-4 : tensor<?x128256xbf16>, tensor<?xi64>, tensor<f32>
  return %d : tensor<?x128256xbf16>
}

func.func @ce_fused(%x: tensor<?x1000xbf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x1000xbf16>) {
  %l = liger.cross_entropy %x, %t : tensor<?x1000xbf16>, tensor<?xi64>
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x1000xbf16>, tensor<?xi64>, tensor<f32>
  return %l, %d : tensor<f32>, tensor<?x1000xbf16>
}

func.func @ce_fused_pinned(%x: tensor<?x1000xbf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x1000xbf16>) {
  %r:2 = liger.fusion rowwise(%x, %t, %g) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = cross_entropy, threads = 1024, vector_width = 8, ctas_per_sm = 1>} : (tensor<?x1000xbf16>, tensor<?xi64>, tensor<f32>) -> (tensor<f32>, tensor<?x1000xbf16>) {
  ^bb0(%a: tensor<?x1000xbf16>, %b: tensor<?xi64>, %c: tensor<f32>):
    %l = liger.cross_entropy %a, %b : tensor<?x1000xbf16>, tensor<?xi64>
    %d = liger.cross_entropy_grad %a, %b, %c : tensor<?x1000xbf16>, tensor<?xi64>, tensor<f32>
    liger.yield %l, %d : tensor<f32>, tensor<?x1000xbf16>
  }
  return %r#0, %r#1 : tensor<f32>, tensor<?x1000xbf16>
}

func.func @ce_fused_large(%x: tensor<?x128256xbf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x128256xbf16>) {
  %l = liger.cross_entropy %x, %t : tensor<?x128256xbf16>, tensor<?xi64>
  %d = liger.cross_entropy_grad %x, %t, %g : tensor<?x128256xbf16>, tensor<?xi64>, tensor<f32>
  return %l, %d : tensor<f32>, tensor<?x128256xbf16>
}

func.func @ce_fused_large_reread(%x: tensor<?x128256xbf16>, %t: tensor<?xi64>, %g: tensor<f32>) -> (tensor<f32>, tensor<?x128256xbf16>) {
  %r:2 = liger.fusion rowwise(%x, %t, %g) attributes {liger.kernel_config = #liger.kernel_config<kernel_template = cross_entropy, threads = 1024, vector_width = 8, reuse_loads = false, ctas_per_sm = 1>} : (tensor<?x128256xbf16>, tensor<?xi64>, tensor<f32>) -> (tensor<f32>, tensor<?x128256xbf16>) {
  ^bb0(%a: tensor<?x128256xbf16>, %b: tensor<?xi64>, %c: tensor<f32>):
    %l = liger.cross_entropy %a, %b : tensor<?x128256xbf16>, tensor<?xi64>
    %d = liger.cross_entropy_grad %a, %b, %c : tensor<?x128256xbf16>, tensor<?xi64>, tensor<f32>
    liger.yield %l, %d : tensor<f32>, tensor<?x128256xbf16>
  }
  return %r#0, %r#1 : tensor<f32>, tensor<?x128256xbf16>
}
