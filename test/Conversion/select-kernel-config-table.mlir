// liger-select-kernel-config{matmul-config-table}: a matmul group that an
// entry of a measured table matches takes the first such entry's
// configuration (absent fields: the default rule's tile, as many stages as
// fit, data-parallel); a group no entry matches keeps the default rule's.
// Each match field is a near-miss below: a group that differs in it alone
// keeps the default.
// RUN: rm -rf %t && split-file %s %t
// RUN: liger-opt %t/groups.mlir --liger-select-kernel-config="matmul-config-table=%t/table.json" | FileCheck %s
// RUN: liger-opt %t/groups.mlir --liger-select-kernel-config | FileCheck %s --check-prefix=DEFAULT
// The table names its chip: on sm_80 no sm_90a entry matches, and the
// sm_80 entry sets a tile that mma.sync takes.
// RUN: liger-opt %t/groups.mlir --liger-select-kernel-config="chip=sm_80 matmul-config-table=%t/table.json" | FileCheck %s --check-prefix=SM80

// CHECK-LABEL: func.func @groups
// The q projection: entry 1 (dynamic rows: not entry 0, which bounds them).
//       CHECK: liger.fusion matmul{{.*}}#liger.kernel_config<kernel_template = matmul_wgmma, threads = 256, tile_m = 64, tile_n = 128, tile_k = 64, stages = 6>
// K 5120 (entry 1 says 4096), an RMSNorm prologue (entry 1: no norm), f16
// (entry 1: bf16): the default, each.
//       CHECK: liger.fusion matmul{{.*}}#liger.kernel_config<kernel_template = matmul_wgmma, threads = 384, tile_m = 128, tile_n = 256, tile_k = 64, stages = 4>
//       CHECK: liger.fusion matmul{{.*}}#liger.kernel_config<kernel_template = matmul_wgmma, threads = 384, tile_m = 128, tile_n = 256, tile_k = 64, stages = 4>
//       CHECK: liger.fusion matmul{{.*}}#liger.kernel_config<kernel_template = matmul_wgmma, threads = 384, tile_m = 128, tile_n = 256, tile_k = 64, stages = 4>
// The gate/up pair: entry 2 (pingpong, its default tile, the stages that fit).
//       CHECK: liger.fusion matmul{{.*}}#liger.kernel_config<kernel_template = matmul_wgmma, threads = 384, tile_m = 128, tile_n = 64, tile_k = 64, stages = 6, schedule = pingpong>
// LoRA rank 16: entry 3 (entry 1 says rank 0); rank 32: the default.
//       CHECK: liger.fusion matmul{{.*}}#liger.kernel_config<kernel_template = matmul_wgmma, threads = 384, tile_m = 128, tile_n = 128, tile_k = 64, stages = 3>
//       CHECK: liger.fusion matmul{{.*}}#liger.kernel_config<kernel_template = matmul_wgmma, threads = 384, tile_m = 128, tile_n = 256, tile_k = 64, stages = 4>
// 48 static rows: entry 0 (m_max 64); 100: past its bound, entry 1.
//       CHECK: liger.fusion matmul{{.*}}#liger.kernel_config<kernel_template = matmul_wgmma, threads = 256, tile_m = 64, tile_n = 64, tile_k = 64, stages = 2>
//       CHECK: liger.fusion matmul{{.*}}#liger.kernel_config<kernel_template = matmul_wgmma, threads = 256, tile_m = 64, tile_n = 128, tile_k = 64, stages = 6>
// The down projection's dx product: entry 4, not entry 5, which matches it
// too but comes later.
//       CHECK: liger.fusion matmul{{.*}}#liger.kernel_config<kernel_template = matmul_wgmma, threads = 384, tile_m = 128, tile_n = 128, tile_k = 64, stages = 4>
// A 1024-wide projection (entry 1 says widths [4096]): the default.
//       CHECK: liger.fusion matmul{{.*}}#liger.kernel_config<kernel_template = matmul_wgmma, threads = 384, tile_m = 128, tile_n = 256, tile_k = 64, stages = 4>
// A dx product of entry 1's K and widths (entry 1 says projection): entry 4.
//       CHECK: liger.fusion matmul{{.*}}#liger.kernel_config<kernel_template = matmul_wgmma, threads = 384, tile_m = 128, tile_n = 128, tile_k = 64, stages = 4>
// dW added into an f32 buffer: entry 6; the same dW without one: the default.
//       CHECK: liger.fusion matmul{{.*}}#liger.kernel_config<kernel_template = matmul_wgmma, threads = 384, tile_m = 128, tile_n = 128, tile_k = 64, stages = 3>
//       CHECK: liger.fusion matmul{{.*}}#liger.kernel_config<kernel_template = matmul_wgmma, threads = 384, tile_m = 128, tile_n = 256, tile_k = 64, stages = 4>
// The LoRA dx (rank 16, its weight transposed): the last entry, not entry 3
// (weight_transposed false).
//       CHECK: liger.fusion matmul{{.*}}#liger.kernel_config<kernel_template = matmul_wgmma, threads = 384, tile_m = 128, tile_n = 192, tile_k = 64, stages = 3>

