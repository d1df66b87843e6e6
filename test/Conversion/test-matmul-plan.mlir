// liger-test-matmul-plan prints what the analysis reads from each matmul
// group (MatmulPlan: the product, sizes, roles of the inputs, the epilogue)
// and the shared-memory layout of its configuration (MatmulLayout: every
// region's offset and size, and the size the configuration was chosen and
// checked with).
// RUN: liger-opt %S/Inputs/matmul-groups.mlir --liger-select-kernel-config --liger-test-matmul-plan -o /dev/null | FileCheck %s
// RUN: liger-opt %S/Inputs/matmul-groups.mlir --liger-select-kernel-config=chip=sm_80 --liger-test-matmul-plan -o /dev/null | FileCheck %s --check-prefix=SM80
// RUN: liger-opt %S/Inputs/matmul-tma-store-misses.mlir --liger-select-kernel-config --liger-test-matmul-plan -o /dev/null | FileCheck %s --check-prefix=MISS

// wgmma: 1024 bytes of mbarriers, then the ring of stages (x, weight(s),
// LoRA A's slice in 128-byte rows); LoRA B's tile and the old dW tile after
// it; the TMA-store epilogue's output tile over the drained stages.

// CHECK-LABEL: matmul plan of @gated
// CHECK-NEXT: body projection, m ?, k 512, n 1024, widths [1024, 1024], element bytes 2, paired
// CHECK-NEXT: input 0 x
// CHECK-NEXT: input 1 weight 0
// CHECK-NEXT: input 2 weight 1
// CHECK-NEXT: epilogue liger.swiglu
// CHECK-NEXT: layout wgmma 128x128x64, 4 stages, stage 49152 bytes, tma store
// CHECK-NEXT: barriers 0 1024
// CHECK-NEXT: stages 1024 196608
// CHECK-NEXT: output 1024 32768 over stages
// CHECK-NEXT: size 197632

// CHECK-LABEL: matmul plan of @normed_residual
// CHECK-NEXT: body projection, m ?, k 512, n 1024, widths [1024], element bytes 2, rms_norm
// CHECK-NEXT: input 0 x
// CHECK-NEXT: input 1 norm_weight
// CHECK-NEXT: input 2 weight 0
// CHECK-NEXT: input 3 bias 0
// CHECK-NEXT: input 4 epilogue_rows
// CHECK-NEXT: epilogue liger.add
// CHECK-NEXT: layout wgmma 128x256x64, 4 stages, stage 49152 bytes, tma store
// CHECK-NEXT: barriers 0 1024
// CHECK-NEXT: stages 1024 196608
// CHECK-NEXT: output 1024 65536 over stages
// CHECK-NEXT: size 197632

// CHECK-LABEL: matmul plan of @lora
// CHECK-NEXT: body projection, m ?, k 512, n 1024, widths [1024], element bytes 2, lora rank 16
// CHECK-NEXT: input 0 x
// CHECK-NEXT: input 1 weight 0
// CHECK-NEXT: input 2 lora_a
// CHECK-NEXT: input 3 lora_b
// CHECK-NEXT: layout wgmma 128x256x64, 4 stages, stage 51200 bytes, tma store
// CHECK-NEXT: barriers 0 1024
// CHECK-NEXT: stages 1024 204800
// CHECK-NEXT: lora_b 205824 8192
// CHECK-NEXT: output 1024 65536 over stages
// CHECK-NEXT: size 214016

// The LoRA dx: W is read MN-major from the group's input 0 (the
// transpose's), the factors' tiles as the forward's.
// CHECK-LABEL: matmul plan of @lora_dx
// CHECK-NEXT: body projection, m ?, k 1024, n 512, widths [512], element bytes 2, lora rank 16, weight transposed
// CHECK-NEXT: input 0 weight 0
// CHECK-NEXT: input 1 x
// CHECK-NEXT: input 2 lora_a
// CHECK-NEXT: input 3 lora_b
// CHECK-NEXT: layout wgmma 128x256x64, 4 stages, stage 51200 bytes, tma store
// CHECK-NEXT: barriers 0 1024
// CHECK-NEXT: stages 1024 204800
// CHECK-NEXT: lora_b 205824 8192
// CHECK-NEXT: output 1024 65536 over stages
// CHECK-NEXT: size 214016

