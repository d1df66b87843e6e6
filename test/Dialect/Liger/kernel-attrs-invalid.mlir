// RUN: liger-opt %s -split-input-file -verify-diagnostics

// The rules of #liger.kernel_config and #liger.kernel_info, each broken
// once; a kernel_info's rules are the runtime's own check of a manifest's
// kernel (verifyKernel), one case here standing for them all
// (test/Unit/Runtime/ManifestTest.cpp has one per rule).

// expected-error @+1 {{'tile_m' is not a tunable of the rowwise template}}
func.func @row_template_with_a_tile() attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 8, tile_m = 64>}

// -----

// expected-error @+1 {{'ctas_per_sm' is not a tunable of the rope template}}
func.func @ctas_per_sm_outside_the_row_templates() attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rope, ctas_per_sm = 1>}

// -----

// expected-error @+1 {{'threads' is not a tunable of the rope template}}
func.func @rope_with_threads() attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rope, threads = 256>}

// -----

// expected-error @+1 {{the cross_entropy template needs 'threads' and 'vector_width'}}
func.func @row_template_without_width() attributes {liger.kernel_config = #liger.kernel_config<kernel_template = cross_entropy, threads = 256>}

// -----

// expected-error @+1 {{'schedule' is not a tunable of the matmul_mma_sync template}}
func.func @schedule_on_mma_sync() attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_mma_sync, tile_m = 64, tile_n = 64, tile_k = 32, stages = 3, schedule = pingpong>}

// -----

// expected-error @+1 {{'schedule' is not a tunable of the matmul_mma_sync template}}
func.func @persistent_on_mma_sync() attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_mma_sync, tile_m = 64, tile_n = 64, tile_k = 32, stages = 3, schedule = persistent>}

// -----

// expected-error @+1 {{'schedule' is not a tunable of the rowwise template}}
func.func @schedule_on_rowwise() attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 8, schedule = data_parallel>}

// -----

// expected-error @+1 {{the matmul_mma_sync template needs 'tile_m', 'tile_n', 'tile_k' and 'stages'}}
func.func @matmul_without_stages() attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_mma_sync, tile_m = 64, tile_n = 64, tile_k = 32>}

// -----

// expected-error @+1 {{'threads' must be a multiple of 32 in [32, 1024], got 48}}
func.func @threads_not_warps() attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 48, vector_width = 4>}

// -----

// expected-error @+1 {{'ctas_per_sm' (4) CTAs of 1024 threads exceed the 2048 threads an SM holds}}
func.func @ctas_per_sm_past_the_threads_of_an_sm() attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 1024, vector_width = 8, ctas_per_sm = 4>}

// -----