// DEFAULT-LABEL: func.func @groups
//       DEFAULT: tile_m = 128, tile_n = 256, tile_k = 64, stages = 4>
//   DEFAULT-NOT: schedule = pingpong

// SM80-LABEL: func.func @groups
// SM80-COUNT-7: #liger.kernel_config<kernel_template = matmul_mma_sync, threads = 256, tile_m = 128, tile_n = {{64|128}}, tile_k = 32, stages = 5>
//       SM80: #liger.kernel_config<kernel_template = matmul_mma_sync, threads = 128, tile_m = 64, tile_n = 64, tile_k = 32, stages = 3>
// SM80-COUNT-6: #liger.kernel_config<kernel_template = matmul_mma_sync, threads = 256, tile_m = 128, tile_n = 128, tile_k = 32, stages = 5>

//--- table.json
{"version": 1,
 "note": "hand-written for this test",
 "entries": [
  {"match": {"chip": "sm_90a", "m_max": 64},
   "config": {"tile_m": 64, "tile_n": 64, "stages": 2}},
  {"match": {"chip": "sm_90a", "body": "projection", "dtype": "bf16", "k": 4096,
             "widths": [4096], "norm": false, "lora_rank": 0},
   "config": {"tile_m": 64, "tile_n": 128, "stages": 6}},
  {"match": {"chip": "sm_90a", "widths": [14336, 14336]},
   "config": {"schedule": "pingpong"}},
  {"match": {"chip": "sm_90a", "lora_rank": 16, "weight_transposed": false},
   "config": {"tile_n": 128, "stages": 3}, "note": "5 stages would fit"},
  {"match": {"chip": "sm_90a", "body": "grad_input", "k": 4096},
   "config": {"tile_n": 128, "stages": 4}},
  {"match": {"chip": "sm_90a", "body": "grad_input"},
   "config": {"tile_n": 64, "stages": 2}},
  {"match": {"chip": "sm_90a", "body": "grad_weight", "accumulate": true},
   "config": {"tile_n": 128, "stages": 3}},
  {"match": {"chip": "sm_80", "m_min": 10, "m_max": 50},
   "config": {"tile_m": 64, "tile_n": 64, "stages": 3}},
  {"match": {"chip": "sm_90a", "lora_rank": 16, "weight_transposed": true},
   "config": {"tile_n": 192, "stages": 3}}
 ]}

