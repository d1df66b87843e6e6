//===- Passes.td - liger conversion passes ------------------*- tablegen -*-===//
//
// Lowerings out of the liger dialect. Defs are kept in alphabetical order.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_CONVERSION_PASSES_TD
#define LIGER_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def LowerExpandShapePass : Pass<"liger-lower-expand-shape"> {
  let summary = "Lower a memref.expand_shape that splits one dynamic size into several";
  let description = [{
    Rewrites every `memref.expand_shape` with more than one dynamic size in
    a reassociation group (the flattened tokens `[B*T, H]` of a
    `tensor<?x64xf32>` split back into `[B, T, H]`) into the
    `memref.reinterpret_cast` of its source's base buffer that it is: the
    sizes are the op's `output_shape`; the innermost stride of a group is
    the source dimension's stride, each outer one the product of the
    stride and size inside it. Other expand_shapes are left alone.

    Why: upstream `expand-strided-metadata` (MLIR 22) assumes at most one
    dynamic size per group and passes a null size to
    `memref.reinterpret_cast` otherwise, a crash in `liger-cpu-pipeline`
    (llvm/llvm-project#186830, fixed upstream by #187844 for LLVM 23, which
    reads the sizes from `output_shape` as this pass does). The CPU
    pipeline runs this pass right before `expand-strided-metadata`.

    ```mlir
    %e = memref.expand_shape %y [[0, 1], [2]] output_shape [%b, %t, 64]
        : memref<?x64xf32> into memref<?x?x64xf32>
    // becomes
    %base, %offset, %sizes:2, %strides:2 = memref.extract_strided_metadata %y
    %s0 = affine.apply affine_map<()[s0] -> (s0 * 64)>()[%t]
    %e = memref.reinterpret_cast %base to offset: [0], sizes: [%b, %t, 64],
        strides: [%s0, 64, 1] : memref<f32> to memref<?x?x64xf32>
    ```
  }];
  let dependentDialects = [
    "::mlir::affine::AffineDialect",
    "::mlir::memref::MemRefDialect",
  ];
  let statistics = [
    Statistic<"numLowered", "lowered", "Number of expand_shape ops lowered">
  ];
}

def LowerToGPUPass : Pass<"liger-lower-to-gpu", "::mlir::ModuleOp"> {
  let summary = "Lower rowwise fusion groups to GPU kernels (one gpu.func per group)";
  let description = [{
    Outlines every rowwise `liger.fusion` group (and, with `wrap-ops`, every
    rowwise liger op outside a group, as a group of one) into a `gpu.func`
    of the `gpu.module @liger_kernels`, targeted at `chip`. One CTA computes
    one row: each thread holds `vector_width`-wide chunks of the row in
    registers, math is f32, reductions go through warp shuffles and one
    shared-memory step, loads and stores are 16-byte vectors where the width
    allows, and tail chunks are masked. The configuration comes from the
    group's `#liger.kernel_config` (its template, `threads`, `vector_width`,
    ...; liger-select-kernel-config) or is chosen as that pass would, and
    the template it names builds the kernel.

    The kernel computes the group's reference lowering (the body is lowered
    with liger-lower-to-linalg's patterns and each linalg.generic becomes a
    step of the row program), so it means exactly what the CPU oracle
    computes. The group stays in the function, marked with `liger.kernel`;
    the kernel carries `#liger.kernel_info` (the kernel ABI's record of it:
    parameters, launch shape, shared memory), which the bundle manifest is
    written from.

    An attention group (and, with `wrap-ops` on a target with wgmma and
    TMA, every `liger.attention` outside a group, as a group of one) is
    built by the attention template (docs/Design/GPU-Lowering.md); a group
    the template does not take is left with a warning naming the rule.
    Matmul groups (with `matmul-kernels`) are built by the matmul
    templates; one in a function marked `liger.chunk_rows` (a loss plan's
    chunk, liger-plan-loss) whose grid at that many rows is under two waves
    of 132 SMs also gets a narrow-tile variant (64-row tiles): an entry
    point `<kernel>_narrow` that its kernel_info's `narrow` records and the
    launcher runs where it fills the GPU better (docs/Design/Kernel-ABI.md,
    "Narrow variants"). Loss groups are left alone (liger-plan-loss plans
    them). Ops the row program does not support yet (RoPE and the
    cross-entropy family, which gather; cross-row reductions such as
    RMSNorm's weight gradient) are a diagnostic naming the group.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::func::FuncDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::tensor::TensorDialect",
    "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::NVVM::NVVMDialect",
    "::mlir::nvgpu::NVGPUDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect",
  ];
  let options = [
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_90a\"",
           "Target GPU: sm_90a (default) or sm_80">,
    Option<"features", "features", "std::string", /*default=*/"\"+ptx86\"",
           "PTX ISA version, as +ptxNN">,
    Option<"wrapOps", "wrap-ops", "bool", /*default=*/"true",
           "Also lower rowwise liger ops outside groups, each as its own kernel">,
    Option<"matmulKernels", "matmul-kernels", "bool", /*default=*/"false",
           "Lower matmul groups (projections with their epilogues, LoRA, "
           "the gate/up pair, gradients) with the wgmma (sm_90a) or "
           "mma.sync template; off here, on in liger-gpu-pipeline and "
           "liger-compile (their matmul-kernels options)">,
    Option<"matmulSchedule", "matmul-schedule", "std::string",
           /*default=*/"\"auto\"",
           "The schedule of a wgmma matmul group without a "
           "configuration (a lone op's): as liger-select-kernel-config's">,
    Option<"matmulConfigTable", "matmul-config-table", "std::string",
           /*default=*/"\"\"",
           "The measured configurations of matmul groups without one (a "
           "lone op's): as liger-select-kernel-config's">,
    ListOption<"spillFallbackKernels", "spill-fallback-kernels",
               "std::string",
               "Kernels to build at their group's liger.spill_fallback "
               "instead of its configuration (liger-compile names those "
               "ptxas spilled at the default)">,
  ];
  let statistics = [
    Statistic<"numKernels", "kernels", "Number of GPU kernels built">
  ];
}