// expected-error @+1 {{'ctas_per_sm' must be in [1, 64], got 0}}
func.func @ctas_per_sm_out_of_range() attributes {liger.kernel_config = #liger.kernel_config<kernel_template = cross_entropy, threads = 256, vector_width = 4, ctas_per_sm = 0>}

// -----

// expected-error @+1 {{the attention template needs 'tile_n' and 'stages'}}
func.func @attention_without_stages() attributes {liger.kernel_config = #liger.kernel_config<kernel_template = attention, tile_n = 128>}

// -----

// expected-error @+1 {{'threads' is not a tunable of the attention template}}
func.func @attention_with_threads() attributes {liger.kernel_config = #liger.kernel_config<kernel_template = attention, threads = 384, tile_n = 128, stages = 2>}

// -----

// expected-error @+1 {{'tile_k' is not a tunable of the attention template}}
func.func @attention_with_tile_k() attributes {liger.kernel_config = #liger.kernel_config<kernel_template = attention, tile_n = 128, tile_k = 64, stages = 2>}

// -----

// expected-error @+2 {{expected ::mlir::liger::KernelTemplate to be one of: rowwise, rope, cross_entropy, matmul_wgmma, matmul_mma_sync, attention}}
// expected-error @+1 {{failed to parse Liger_KernelConfigAttr parameter 'kernel_template' which is to be a `::mlir::liger::KernelTemplate`}}
func.func @unknown_template() attributes {liger.kernel_config = #liger.kernel_config<kernel_template = tiled, threads = 256, vector_width = 4>}

// -----

// expected-error @+1 {{'func.func' op expects 'liger.kernel_config' to be a #liger.kernel_config, got {threads = 256 : i64, vector_width = 8 : i64}}}
func.func @config_dictionary() attributes {liger.kernel_config = {threads = 256 : i64, vector_width = 8 : i64}}

// -----

// expected-error @+1 {{'func.func' op expects 'liger.kernel_info' to be a #liger.kernel_info, got {template = "rowwise"}}}
func.func @info_dictionary() attributes {liger.kernel_info = {template = "rowwise"}}

// -----

// expected-error @+1 {{liger.kernel_info: the grid has 3 entries, got 2}}
func.func @short_grid() attributes {liger.kernel_info = #liger.kernel_info<kernel_template = rowwise, ops = "liger.silu", grid = ["rows", 1], threads = 256, shared_memory_bytes = 0, vector_width = 4, params = [#liger.kernel_param<name = "input0", role = input, kind = rows, dtype = f32, length = 64>]>}

// -----

// expected-error @+1 {{liger.kernel_info: tensor_maps[0] names parameter #-1}}
func.func @negative_tensor_map_param() attributes {liger.kernel_info = #liger.kernel_info<kernel_template = matmul, ops = "liger.linear", grid = [1, "rows/128", 1], threads = 384, shared_memory_bytes = 0, vector_width = 8, params = [#liger.kernel_param<name = "input0", role = input, kind = rows, dtype = bf16, length = 64>], tensor_maps = [#liger.tensor_map<param = -1, box_rows = 128, box_cols = 64, swizzle = 128>]>}

// -----

// A workspace without a finishing kernel: the runtime's rule.
// expected-error @+1 {{liger.kernel_info: kernel: a kernel has a 'finish' kernel if and only if it has a 'partials' or 'heads' workspace}}
func.func @workspace_without_finish() attributes {liger.kernel_info = #liger.kernel_info<kernel_template = rowwise, ops = "liger.rms_norm_grad", grid = ["ctas", 1, 1], threads = 256, shared_memory_bytes = 0, vector_width = 4, params = [#liger.kernel_param<name = "input0", role = input, kind = rows, dtype = f32, length = 64>, #liger.kernel_param<name = "workspace0", role = workspace, kind = partials, dtype = f32, length = 64>]>}

// -----

// expected-error @+2 {{unknown kernel template 'tiled'}}
// expected-error @+1 {{failed to parse Liger_KernelInfoAttr parameter 'kernel_template' which is to be a `::liger::runtime::KernelTemplate`}}
func.func @unknown_abi_template() attributes {liger.kernel_info = #liger.kernel_info<kernel_template = tiled, ops = "liger.silu", grid = ["rows", 1, 1], threads = 256, shared_memory_bytes = 0, vector_width = 4, params = []>}

// -----

// expected-error @+2 {{unknown grid size "cols" (an integer, or "rows", "tokens", "ctas", "sms", "rows/N")}}
// expected-error @+1 {{failed to parse Liger_KernelInfoAttr parameter 'grid' which is to be a `::llvm::ArrayRef<::liger::runtime::GridDim>`}}
func.func @unknown_grid_size() attributes {liger.kernel_info = #liger.kernel_info<kernel_template = rowwise, ops = "liger.silu", grid = ["cols", 1, 1], threads = 256, shared_memory_bytes = 0, vector_width = 4, params = []>}

// -----

// expected-error @+2 {{unknown parameter role 'inout'}}
// expected-error @+1 {{failed to parse Liger_KernelParamAttr parameter 'role' which is to be a `::liger::runtime::ParamRole`}}
func.func @unknown_role() attributes {liger.kernel_info = #liger.kernel_param<name = "input0", role = inout, kind = rows, dtype = f32, length = 64>}

// -----

// expected-error @+2 {{unknown parameter kind 'cube'}}
// expected-error @+1 {{failed to parse Liger_KernelParamAttr parameter 'kind' which is to be a `::liger::runtime::ParamKind`}}
func.func @unknown_kind() attributes {liger.kernel_info = #liger.kernel_param<name = "input0", role = input, kind = cube, dtype = f32, length = 64>}

// -----

// expected-error @+2 {{element type 'f64' is not one the kernel ABI carries (bf16, f16, f32, i32, i64)}}
// expected-error @+1 {{failed to parse Liger_KernelParamAttr parameter 'dtype' which is to be a `::liger::runtime::DType`}}
func.func @dtype_outside_the_abi() attributes {liger.kernel_info = #liger.kernel_param<name = "input0", role = input, kind = rows, dtype = f64, length = 64>}

// -----

// expected-error @+2 {{a tensor map's swizzle is 96 bytes, not 32, 64 or 128}}
// expected-error @+1 {{failed to parse Liger_TensorMapAttr parameter 'swizzle' which is to be a `::liger::runtime::TensorMapSwizzle`}}
func.func @swizzle_of_96_bytes() attributes {liger.note = #liger.tensor_map<param = 0, box_rows = 128, box_cols = 64, swizzle = 96>}

// -----

// A preparing kernel without workspaces (it has nothing to prepare): the
// runtime's rule.
// expected-error @+1 {{liger.kernel_info: kernel: a 'prepare' kernel is for a kernel with a 'finish' kernel}}
func.func @prepare_without_workspace() attributes {liger.kernel_info = #liger.kernel_info<kernel_template = rowwise, ops = "liger.silu", grid = ["rows", 1, 1], threads = 256, shared_memory_bytes = 0, vector_width = 4, params = [#liger.kernel_param<name = "input0", role = input, kind = rows, dtype = f32, length = 64>, #liger.kernel_param<name = "output0", role = output, kind = rows, dtype = f32, length = 64>], prepare = #liger.side_kernel<name = "k_prepare", grid = 1, threads = 256, shared_memory_bytes = 0>>}

// -----

// A preparing kernel with a grid of no CTAs.
// expected-error @+1 {{liger.kernel_info: kernel.prepare: grid must be [n, 1, 1] with n in [1, 2^31), got n = 0}}
func.func @prepare_empty_grid() attributes {liger.kernel_info = #liger.kernel_info<kernel_template = attention, ops = "liger.attention_grad", grid = ["sms", 1, 1], threads = 384, shared_memory_bytes = 0, vector_width = 8, params = [#liger.kernel_param<name = "input0", role = input, kind = heads, dtype = bf16, length = 64, outer = 4>, #liger.kernel_param<name = "workspace0", role = workspace, kind = heads, dtype = f32, length = 64, outer = 4>], prepare = #liger.side_kernel<name = "k_prepare", grid = 0, threads = 256, shared_memory_bytes = 0>, finish = #liger.side_kernel<name = "k_finish", grid = 1, threads = 256, shared_memory_bytes = 0>, ctas_per_sm = 1>}

// -----

// expected-error @+1 {{'cluster' is not a tunable of the matmul_mma_sync template}}
func.func @cluster_on_mma_sync() attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_mma_sync, tile_m = 64, tile_n = 64, tile_k = 32, stages = 3, cluster = 2>}

// -----

// expected-error @+1 {{'cluster' must be 1 or 2, got 4}}
func.func @cluster_of_four() attributes {liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 128, tile_n = 256, tile_k = 64, stages = 4, cluster = 4>}

// -----

// A row program's cluster splits its rows among at most the 8 CTAs of a
// portable cluster, a power of two of them.
// expected-error @+1 {{'cluster' of the rowwise template must be 1, 2, 4 or 8, got 3}}
func.func @row_cluster_of_three() attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 8, cluster = 3>}

// -----

// expected-error @+1 {{'cluster' of the rowwise template must be 1, 2, 4 or 8, got 16}}
func.func @row_cluster_of_sixteen() attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 8, cluster = 16>}

// -----

// expected-error @+1 {{'cluster' of the rowwise template must be 1, 2, 4 or 8, got 0}}
func.func @row_cluster_of_none() attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 8, cluster = 0>}

// -----

// The RoPE template takes no tunables, a cluster neither.
// expected-error @+1 {{'cluster' is not a tunable of the rope template}}
func.func @cluster_on_rope() attributes {liger.kernel_config = #liger.kernel_config<kernel_template = rope, cluster = 2>}

// -----

// The cross-entropy template takes no cluster.
// expected-error @+1 {{'cluster' is not a tunable of the cross_entropy template}}
func.func @cluster_on_cross_entropy() attributes {liger.kernel_config = #liger.kernel_config<kernel_template = cross_entropy, threads = 1024, vector_width = 8, cluster = 2>}

// -----

// A narrow-tile variant is a matmul kernel's.
// expected-error @+1 {{liger.kernel_info: kernel.narrow: a narrow variant is for a matmul kernel, not a rowwise kernel}}
func.func @narrow_rowwise() attributes {liger.kernel_info = #liger.kernel_info<kernel_template = rowwise, ops = "liger.silu", grid = ["rows", 1, 1], threads = 256, shared_memory_bytes = 0, vector_width = 8, params = [#liger.kernel_param<name = "input0", role = input, kind = rows, dtype = bf16, length = 64>, #liger.kernel_param<name = "output0", role = output, kind = rows, dtype = bf16, length = 64>], narrow = <name = "n", grid = ["rows/64", 1, 1], threads = 256, shared_memory_bytes = 0>>}

// -----

// expected-error @+1 {{liger.kernel_info: the narrow variant's grid has 3 entries, got 2}}
func.func @narrow_grid() attributes {liger.kernel_info = #liger.kernel_info<kernel_template = matmul, ops = "liger.linear", grid = [1, "rows/128", 1], threads = 384, shared_memory_bytes = 0, vector_width = 8, params = [#liger.kernel_param<name = "input0", role = input, kind = rows, dtype = bf16, length = 64>, #liger.kernel_param<name = "output0", role = output, kind = rows, dtype = bf16, length = 64>], narrow = <name = "n", grid = [1, "rows/64"], threads = 256, shared_memory_bytes = 0>>}

// -----

// expected-error @+1 {{liger.kernel_info: narrow.tensor_maps[0] names parameter #-1}}
func.func @narrow_negative_tensor_map_param() attributes {liger.kernel_info = #liger.kernel_info<kernel_template = matmul, ops = "liger.linear", grid = [1, "rows/128", 1], threads = 384, shared_memory_bytes = 0, vector_width = 8, params = [#liger.kernel_param<name = "input0", role = input, kind = rows, dtype = bf16, length = 64>, #liger.kernel_param<name = "output0", role = output, kind = rows, dtype = bf16, length = 64>], narrow = <name = "n", grid = [1, "rows/64", 1], threads = 256, shared_memory_bytes = 0, tensor_maps = [#liger.tensor_map<param = -1, box_rows = 64, box_cols = 64, swizzle = 128>]>>}