//--- groups.mlir
func.func @groups(%x: tensor<?x4096xbf16>, %w: tensor<4096x4096xbf16>,
                  %x5: tensor<?x5120xbf16>, %w5: tensor<4096x5120xbf16>,
                  %n: tensor<4096xbf16>,
                  %xh: tensor<?x4096xf16>, %wh: tensor<4096x4096xf16>,
                  %wg: tensor<14336x4096xbf16>, %wu: tensor<14336x4096xbf16>,
                  %a16: tensor<16x4096xbf16>, %b16: tensor<4096x16xbf16>,
                  %a32: tensor<32x4096xbf16>, %b32: tensor<4096x32xbf16>,
                  %x48: tensor<48x4096xbf16>, %x100: tensor<100x4096xbf16>,
                  %dy: tensor<?x4096xbf16>, %wd: tensor<4096x14336xbf16>,
                  %wkv: tensor<1024x4096xbf16>, %xs: tensor<?x1024xbf16>,
                  %acc: tensor<4096x1024xf32>, %bt16: tensor<16x4096xbf16>,
                  %at16: tensor<4096x16xbf16>) {
  %0 = liger.fusion matmul(%x, %w) : (tensor<?x4096xbf16>, tensor<4096x4096xbf16>) -> tensor<?x4096xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<4096x4096xbf16>):
    %l = liger.linear %a, %b : tensor<?x4096xbf16>, tensor<4096x4096xbf16>
    liger.yield %l : tensor<?x4096xbf16>
  }
  %1 = liger.fusion matmul(%x5, %w5) : (tensor<?x5120xbf16>, tensor<4096x5120xbf16>) -> tensor<?x4096xbf16> {
  ^bb0(%a: tensor<?x5120xbf16>, %b: tensor<4096x5120xbf16>):
    %l = liger.linear %a, %b : tensor<?x5120xbf16>, tensor<4096x5120xbf16>
    liger.yield %l : tensor<?x4096xbf16>
  }
  %2 = liger.fusion matmul(%x, %n, %w) : (tensor<?x4096xbf16>, tensor<4096xbf16>, tensor<4096x4096xbf16>) -> tensor<?x4096xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %g: tensor<4096xbf16>, %b: tensor<4096x4096xbf16>):
    %r = liger.rms_norm %a, %g eps = 1.0e-5 : tensor<?x4096xbf16>, tensor<4096xbf16>
    %l = liger.linear %r, %b : tensor<?x4096xbf16>, tensor<4096x4096xbf16>
    liger.yield %l : tensor<?x4096xbf16>
  }
  %3 = liger.fusion matmul(%xh, %wh) : (tensor<?x4096xf16>, tensor<4096x4096xf16>) -> tensor<?x4096xf16> {
  ^bb0(%a: tensor<?x4096xf16>, %b: tensor<4096x4096xf16>):
    %l = liger.linear %a, %b : tensor<?x4096xf16>, tensor<4096x4096xf16>
    liger.yield %l : tensor<?x4096xf16>
  }
  %4 = liger.fusion matmul(%x, %wg, %wu) : (tensor<?x4096xbf16>, tensor<14336x4096xbf16>, tensor<14336x4096xbf16>) -> tensor<?x14336xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<14336x4096xbf16>, %c: tensor<14336x4096xbf16>):
    %lg = liger.linear %a, %b : tensor<?x4096xbf16>, tensor<14336x4096xbf16>
    %lu = liger.linear %a, %c : tensor<?x4096xbf16>, tensor<14336x4096xbf16>
    %s = liger.swiglu %lg, %lu : tensor<?x14336xbf16>
    liger.yield %s : tensor<?x14336xbf16>
  }
  %5 = liger.fusion matmul(%x, %w, %a16, %b16) : (tensor<?x4096xbf16>, tensor<4096x4096xbf16>, tensor<16x4096xbf16>, tensor<4096x16xbf16>) -> tensor<?x4096xbf16> {
  ^bb0(%i: tensor<?x4096xbf16>, %j: tensor<4096x4096xbf16>, %k: tensor<16x4096xbf16>, %l: tensor<4096x16xbf16>):
    %p = liger.lora_linear %i, %j, %k, %l scale = 2.0 : tensor<?x4096xbf16>, tensor<4096x4096xbf16>, tensor<16x4096xbf16>, tensor<4096x16xbf16>
    liger.yield %p : tensor<?x4096xbf16>
  }
  %6 = liger.fusion matmul(%x, %w, %a32, %b32) : (tensor<?x4096xbf16>, tensor<4096x4096xbf16>, tensor<32x4096xbf16>, tensor<4096x32xbf16>) -> tensor<?x4096xbf16> {
  ^bb0(%i: tensor<?x4096xbf16>, %j: tensor<4096x4096xbf16>, %k: tensor<32x4096xbf16>, %l: tensor<4096x32xbf16>):
    %p = liger.lora_linear %i, %j, %k, %l scale = 2.0 : tensor<?x4096xbf16>, tensor<4096x4096xbf16>, tensor<32x4096xbf16>, tensor<4096x32xbf16>
    liger.yield %p : tensor<?x4096xbf16>
  }
  %7 = liger.fusion matmul(%x48, %w) : (tensor<48x4096xbf16>, tensor<4096x4096xbf16>) -> tensor<48x4096xbf16> {
  ^bb0(%a: tensor<48x4096xbf16>, %b: tensor<4096x4096xbf16>):
    %l = liger.linear %a, %b : tensor<48x4096xbf16>, tensor<4096x4096xbf16>
    liger.yield %l : tensor<48x4096xbf16>
  }
  %8 = liger.fusion matmul(%x100, %w) : (tensor<100x4096xbf16>, tensor<4096x4096xbf16>) -> tensor<100x4096xbf16> {
  ^bb0(%a: tensor<100x4096xbf16>, %b: tensor<4096x4096xbf16>):
    %l = liger.linear %a, %b : tensor<100x4096xbf16>, tensor<4096x4096xbf16>
    liger.yield %l : tensor<100x4096xbf16>
  }
  %9 = liger.fusion matmul(%dy, %wd) : (tensor<?x4096xbf16>, tensor<4096x14336xbf16>) -> tensor<?x14336xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<4096x14336xbf16>):
    %d = liger.linear_grad_input %a, %b : tensor<?x4096xbf16>, tensor<4096x14336xbf16>
    liger.yield %d : tensor<?x14336xbf16>
  }
  %10 = liger.fusion matmul(%x, %wkv) : (tensor<?x4096xbf16>, tensor<1024x4096xbf16>) -> tensor<?x1024xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<1024x4096xbf16>):
    %l = liger.linear %a, %b : tensor<?x4096xbf16>, tensor<1024x4096xbf16>
    liger.yield %l : tensor<?x1024xbf16>
  }
  %11 = liger.fusion matmul(%dy, %w) : (tensor<?x4096xbf16>, tensor<4096x4096xbf16>) -> tensor<?x4096xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<4096x4096xbf16>):
    %d = liger.linear_grad_input %a, %b : tensor<?x4096xbf16>, tensor<4096x4096xbf16>
    liger.yield %d : tensor<?x4096xbf16>
  }
  %12 = liger.fusion matmul(%dy, %xs, %acc) : (tensor<?x4096xbf16>, tensor<?x1024xbf16>, tensor<4096x1024xf32>) -> tensor<4096x1024xf32> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<?x1024xbf16>, %c: tensor<4096x1024xf32>):
    %g = liger.linear_grad_weight %a, %b accumulate %c : tensor<?x4096xbf16>, tensor<?x1024xbf16>, tensor<4096x1024xf32>
    liger.yield %g : tensor<4096x1024xf32>
  }
  %13 = liger.fusion matmul(%dy, %xs) : (tensor<?x4096xbf16>, tensor<?x1024xbf16>) -> tensor<4096x1024xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<?x1024xbf16>):
    %g = liger.linear_grad_weight %a, %b : tensor<?x4096xbf16>, tensor<?x1024xbf16>
    liger.yield %g : tensor<4096x1024xbf16>
  }
  %14 = liger.fusion matmul(%w, %dy, %bt16, %at16) : (tensor<4096x4096xbf16>, tensor<?x4096xbf16>, tensor<16x4096xbf16>, tensor<4096x16xbf16>) -> tensor<?x4096xbf16> {
  ^bb0(%i: tensor<4096x4096xbf16>, %j: tensor<?x4096xbf16>, %k: tensor<16x4096xbf16>, %l: tensor<4096x16xbf16>):
    %e = tensor.empty() : tensor<4096x4096xbf16>
    %t = linalg.transpose ins(%i : tensor<4096x4096xbf16>) outs(%e : tensor<4096x4096xbf16>) permutation = [1, 0]
    %p = liger.lora_linear %j, %t, %k, %l scale = 2.0 : tensor<?x4096xbf16>, tensor<4096x4096xbf16>, tensor<16x4096xbf16>, tensor<4096x16xbf16>
    liger.yield %p : tensor<?x4096xbf16>
  }
  return
}
