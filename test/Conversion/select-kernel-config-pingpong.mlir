// RUN: liger-opt %s --liger-select-kernel-config=matmul-schedule=pingpong --split-input-file | FileCheck %s
// RUN: liger-opt %s --liger-select-kernel-config=matmul-schedule=data-parallel --split-input-file | FileCheck %s --check-prefix=DP
// RUN: liger-opt %s --liger-select-kernel-config=matmul-schedule=persistent --split-input-file | FileCheck %s --check-prefix=PS
// RUN: liger-opt %s --liger-select-kernel-config="chip=sm_80 matmul-schedule=persistent" --split-input-file | FileCheck %s --check-prefix=SM80
// RUN: liger-opt %s --liger-select-kernel-config="chip=sm_80 matmul-schedule=pingpong" --split-input-file | FileCheck %s --check-prefix=SM80
// RUN: not liger-opt %s --liger-select-kernel-config=matmul-schedule=fast -o /dev/null 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not liger-opt %s --liger-lower-to-gpu="matmul-kernels=true matmul-schedule=Pingpong" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BADLOWER

// --matmul-schedule=pingpong: every wgmma group that takes the schedule
// gets it, on tiles as tall as the default's and half as wide (two
// consumer sets of one warpgroup each: 384 threads), as many stages as fit
// beside the warpgroups' output boxes (two 64 x 64 boxes each, up to 8
// stages); a group it does not take (LoRA) keeps the default.
// data-parallel (and auto, today) never choose it; mma.sync has no
// schedule.
// --matmul-schedule=persistent: the data-parallel tile, looped over by one
// CTA per SM, with as many stages as fit beside the output boxes of its
// own (a TMA-stored result: 4 of a 128 x 256 tile beside 32 KiB of boxes,
// as results stored from registers); the same near-misses keep the
// data-parallel schedule.

// BAD: error: liger-select-kernel-config: matmul-schedule must be auto, data-parallel, pingpong or persistent, got 'fast'
// BADLOWER: error: liger-lower-to-gpu: matmul-schedule must be auto, data-parallel, pingpong or persistent, got 'Pingpong'

// CHECK-LABEL: func.func @llama
//       CHECK:   liger.fusion matmul{{.*}}#liger.kernel_config<kernel_template = matmul_wgmma, threads = 384, tile_m = 128, tile_n = 128, tile_k = 64, stages = 6, schedule = pingpong>
//       CHECK:   liger.fusion matmul{{.*}}#liger.kernel_config<kernel_template = matmul_wgmma, threads = 384, tile_m = 128, tile_n = 64, tile_k = 64, stages = 6, schedule = pingpong>
//       CHECK:   liger.fusion matmul{{.*}}#liger.kernel_config<kernel_template = matmul_wgmma, threads = 384, tile_m = 128, tile_n = 128, tile_k = 64, stages = 7, schedule = pingpong>
//  DP-LABEL: func.func @llama
//       DP:   #liger.kernel_config<kernel_template = matmul_wgmma, threads = 384, tile_m = 128, tile_n = 256, tile_k = 64, stages = 4>
//       DP:   #liger.kernel_config<kernel_template = matmul_wgmma, threads = 384, tile_m = 128, tile_n = 128, tile_k = 64, stages = 4>
//       DP:   #liger.kernel_config<kernel_template = matmul_wgmma, threads = 384, tile_m = 128, tile_n = 256, tile_k = 64, stages = 4>
//  PS-LABEL: func.func @llama
//       PS:   #liger.kernel_config<kernel_template = matmul_wgmma, threads = 384, tile_m = 128, tile_n = 256, tile_k = 64, stages = 4, schedule = persistent>
//       PS:   #liger.kernel_config<kernel_template = matmul_wgmma, threads = 384, tile_m = 128, tile_n = 128, tile_k = 64, stages = 4, schedule = persistent>
//       PS:   #liger.kernel_config<kernel_template = matmul_wgmma, threads = 384, tile_m = 128, tile_n = 256, tile_k = 64, stages = 4, schedule = persistent>
//     SM80-LABEL: func.func @llama
//   SM80-NOT: schedule
func.func @llama(%x: tensor<?x4096xbf16>, %wq: tensor<4096x4096xbf16>, %wg: tensor<14336x4096xbf16>, %wu: tensor<14336x4096xbf16>, %dy: tensor<?x4096xbf16>, %wd: tensor<4096x14336xbf16>, %g: tensor<?x14336xbf16>, %u: tensor<?x14336xbf16>) -> (tensor<?x4096xbf16>, tensor<?x14336xbf16>, tensor<?x14336xbf16>, tensor<?x14336xbf16>) {
  %q = liger.fusion matmul(%x, %wq) : (tensor<?x4096xbf16>, tensor<4096x4096xbf16>) -> tensor<?x4096xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<4096x4096xbf16>):
    %l = liger.linear %a, %b : tensor<?x4096xbf16>, tensor<4096x4096xbf16>
    liger.yield %l : tensor<?x4096xbf16>
  }
  %h = liger.fusion matmul(%x, %wg, %wu) : (tensor<?x4096xbf16>, tensor<14336x4096xbf16>, tensor<14336x4096xbf16>) -> tensor<?x14336xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<14336x4096xbf16>, %c: tensor<14336x4096xbf16>):
    %lg = liger.linear %a, %b : tensor<?x4096xbf16>, tensor<14336x4096xbf16>
    %lu = liger.linear %a, %c : tensor<?x4096xbf16>, tensor<14336x4096xbf16>
    %s = liger.swiglu %lg, %lu : tensor<?x14336xbf16>
    liger.yield %s : tensor<?x14336xbf16>
  }
  // The gated MLP's backward: two results, stored from registers (no
  // output tiles in shared memory), so one stage more.
  %r:2 = liger.fusion matmul(%dy, %wd, %g, %u) : (tensor<?x4096xbf16>, tensor<4096x14336xbf16>, tensor<?x14336xbf16>, tensor<?x14336xbf16>) -> (tensor<?x14336xbf16>, tensor<?x14336xbf16>) {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<4096x14336xbf16>, %c: tensor<?x14336xbf16>, %d: tensor<?x14336xbf16>):
    %dh = liger.linear_grad_input %a, %b : tensor<?x4096xbf16>, tensor<4096x14336xbf16>
    %dg, %du = liger.swiglu_grad %dh, %c, %d : tensor<?x14336xbf16>
    liger.yield %dg, %du : tensor<?x14336xbf16>, tensor<?x14336xbf16>
  }
  return %q, %h, %r#0, %r#1 : tensor<?x4096xbf16>, tensor<?x14336xbf16>, tensor<?x14336xbf16>, tensor<?x14336xbf16>
}