def LowerToLinalgPass : Pass<"liger-lower-to-linalg"> {
  let summary = "Lower liger ops to linalg/tensor/arith/math: their reference semantics";
  let description = [{
    Rewrites every liger op (forward and backward) into `linalg.generic` ops
    on tensors, with `arith` and `math` in their bodies. The result is the
    exact meaning of each op, written once: the CPU pipeline
    (`liger-cpu-pipeline`) runs it as the numerical oracle that fusion and
    GPU kernels are checked against, and as a CPU fallback.

    Numerics follow the op documentation: inputs are extended to f32, every
    reduction and matrix product accumulates in f32, and results are rounded
    to the op's result type where the op says so (RMSNorm's casting modes
    round where Hugging Face's Llama and Gemma modules round). Reductions are
    written as plain sequential `linalg.generic` reductions; their order is
    the loop order, which is enough for an oracle compared with tolerances.
    `docs/Reference/Semantics.md` gives each op's formula.

    Example: `liger.silu` on `tensor<?x8xbf16>` becomes

    ```mlir
    %c0 = arith.constant 0 : index
    %dim = tensor.dim %x, %c0 : tensor<?x8xbf16>
    %init = tensor.empty(%dim) : tensor<?x8xbf16>
    %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
        ins(%x : tensor<?x8xbf16>) outs(%init : tensor<?x8xbf16>) {
      ^bb0(%in: bf16, %out: bf16):
        %f = arith.extf %in : bf16 to f32
        ... %f / (1 + exp(-%f)) ...
        %r = arith.truncf %s : f32 to bf16
        linalg.yield %r : bf16
    } -> tensor<?x8xbf16>
    ```

    Ops of other dialects are left alone. A liger op that has no lowering
    gets a diagnostic naming it and the pass fails; no liger op survives a
    successful run.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect",
    "::mlir::tensor::TensorDialect",
  ];
  let statistics = [
    Statistic<"numLoweredOps", "lowered-ops", "Number of liger ops lowered">
  ];
}

def SelectKernelConfigPass : Pass<"liger-select-kernel-config"> {
  let summary = "Choose the launch configuration of every rowwise and matmul group";
  let description = [{
    Writes `#liger.kernel_config` on every rowwise and matmul
    `liger.fusion` group that has none. Its template is chosen here, once:
    rope for a group of liger.rope or liger.rope_grad, cross_entropy for
    one of liger.cross_entropy or liger.cross_entropy_grad, rowwise for the
    other rowwise groups, matmul_wgmma (sm_90a) or matmul_mma_sync (sm_80)
    for a matmul group. A row template gets `threads` and `vector_width`:
    the widest vector of at most 16
    bytes that divides the row (one element for a row of odd length: every
    row must start on a chunk boundary), 256 threads per row (fewer for
    short rows). A row that does not fit the row program's register form at
    256 threads (64 unrolled chunks a thread, 128 held elements) gets 512
    or 1024 threads where that makes it fit, else 512 threads that loop
    over their chunks (256 for a program reducing across rows), and beside
    that default `liger.spill_fallback`: the same at 256 threads, which
    liger-compile compiles the group at where ptxas spills the kernel at
    512 (docs/Design/GPU-Lowering.md). A rowwise group's own
    `liger.spill_fallback` is kept and checked like a pinned configuration.
    liger-lower-to-gpu reads the attribute (and makes the
    same choice when it is absent), so a test or a user can pin a
    configuration by writing it; a group that already has one keeps it,
    and it is checked against the group's row by the same vector-width rule
    (checkRowVectorWidth). The choice of 256 threads was measured on an
    H200 (docs/benchmarks.md). A cross-entropy loss fused with its gradient over
    rows of 64 KiB or more (mean or sum) gets 1024 threads and
    `ctas_per_sm = 1` instead (measured 1.76 against 2.15 ms at 8192 x
    128256 bf16): with its CTAs per SM given, such a kernel keeps what of
    the row fits in its share of shared memory between its two passes,
    brought in by cp.async a row ahead (1.22 ms; `reuse_loads = false`
    turns that off: 1.49).

    A matmul group gets `threads`, `tile_m`, `tile_n`, `tile_k` and
    `stages` for the target `chip`: a
    128-byte (wgmma) or 64-byte K slice per stage; 128-row tiles (64 when the
    group's static row count is at most 64); 128-column tiles when every
    projection's width divides by 128, else 64, and 64 per projection for a
    gate/up pair; as many stages (2 to 5) as the target's shared memory
    holds next to one output tile. With `matmul-schedule=pingpong`, a wgmma
    group the schedule takes gets `schedule = pingpong` (persistent CTAs,
    two consumer sets taking turns) on a tile as tall and half as wide, up
    to 8 stages; with `matmul-schedule=persistent`, `schedule = persistent`
    (persistent CTAs, one consumer set, the data-parallel tile, its output
    through boxes beside the ring); `auto`, the default, is data-parallel (measured
    faster on an H200, docs/benchmarks.md). With `matmul-config-table=<file>`, a
    JSON table of configurations measured per shape (written by
    bench/matmul_config_sweep.py; the format is in
    docs/Design/GPU-Lowering.md, *Configuration tables*), a matmul group
    that one of its entries matches (target, body, dtype, K, widths, RMSNorm
    prologue, LoRA rank, accumulation, row bounds) takes the first such entry's tile,
    stages and schedule, checked against the target as a pinned one is: an
    entry that matches a group it does not fit is an error naming the entry.
    A malformed table (not JSON, an unknown field, a value out of range) is
    an error before any group is configured. A pinned matmul configuration is checked
    against the target (instruction shapes, shared memory) with a
    diagnostic, and a pinned template against the group's ops.

    ```mlir
    %y = liger.fusion rowwise(%x) : ... -> tensor<?x14336xbf16> { ... }
    // becomes
    %y = liger.fusion rowwise(%x) attributes {liger.kernel_config =
        #liger.kernel_config<kernel_template = rowwise, threads = 256,
        vector_width = 8>} : ... { ... }
    ```
  }];
  // The rowwise choice analyzes the group's reference lowering.
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::func::FuncDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect",
    "::mlir::tensor::TensorDialect",
  ];
  let options = [
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_90a\"",
           "The GPU target (sm_90a or sm_80)">,
    Option<"matmulSchedule", "matmul-schedule", "std::string",
           /*default=*/"\"auto\"",
           "The schedule of wgmma matmul groups: auto (the default rule), "
           "data-parallel, pingpong or persistent (where the group takes "
           "it)">,
    Option<"matmulConfigTable", "matmul-config-table", "std::string",
           /*default=*/"\"\"",
           "A JSON table of matmul configurations measured per shape "
           "(bench/matmul_config_sweep.py): a matmul group an entry matches "
           "takes its configuration; others the default rule's. Not with "
           "a matmul-schedule other than auto">
  ];
  let statistics = [
    Statistic<"numConfigured", "configured", "Number of groups configured">
  ];
}

#endif // LIGER_CONVERSION_PASSES_TD