// CHECK-LABEL: matmul plan of @dw_acc_bf16
// CHECK-NEXT: body grad_weight, m 512, k ?, n 1024, widths [1024], element bytes 2, accumulate tile
// CHECK-NEXT: input 0 x
// CHECK-NEXT: input 1 weight 0
// CHECK-NEXT: input 2 accumulator
// CHECK-NEXT: layout wgmma 128x256x64, 3 stages, stage 49152 bytes, tma store, old tile
// CHECK-NEXT: barriers 0 1024
// CHECK-NEXT: stages 1024 147456
// CHECK-NEXT: old_tile 148480 65536
// CHECK-NEXT: size 214016

// CHECK-LABEL: matmul plan of @dx
// CHECK-NEXT: body grad_input, m ?, k 1024, n 512, widths [512], element bytes 2{{$}}
// CHECK-NEXT: input 0 x
// CHECK-NEXT: input 1 weight 0
// CHECK-NEXT: layout wgmma 128x256x64, 4 stages, stage 49152 bytes, tma store
// CHECK-NEXT: barriers 0 1024
// CHECK-NEXT: stages 1024 196608
// CHECK-NEXT: output 1024 65536 over stages
// CHECK-NEXT: size 197632

// CHECK-LABEL: matmul plan of @three
// CHECK-NEXT: unsupported: the group holds 3 projections; one, or a gate/up pair, is what the template computes
// CHECK-NEXT: body projection, m ?, k 512, n 0, widths [1024, 1024, 1024], element bytes 2
// CHECK-NEXT: layout wgmma 128x256x64, 4 stages, stage 49152 bytes, tma store
// CHECK-NEXT: barriers 0 1024
// CHECK-NEXT: stages 1024 196608
// CHECK-NEXT: output 1024 65536 over stages
// CHECK-NEXT: size 197632

// CHECK-LABEL: matmul plan of @qk_rope
// CHECK-NEXT: body qk_rope, m ?, k 64, n 96, widths [64, 32], element bytes 2, rms_norm, head_dim 16, nq 64
// CHECK-NEXT: input 0 x
// CHECK-NEXT: input 1 norm_weight
// CHECK-NEXT: input 2 weight 0
// CHECK-NEXT: input 3 weight 1
// CHECK-NEXT: input 4 cos
// CHECK-NEXT: input 5 sin
// CHECK-NEXT: layout wgmma 128x32x64, 5 stages, stage 20480 bytes
// CHECK-NEXT: barriers 0 1024
// CHECK-NEXT: stages 1024 102400
// CHECK-NEXT: size 103424


// mma.sync: per operand a ring of [stages, rows, tile_k + 8] tiles
// ([stages, tile_k, columns + 8] MN-major), LoRA's tiles, RoPE's exchange
// tile over the x ring, the RMSNorm's row sums after the rest.

// A gradient product with an epilogue of two results: both results' tiles
// (2 x 64 KiB) over the drained stages, stored with TMA.
// CHECK-LABEL: matmul plan of @dx_swiglu_grad
// CHECK-NEXT: body grad_input, m ?, k 1024, n 512, widths [512], element bytes 2, 2 results
// CHECK-NEXT: input 0 x
// CHECK-NEXT: input 1 weight 0
// CHECK-NEXT: input 2 epilogue_rows
// CHECK-NEXT: input 3 epilogue_rows
// CHECK-NEXT: epilogue liger.swiglu_grad
// CHECK-NEXT: layout wgmma 128x256x64, 4 stages, stage 49152 bytes, tma store
// CHECK-NEXT: barriers 0 1024
// CHECK-NEXT: stages 1024 196608
// CHECK-NEXT: output 1024 131072 over stages
// CHECK-NEXT: size 197632
// Four results' tiles (4 x 32 KiB) do not fit in two stages of 48 KiB:
// stored from registers.
// MISS-LABEL: matmul plan of @gated_keeps_two_stages
// MISS: layout wgmma 128x128x64, 2 stages, stage 49152 bytes{{$}}
// MISS-NEXT: barriers 0 1024
// MISS-NEXT: stages 1024 98304
// MISS-NEXT: size 99328

// SM80-LABEL: matmul plan of @gated
// SM80-NEXT: body projection, m ?, k 512, n 1024, widths [1024, 1024], element bytes 2, paired
// SM80-NEXT: input 0 x
// SM80-NEXT: input 1 weight 0
// SM80-NEXT: input 2 weight 1
// SM80-NEXT: epilogue liger.swiglu
// SM80-NEXT: layout mma_sync 128x64x32, 5 stages
// SM80-NEXT: x 0 51200
// SM80-NEXT: w0 51200 25600
// SM80-NEXT: w1 76800 25600
// SM80-NEXT: size 102400

