// RUN: liger-opt %s | liger-opt | FileCheck %s
// RUN: liger-opt %s --mlir-print-op-generic | liger-opt | FileCheck %s

// The kernel attributes print as they parse: the ABI's enumerations by
// their manifest spellings, a grid entry as an integer or a quoted symbol,
// omitted fields at their defaults.

// CHECK-LABEL: func.func private @configs()
//  CHECK-SAME:   liger.a = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 8, reuse_loads = false>
//  CHECK-SAME:   liger.b = #liger.kernel_config<kernel_template = cross_entropy, threads = 1024, vector_width = 8, ctas_per_sm = 1>
//  CHECK-SAME:   liger.c = #liger.kernel_config<kernel_template = rope>
//  CHECK-SAME:   liger.d = #liger.kernel_config<kernel_template = matmul_wgmma, threads = 384, tile_m = 128, tile_n = 256, tile_k = 64, stages = 4>
//  CHECK-SAME:   liger.e = #liger.kernel_config<kernel_template = matmul_wgmma, threads = 384, tile_m = 64, tile_n = 256, tile_k = 64, stages = 4, schedule = pingpong>
//  CHECK-SAME:   liger.f = #liger.kernel_config<kernel_template = matmul_wgmma, threads = 384, tile_m = 128, tile_n = 256, tile_k = 64, stages = 3, schedule = persistent>
//  CHECK-SAME:   liger.g = #liger.kernel_config<kernel_template = rowwise, threads = 512, vector_width = 8, cluster = 8>
//  CHECK-SAME:   liger.h = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 8, cluster = 1>
func.func private @configs() attributes {
  liger.a = #liger.kernel_config<kernel_template = rowwise, reuse_loads = false, threads = 256, vector_width = 8>,
  liger.b = #liger.kernel_config<kernel_template = cross_entropy, threads = 1024, vector_width = 8, ctas_per_sm = 1>,
  liger.c = #liger.kernel_config<kernel_template = rope>,
  liger.d = #liger.kernel_config<kernel_template = matmul_wgmma, threads = 384, tile_m = 128, tile_n = 256, tile_k = 64, stages = 4>,
  liger.e = #liger.kernel_config<kernel_template = matmul_wgmma, schedule = pingpong, threads = 384, tile_m = 64, tile_n = 256, tile_k = 64, stages = 4>,
  liger.f = #liger.kernel_config<kernel_template = matmul_wgmma, tile_m = 128, tile_n = 256, tile_k = 64, stages = 3, schedule = persistent, threads = 384>,
  liger.g = #liger.kernel_config<kernel_template = rowwise, cluster = 8, threads = 512, vector_width = 8>,
  liger.h = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 8, cluster = 1>}

// CHECK-LABEL: func.func private @persistent()
//  CHECK-SAME:   grid = ["sms", 1, 1]
func.func private @persistent() attributes {
  liger.kernel_info = #liger.kernel_info<kernel_template = matmul, ops = "liger.linear", grid = ["sms", 1, 1], threads = 384, shared_memory_bytes = 1024, vector_width = 8,
    params = [#liger.kernel_param<name = "input0", role = input, kind = rows, dtype = bf16, length = 64>, #liger.kernel_param<name = "input1", role = input, kind = matrix, dtype = bf16, length = 64, outer = 1024>, #liger.kernel_param<name = "output0", role = output, kind = rows, dtype = bf16, length = 1024>]>}

// CHECK-LABEL: func.func private @infos()
//  CHECK-SAME:   liger.kernel_info = #liger.kernel_info<kernel_template = matmul, ops = "liger.linear", grid = [8, "rows/128", 1], threads = 384, shared_memory_bytes = 1024, vector_width = 8,
//  CHECK-SAME:     params = [#liger.kernel_param<name = "input0", role = input, kind = rows, dtype = bf16, length = 64>, #liger.kernel_param<name = "input1", role = input, kind = matrix, dtype = bf16, length = 64, outer = 1024>, #liger.kernel_param<name = "output0", role = output, kind = rows, dtype = bf16, length = 1024>],
//  CHECK-SAME:     tensor_maps = [#liger.tensor_map<param = 0, box_rows = 128, box_cols = 64, swizzle = 128>, #liger.tensor_map<param = 1, box_rows = 128, box_cols = 64, swizzle = 128, zero_fill = false>]>
//  CHECK-SAME:   liger.reduced = #liger.kernel_info<kernel_template = rowwise, ops = "liger.rms_norm_grad", grid = ["ctas", 1, 1], threads = 256, shared_memory_bytes = 0, vector_width = 8,
//  CHECK-SAME:     #liger.kernel_param<name = "workspace0", role = workspace, kind = partials, dtype = f32, length = 64>], prepare = <name = "k_prepare", grid = 4, threads = 128, shared_memory_bytes = 0>, finish = <name = "k_finish", grid = 1, threads = 256, shared_memory_bytes = 1024>, ctas_per_sm = 4>
func.func private @infos() attributes {
  liger.kernel_info = #liger.kernel_info<kernel_template = matmul, ops = "liger.linear", grid = [8, "rows/128", 1], threads = 384, shared_memory_bytes = 1024, vector_width = 8,
    params = [#liger.kernel_param<name = "input0", role = input, kind = rows, dtype = bf16, length = 64>, #liger.kernel_param<name = "input1", role = input, kind = matrix, dtype = bf16, length = 64, outer = 1024>, #liger.kernel_param<name = "output0", role = output, kind = rows, dtype = bf16, length = 1024>],
    tensor_maps = [#liger.tensor_map<param = 0, box_rows = 128, box_cols = 64, swizzle = 128>, #liger.tensor_map<param = 1, box_rows = 128, box_cols = 64, swizzle = 128, zero_fill = false>]>,
  liger.reduced = #liger.kernel_info<kernel_template = rowwise, ops = "liger.rms_norm_grad", grid = ["ctas", 1, 1], threads = 256, shared_memory_bytes = 0, vector_width = 8,
    params = [#liger.kernel_param<name = "input0", role = input, kind = rows, dtype = f32, length = 64>, #liger.kernel_param<name = "workspace0", role = workspace, kind = partials, dtype = f32, length = 64>],
    prepare = #liger.side_kernel<name = "k_prepare", grid = 4, threads = 128, shared_memory_bytes = 0>,
    finish = #liger.side_kernel<name = "k_finish", grid = 1, threads = 256, shared_memory_bytes = 1024>, ctas_per_sm = 4>}