// -----

// A near-miss: LoRA (B's tile is read once per CTA) keeps the
// data-parallel schedule. A dW accumulated into a bf16 buffer takes it,
// each consumer set with an old tile of its own (pingpong: two of 32 KiB
// beside 5 stages; persistent: one of 64 KiB beside 3), and into an f32
// buffer (read at each element) with none (7 stages; 4).
// CHECK-LABEL: func.func @near_misses
//       CHECK:   liger.fusion matmul{{.*}}#liger.kernel_config<kernel_template = matmul_wgmma, threads = 384, tile_m = 128, tile_n = 256, tile_k = 64, stages = 4>
//       CHECK:   liger.fusion matmul{{.*}}#liger.kernel_config<kernel_template = matmul_wgmma, threads = 384, tile_m = 128, tile_n = 128, tile_k = 64, stages = 5, schedule = pingpong>
//       CHECK:   liger.fusion matmul{{.*}}#liger.kernel_config<kernel_template = matmul_wgmma, threads = 384, tile_m = 128, tile_n = 128, tile_k = 64, stages = 7, schedule = pingpong>
//    PS-LABEL: func.func @near_misses
//          PS:   #liger.kernel_config<kernel_template = matmul_wgmma, threads = 384, tile_m = 128, tile_n = 256, tile_k = 64, stages = 4>
//          PS:   #liger.kernel_config<kernel_template = matmul_wgmma, threads = 384, tile_m = 128, tile_n = 256, tile_k = 64, stages = 3, schedule = persistent>
//          PS:   #liger.kernel_config<kernel_template = matmul_wgmma, threads = 384, tile_m = 128, tile_n = 256, tile_k = 64, stages = 4, schedule = persistent>
func.func @near_misses(%x: tensor<?x4096xbf16>, %w: tensor<4096x4096xbf16>, %la: tensor<16x4096xbf16>, %lb: tensor<4096x16xbf16>, %dy: tensor<?x4096xbf16>, %acc: tensor<4096x4096xbf16>, %acc32: tensor<4096x4096xf32>) -> (tensor<?x4096xbf16>, tensor<4096x4096xbf16>, tensor<4096x4096xf32>) {
  %y = liger.fusion matmul(%x, %w, %la, %lb) : (tensor<?x4096xbf16>, tensor<4096x4096xbf16>, tensor<16x4096xbf16>, tensor<4096x16xbf16>) -> tensor<?x4096xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<4096x4096xbf16>, %c: tensor<16x4096xbf16>, %d: tensor<4096x16xbf16>):
    %l = liger.lora_linear %a, %b, %c, %d scale = 2.0 : tensor<?x4096xbf16>, tensor<4096x4096xbf16>, tensor<16x4096xbf16>, tensor<4096x16xbf16>
    liger.yield %l : tensor<?x4096xbf16>
  }
  %dw = liger.fusion matmul(%dy, %x, %acc) : (tensor<?x4096xbf16>, tensor<?x4096xbf16>, tensor<4096x4096xbf16>) -> tensor<4096x4096xbf16> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<?x4096xbf16>, %c: tensor<4096x4096xbf16>):
    %g = liger.linear_grad_weight %a, %b accumulate %c : tensor<?x4096xbf16>, tensor<?x4096xbf16>, tensor<4096x4096xbf16>
    liger.yield %g : tensor<4096x4096xbf16>
  }
  %dw32 = liger.fusion matmul(%dy, %x, %acc32) : (tensor<?x4096xbf16>, tensor<?x4096xbf16>, tensor<4096x4096xf32>) -> tensor<4096x4096xf32> {
  ^bb0(%a: tensor<?x4096xbf16>, %b: tensor<?x4096xbf16>, %c: tensor<4096x4096xf32>):
    %g = liger.linear_grad_weight %a, %b accumulate %c : tensor<?x4096xbf16>, tensor<?x4096xbf16>, tensor<4096x4096xf32>
    liger.yield %g : tensor<4096x4096xf32>
  }
  return %y, %dw, %dw32 : tensor<?x4096xbf16>, tensor<4096x4096xbf16>, tensor<4096x4096xf32>
}