// SM80-LABEL: matmul plan of @normed_residual
// SM80-NEXT: body projection, m ?, k 512, n 1024, widths [1024], element bytes 2, rms_norm
// SM80-NEXT: input 0 x
// SM80-NEXT: input 1 norm_weight
// SM80-NEXT: input 2 weight 0
// SM80-NEXT: input 3 bias 0
// SM80-NEXT: input 4 epilogue_rows
// SM80-NEXT: epilogue liger.add
// SM80-NEXT: layout mma_sync 128x128x32, 5 stages
// SM80-NEXT: x 0 51200
// SM80-NEXT: w0 51200 51200
// SM80-NEXT: row_sums 102400 512
// SM80-NEXT: size 102912

// SM80-LABEL: matmul plan of @lora
// SM80-NEXT: body projection, m ?, k 512, n 1024, widths [1024], element bytes 2, lora rank 16
// SM80-NEXT: input 0 x
// SM80-NEXT: input 1 weight 0
// SM80-NEXT: input 2 lora_a
// SM80-NEXT: input 3 lora_b
// SM80-NEXT: layout mma_sync 128x128x32, 5 stages
// SM80-NEXT: x 0 51200
// SM80-NEXT: w0 51200 51200
// SM80-NEXT: lora_a 102400 6400
// SM80-NEXT: lora_b 108800 6144
// SM80-NEXT: size 114944

// MN-major W staged [tile_k, tile_n + 8] (5 x 32 x 136 x 2 bytes).
// SM80-LABEL: matmul plan of @lora_dx
// SM80-NEXT: body projection, m ?, k 1024, n 512, widths [512], element bytes 2, lora rank 16, weight transposed
// SM80-NEXT: input 0 weight 0
// SM80-NEXT: input 1 x
// SM80-NEXT: input 2 lora_a
// SM80-NEXT: input 3 lora_b
// SM80-NEXT: layout mma_sync 128x128x32, 5 stages
// SM80-NEXT: x 0 51200
// SM80-NEXT: w0 51200 43520
// SM80-NEXT: lora_a 94720 6400
// SM80-NEXT: lora_b 101120 6144
// SM80-NEXT: size 107264

// SM80-LABEL: matmul plan of @dw_acc_bf16
// SM80-NEXT: body grad_weight, m 512, k ?, n 1024, widths [1024], element bytes 2, accumulate tile
// SM80-NEXT: input 0 x
// SM80-NEXT: input 1 weight 0
// SM80-NEXT: input 2 accumulator
// SM80-NEXT: layout mma_sync 128x128x32, 5 stages
// SM80-NEXT: x 0 43520
// SM80-NEXT: w0 43520 43520
// SM80-NEXT: size 87040

// SM80-LABEL: matmul plan of @dx
// SM80-NEXT: body grad_input, m ?, k 1024, n 512, widths [512], element bytes 2
// SM80-NEXT: input 0 x
// SM80-NEXT: input 1 weight 0
// SM80-NEXT: layout mma_sync 128x128x32, 5 stages
// SM80-NEXT: x 0 51200
// SM80-NEXT: w0 51200 43520
// SM80-NEXT: size 94720

// SM80-LABEL: matmul plan of @three
// SM80-NEXT: unsupported: the group holds 3 projections; one, or a gate/up pair, is what the template computes
// SM80-NEXT: body projection, m ?, k 512, n 0, widths [1024, 1024, 1024], element bytes 2
// SM80-NEXT: layout mma_sync 128x128x32, 5 stages
// SM80-NEXT: x 0 51200
// SM80-NEXT: w0 51200 51200
// SM80-NEXT: size 102400

// SM80-LABEL: matmul plan of @qk_rope
// SM80-NEXT: body qk_rope, m ?, k 64, n 96, widths [64, 32], element bytes 2, rms_norm, head_dim 16, nq 64
// SM80-NEXT: input 0 x
// SM80-NEXT: input 1 norm_weight
// SM80-NEXT: input 2 weight 0
// SM80-NEXT: input 3 weight 1
// SM80-NEXT: input 4 cos
// SM80-NEXT: input 5 sin
// SM80-NEXT: layout mma_sync 128x32x32, 5 stages
// SM80-NEXT: x 0 51200
// SM80-NEXT: w0 51200 12800
// SM80-NEXT: exchange 0 10240 over x
// SM80-NEXT: row_sums 64000 512
// SM80-NEXT: size 64512

// SM80-LABEL: matmul plan of @dx_swiglu_grad
// SM80-NEXT: body grad_input, m ?, k 1024, n 512, widths [512], element bytes 2, 2 results
// SM80: epilogue liger.swiglu_grad
// SM80-NEXT: layout mma_sync 128x128x32, 5 stages
