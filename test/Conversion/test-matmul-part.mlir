// liger-test-matmul-part builds one part of each matmul group's kernel
// (MatmulEmitters.h) into a gpu.func of its own, with the offsets of the
// group's MatmulLayout: a change to one part shows here, in that part.
// RUN: liger-opt %S/Inputs/matmul-groups.mlir --liger-select-kernel-config --liger-test-matmul-part=part=barriers --cse 2>/dev/null | FileCheck %s --check-prefix=BARRIERS
// RUN: liger-opt %S/Inputs/matmul-groups.mlir --liger-select-kernel-config --liger-test-matmul-part=part=producer --cse 2>/dev/null | FileCheck %s --check-prefix=PRODUCER
// RUN: liger-opt %S/Inputs/matmul-groups.mlir --liger-select-kernel-config=chip=sm_80 --liger-test-matmul-part=part=slice-load --cse 2>/dev/null | FileCheck %s --check-prefix=SLICE
// RUN: liger-opt %S/Inputs/matmul-groups.mlir --liger-select-kernel-config --liger-test-matmul-part=part=norm-prologue --cse 2>/dev/null | FileCheck %s --check-prefix=NORM
// RUN: liger-opt %S/Inputs/matmul-groups.mlir --liger-select-kernel-config=chip=sm_80 --liger-test-matmul-part=part=norm-prologue --cse 2>/dev/null | FileCheck %s --check-prefix=NORM80
// RUN: liger-opt %S/Inputs/matmul-groups.mlir --liger-select-kernel-config --liger-test-matmul-part=part=epilogue --cse 2>/dev/null | FileCheck %s --check-prefix=EPILOGUE
// RUN: liger-opt %S/Inputs/matmul-groups.mlir --liger-select-kernel-config --liger-test-matmul-part=part=tma-store --cse 2>/dev/null | FileCheck %s --check-prefix=TMA
// RUN: liger-opt %S/Inputs/matmul-groups.mlir --liger-select-kernel-config --liger-test-matmul-part=part=rope --cse 2>/dev/null | FileCheck %s --check-prefix=ROPE
// RUN: liger-opt %S/Inputs/matmul-groups.mlir --liger-select-kernel-config=chip=sm_80 --liger-test-matmul-part=part=rope --cse 2>/dev/null | FileCheck %s --check-prefix=ROPE80
// The group the templates leave alone gets the lowering's warning and no
// part.
// RUN: liger-opt %S/Inputs/matmul-groups.mlir --liger-select-kernel-config --liger-test-matmul-part=part=barriers -o /dev/null 2>&1 | FileCheck %s --check-prefix=WARN

// WARN: warning: left for a later matmul template: the group holds 3 projections; one, or a gate/up pair, is what the template computes
// WARN-NOT: warning

// Thread 0 initializes stage s's full mbarrier at 8 s (one arrival: the
// producer's) and its empty one at 32 + 8 s (one per consumer warpgroup),
// then LoRA B's at 512, and fences them for the async proxy.
// BARRIERS-LABEL: gpu.func @lora_barriers
// BARRIERS: %[[SMEM:.+]] = llvm.mlir.addressof @liger_matmul_smem : !llvm.ptr<3>
// BARRIERS: scf.if
// BARRIERS: %[[FULL:.+]] = arith.muli %{{.+}}, %c8_i32 : i32
// BARRIERS: %[[FP:.+]] = llvm.getelementptr %[[SMEM]][%[[FULL]]]
// BARRIERS: nvvm.mbarrier.init %[[FP]], %c1_i32
// BARRIERS: %[[EMPTY:.+]] = arith.addi %[[FULL]], %c32_i32 : i32
// BARRIERS: %[[EP:.+]] = llvm.getelementptr %[[SMEM]][%[[EMPTY]]]
// BARRIERS: nvvm.mbarrier.init %[[EP]], %c2_i32
// BARRIERS: nvvm.mbarrier.init %{{.+}}, %c2_i32
// BARRIERS: nvvm.mbarrier.init %{{.+}}, %c2_i32
// BARRIERS: nvvm.mbarrier.init %{{.+}}, %c2_i32
// BARRIERS: %[[LP:.+]] = llvm.getelementptr %[[SMEM]][%c512_i32]
// BARRIERS: nvvm.mbarrier.init %[[LP]], %c1_i32
// BARRIERS: nvvm.fence.mbarrier.init
// BARRIERS: }
// BARRIERS: gpu.barrier
// A 16-bit dW buffer's old tile has its mbarrier at 768 (3 stages: the
// empty ones from 24); the data-parallel kernel's one use of it needs no
// empty mbarrier.
// BARRIERS-LABEL: gpu.func @dw_acc_bf16_barriers
// BARRIERS: arith.addi %{{.+}}, %c24_i32 : i32
// BARRIERS: llvm.getelementptr %{{.+}}[%c768_i32]
// BARRIERS: nvvm.mbarrier.init %{{.+}}, %c1_i32
// BARRIERS-NOT: nvvm.mbarrier.init
// BARRIERS: nvvm.fence.mbarrier.init

// The producer warpgroup gives up registers; one thread waits for stage s's
// empty barrier (at 32 + 8 s, the parity of its previous use), arms the
// full one with the stage's 49152 bytes and copies the x tile (1024 + s ·
// 49152) and both weight tiles (16384 bytes apart) at (k0, row).
// PRODUCER-LABEL: gpu.func @gated_producer
// PRODUCER-NOT: prefetch
// PRODUCER: %[[SMEM:.+]] = llvm.mlir.addressof @liger_matmul_smem
// PRODUCER: nvvm.setmaxregister decrease 40
// PRODUCER: scf.for %[[KT:.+]] = %c0 to %c8 step %c1 {
// PRODUCER: %[[S:.+]] = arith.remui %[[KT]], %c4 : index
// PRODUCER: %[[USE:.+]] = arith.divui %[[KT]], %c4 : index
// PRODUCER: %[[PAR:.+]] = arith.remui %[[USE]], %c2 : index
// PRODUCER: %[[PAR32:.+]] = arith.index_cast %[[PAR]] : index to i32
// PRODUCER: %[[FREED:.+]] = arith.xori %[[PAR32]], %c1_i32 : i32
// PRODUCER: %[[S32:.+]] = arith.index_cast %[[S]] : index to i32
// PRODUCER: %[[FULL:.+]] = arith.muli %[[S32]], %c8_i32 : i32
// PRODUCER: %[[EMPTY:.+]] = arith.addi %[[FULL]], %c32_i32 : i32
// PRODUCER: %[[EP:.+]] = llvm.getelementptr %[[SMEM]][%[[EMPTY]]]
// PRODUCER: nvvm.mbarrier.try_wait.parity %[[EP]], %[[FREED]]
// PRODUCER: %[[FP:.+]] = llvm.getelementptr %[[SMEM]][%[[FULL]]]
// PRODUCER: nvvm.mbarrier.arrive.expect_tx %[[FP]], %c49152_i32
// PRODUCER: %[[STAGE:.+]] = arith.muli %[[S32]], %c49152_i32 : i32
// PRODUCER: %[[XT:.+]] = arith.addi %[[STAGE]], %c1024_i32 : i32
// PRODUCER: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.+}}, %arg4, %[[FP]], box[%[[K0:.+]], %{{.+}}]
// PRODUCER: arith.addi %[[STAGE]], %c17408_i32 : i32
// PRODUCER: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.+}}, %arg5, %[[FP]], box[%[[K0]], %{{.+}}]
// PRODUCER: arith.addi %[[STAGE]], %c33792_i32 : i32
// PRODUCER: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.+}}, %arg6, %[[FP]], box[%[[K0]], %{{.+}}]
// PRODUCER: }
// LoRA: B's tile once (its barrier at 512, 8192 bytes, after the 4 stages
// at 205824), A's [16, 64] slice at the end of each stage (51200 bytes).
// PRODUCER-LABEL: gpu.func @lora_producer
// PRODUCER: %[[LB:.+]] = llvm.getelementptr %{{.+}}[%c512_i32]
// PRODUCER: nvvm.mbarrier.arrive.expect_tx %[[LB]], %c8192_i32
// PRODUCER: llvm.getelementptr %{{.+}}[%c205824_i32]
// PRODUCER: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.+}}, %arg10, %[[LB]], box[%c0_i32, %{{.+}}]
// PRODUCER: scf.for
// PRODUCER: nvvm.mbarrier.arrive.expect_tx %{{.+}}, %c51200_i32
// PRODUCER: arith.addi %{{.+}}, %c50176_i32 : i32
// PRODUCER: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.+}}, %arg9,
// The old dW tile: 2 warpgroups x 4 boxes of 64 x 64 (8192 bytes each) from
// 148480, at (n0 + 64 j, m0 + 64 w), on its own barrier.
// PRODUCER-LABEL: gpu.func @dw_acc_bf16_producer
// PRODUCER: %[[OB:.+]] = llvm.getelementptr %{{.+}}[%c768_i32]
// PRODUCER: nvvm.mbarrier.arrive.expect_tx %[[OB]], %c65536_i32
// PRODUCER: llvm.getelementptr %{{.+}}[%c148480_i32]
// PRODUCER: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.+}}, %arg6, %[[OB]]
// PRODUCER: llvm.getelementptr %{{.+}}[%c156672_i32]
// PRODUCER: llvm.getelementptr %{{.+}}[%c164864_i32]
// PRODUCER: llvm.getelementptr %{{.+}}[%c173056_i32]
// PRODUCER: llvm.getelementptr %{{.+}}[%c181248_i32]
// PRODUCER: llvm.getelementptr %{{.+}}[%c189440_i32]
// PRODUCER: llvm.getelementptr %{{.+}}[%c197632_i32]
// PRODUCER: llvm.getelementptr %{{.+}}[%c205824_i32]
// PRODUCER: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.+}}, %arg6, %[[OB]]
// PRODUCER: scf.for
// dx reads W N-major: boxes of 64 rows of K x 64 columns at (n0 + 64 j,
// k0), 8192 bytes apart.
// PRODUCER-LABEL: gpu.func @dx_producer
// PRODUCER: scf.for
// PRODUCER: %[[WT:.+]] = arith.addi %{{.+}}, %c17408_i32 : i32
// PRODUCER: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.+}}, %arg4, %{{.+}}, box[%{{.+}}, %[[K0:.+]]]
// PRODUCER: arith.addi %[[WT]], %c8192_i32 : i32
// PRODUCER: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.+}}, %arg4, %{{.+}}, box[%{{.+}}, %[[K0]]]
// PRODUCER: arith.addi %[[WT]], %c16384_i32 : i32
// PRODUCER: arith.addi %[[WT]], %c24576_i32 : i32
// PRODUCER: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.+}}, %arg4, %{{.+}}, box[%{{.+}}, %[[K0]]]
// PRODUCER: }
// RoPE: the column tile comes from Wq's map or, past nq = 64, Wk's.
// PRODUCER-LABEL: gpu.func @qk_rope_producer
// PRODUCER: arith.cmpi ult, %{{.+}}, %c64 : index
// PRODUCER: scf.if
// PRODUCER: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.+}}, %arg9,
// PRODUCER: } else {
// PRODUCER: arith.subi %{{.+}}, %c64 : index
// PRODUCER: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.+}}, %arg10,
// The epilogue reads gate and up at each row: when the producer fills the
// stage of step kTiles - stages - 8 (16 - 12 = 4), it prefetches their
// [128, 64] boxes of the tile into L2 through their maps (%arg10, %arg11),
// tile_n / 64 = 4 boxes each. A kernel whose epilogue reads no rows
// prefetches nothing.
// PRODUCER-LABEL: gpu.func @dx_swiglu_grad_producer
// PRODUCER-SAME: %arg10: !llvm.ptr, %arg11: !llvm.ptr)
// PRODUCER: scf.for %[[KT:.+]] = %c0 to %c16 step %c1 {
// PRODUCER: %[[AT:.+]] = arith.select %{{.+}}, %c0, %{{.+}} : index
// PRODUCER: %[[NOW:.+]] = arith.cmpi eq, %[[KT]], %[[AT]] : index
// PRODUCER: scf.if %[[NOW]] {
// PRODUCER-COUNT-4: nvvm.cp.async.bulk.tensor.prefetch %arg10, box[%{{.+}}, %[[ROW:.+]]] : !llvm.ptr
// PRODUCER-COUNT-4: nvvm.cp.async.bulk.tensor.prefetch %arg11, box[%{{.+}}, %[[ROW]]] : !llvm.ptr
// PRODUCER-NOT: gpu.func
// PRODUCER-NOT: prefetch

// mma.sync: slice 0 of x (128 rows x 4 chunks: 2 per thread), of W and of
// LoRA's A (after the rings of x and W), as 16-byte cp.async chunks
// zero-filled past the rows, into stage 0 of each ring; one commit group.
// SLICE-LABEL: gpu.func @lora_slice_load
// SLICE: %[[SMEM:.+]] = gpu.dynamic_shared_memory
// SLICE: %[[X:.+]] = memref.view %[[SMEM]][%c0][] : {{.+}} to memref<5x128x40xbf16
// SLICE: %[[W:.+]] = memref.view %[[SMEM]][%c51200][] : {{.+}} to memref<5x128x40xbf16
// SLICE: %[[A:.+]] = memref.view %[[SMEM]][%c102400][] : {{.+}} to memref<5x16x40xbf16
// SLICE: nvgpu.device_async_copy %arg0[{{.+}}], %[[X]][
// SLICE: nvgpu.device_async_copy %arg0[{{.+}}], %[[X]][
// SLICE: nvgpu.device_async_copy %arg2[{{.+}}], %[[A]][
// SLICE: nvgpu.device_async_copy %arg1[{{.+}}], %[[W]][
// SLICE: nvgpu.device_async_copy %arg1[{{.+}}], %[[W]][
// SLICE-NEXT: nvvm.cp.async.commit.group
// A gradient product's MN-major dy: [32 rows of K, 136] with the column and
// K ends masked.
// SLICE-LABEL: gpu.func @dx_slice_load
// SLICE: memref.view %{{.+}}[%c51200][] : {{.+}} to memref<5x32x136xbf16
// SLICE: nvvm.cp.async.commit.group

// wgmma: stage 0's full barrier, then each thread rescales its 4 chunks of
// the x tile in place (chunk c of row r at c ^ (r % 8), rows of 128 bytes,
// warpgroup cw's 64 rows 8192 bytes in) while summing x²; then the
// async-proxy fence and the warpgroup's barrier.
// NORM-LABEL: gpu.func @normed_residual_norm_prologue
// NORM: nvvm.mbarrier.try_wait.parity
// NORM: arith.muli %{{.+}}, %c8192_i32 : i32
// NORM: arith.xori
// NORM: arith.muli %{{.+}}, %c128_i32 : i32
// NORM: %[[X:.+]] = llvm.load %{{.+}} {alignment = 16 : i64} : !llvm.ptr<3> -> vector<8xbf16>
// NORM: vector.reduction <add>
// NORM: %[[G:.+]] = vector.load %arg1[%{{.+}}] {alignment = 16 : i64} : memref<512xbf16>, vector<8xbf16>
// NORM: arith.mulf
// NORM: %[[XG:.+]] = arith.truncf %{{.+}} : vector<8xf32> to vector<8xbf16>
// NORM: llvm.store %[[XG]]
// NORM: llvm.store
// NORM: llvm.store
// NORM: llvm.store
// NORM-NOT: llvm.store
// NORM: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// NORM: nvvm.barrier id = %{{.+}} number_of_threads = %c128_i32
// NORM-LABEL: gpu.func @qk_rope_norm_prologue
// NORM: vector.reduction <add>
// mma.sync: the rows' sums of squares (f32, after the x and W rings) are
// zeroed, then the slice's chunks are rescaled in place and their x² added
// to their row's sum; a CTA barrier follows.
// NORM80-LABEL: gpu.func @normed_residual_norm_prologue
// NORM80: %[[SUMS:.+]] = memref.view %{{.+}}[%c102400][] : {{.+}} to memref<128xf32
// NORM80: memref.store %{{.+}}, %[[SUMS]][
// NORM80: vector.load %{{.+}} {alignment = 16 : i64} : memref<5x128x40xbf16
// NORM80: memref.atomic_rmw addf %{{.+}}, %[[SUMS]][
// NORM80: vector.store %{{.+}} {alignment = 16 : i64} : memref<5x128x40xbf16
// NORM80: gpu.barrier
// NORM80-LABEL: gpu.func @qk_rope_norm_prologue
// NORM80: memref.view %{{.+}}[%c64000][] : {{.+}} to memref<128xf32

// A pair's store: its global loads first (the residual and the bias, at
// the row and column clamped into the output: the last row, column
// N - 2), then, masked at the row and column ends, the bias added in f32
// and rounded (liger.linear), the residual add of the reference lowering,
// the store.
// EPILOGUE-LABEL: gpu.func @normed_residual_epilogue
// EPILOGUE: %[[C:.+]] = arith.muli %{{.+}}, %c256 : index
// EPILOGUE: %[[LAST:.+]] = arith.subi %[[ROWS:.+]], %c1 : index
// EPILOGUE: %[[RL:.+]] = arith.minui %[[R:.+]], %[[LAST]] : index
// EPILOGUE: %[[CL:.+]] = arith.minui %[[C]], %c1022 : index
// EPILOGUE: %[[RES:.+]] = vector.load %arg4[%[[RL]], %[[CL]]] {alignment = 4 : i64} : memref<?x1024xbf16>, vector<2xbf16>
// EPILOGUE: %[[B:.+]] = vector.load %arg3[%[[CL]]] {alignment = 4 : i64} : memref<1024xbf16>, vector<2xbf16>
// EPILOGUE: %[[INC:.+]] = arith.cmpi ult, %[[C]], %c1024 : index
// EPILOGUE: %[[INR:.+]] = arith.cmpi ult, %[[R]], %[[ROWS]] : index
// EPILOGUE: %[[OK:.+]] = arith.andi %[[INR]], %[[INC]] : i1
// EPILOGUE: scf.if %[[OK]] {
// EPILOGUE: arith.extf %[[B]]
// EPILOGUE: %[[Y:.+]] = arith.truncf %{{.+}} : vector<2xf32> to vector<2xbf16>
// EPILOGUE: arith.extf %[[RES]]
// EPILOGUE: %[[OUT:.+]] = arith.truncf %{{.+}} : vector<2xf32> to vector<2xbf16>
// EPILOGUE: vector.store %[[OUT]], %arg5[%[[R]], %[[C]]]
// dW into its buffer: the old pair loaded first, then old + the product in
// f32, rounded once.
// EPILOGUE-LABEL: gpu.func @dw_acc_bf16_epilogue
// EPILOGUE: %[[OLD:.+]] = vector.load %arg2[
// EPILOGUE: scf.if
// EPILOGUE: %[[OLDF:.+]] = arith.extf %[[OLD]]
// EPILOGUE: %[[SUM:.+]] = arith.addf %[[OLDF]],
// EPILOGUE: %[[R16:.+]] = arith.truncf %[[SUM]]
// EPILOGUE: vector.store %[[R16]], %arg3[
// EPILOGUE-NOT: gpu.func @qk_rope_epilogue

// The TMA-store epilogue: the consumers meet (barrier 8, 256 threads), the
// warpgroup's 64 rows start over the drained stages (1024 + cw · 16384),
// the pair goes, unmasked (the map clips the ends), to chunk
// (j % 8) ^ (row % 8) of its row of 128 bytes, then
// the fence, the warpgroup's barrier, and one thread stores the two
// 64-column boxes (8192 bytes apart) through the output's map.
// TMA-LABEL: gpu.func @gated_tma_store
// TMA: nvvm.barrier id = %c8_i32 number_of_threads = %c256_i32
// TMA: %[[CW:.+]] = arith.index_cast %{{.+}} : index to i32
// TMA: %[[OFF:.+]] = arith.muli %[[CW]], %c16384_i32 : i32
// TMA: %[[BASE:.+]] = arith.addi %c1024_i32, %[[OFF]] : i32
// TMA-NOT: scf.if
// TMA: arith.xori %c0_i32, %{{.+}} : i32
// TMA: arith.muli %{{.+}}, %c128_i32{{.*}} : i32
// TMA: llvm.store %{{.+}} {alignment = 4 : i64} : vector<2xbf16>, !llvm.ptr<3>
// TMA: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// TMA: nvvm.barrier id = %{{.+}} number_of_threads = %c128_i32
// TMA: arith.addi %[[BASE]], %c0_i32 : i32
// TMA: nvvm.cp.async.bulk.tensor.global.shared.cta %arg7,
// TMA: arith.addi %[[BASE]], %c8192_i32 : i32
// TMA: nvvm.cp.async.bulk.tensor.global.shared.cta %arg7,
// TMA: nvvm.cp.async.bulk.commit.group
// TMA: nvvm.cp.async.bulk.wait_group 0 {read}
// An accumulated dW is summed in its old tile's region (from 148480) once
// that tile has landed: no barrier of the consumers.
// TMA-LABEL: gpu.func @dw_acc_bf16_tma_store
// TMA-NOT: id = %c8_i32
// TMA: nvvm.mbarrier.try_wait.parity %{{.+}}, %c0_i32
// TMA: arith.addi %c148480_i32, %{{.+}} : i32
// TMA: llvm.load %{{.+}} {alignment = 4 : i64} : !llvm.ptr<3> -> vector<2xbf16>
// TMA: arith.addf
// TMA: llvm.store
// TMA: nvvm.cp.async.bulk.tensor.global.shared.cta %arg7,
// Two results: dgate's pair in the first 64 KiB tile, dup's in the next
// (65536 bytes on); each result's four 64-column boxes through its own map
// (dgate's %arg8, dup's %arg9), then one commit.
// TMA-LABEL: gpu.func @dx_swiglu_grad_tma_store
// TMA-SAME: %arg8: !llvm.ptr, %arg9: !llvm.ptr, %arg10: !llvm.ptr, %arg11: !llvm.ptr)
// TMA: %[[BASE2:.+]] = arith.addi %c1024_i32, %{{.+}} : i32
// TMA: llvm.store %{{.+}} {alignment = 4 : i64} : vector<2xbf16>, !llvm.ptr<3>
// TMA: arith.addi %c65536_i32, %{{.+}} : i32
// TMA: llvm.store %{{.+}} {alignment = 4 : i64} : vector<2xbf16>, !llvm.ptr<3>
// TMA: nvvm.fence.proxy
// TMA-COUNT-4: nvvm.cp.async.bulk.tensor.global.shared.cta %arg8,
// TMA: arith.addi %[[BASE2]], %c65536_i32 : i32
// TMA-COUNT-4: nvvm.cp.async.bulk.tensor.global.shared.cta %arg9,
// TMA-NEXT: nvvm.cp.async.bulk.commit.group

// wgmma RoPE: rows r0 and r0 + 8 (masked at the rows), the tables' batch
// (0 when they broadcast), each pair rounded as liger.linear does, rotated
// with its partner D/16 = 1 n8 block away (negated in the first half) and
// stored head-major into q [B, 4, T, 16] (head = column / 16).
// ROPE-LABEL: gpu.func @qk_rope_rope
// ROPE: %[[SEQ:.+]] = memref.dim %arg6, %c2 : memref<?x4x?x16xbf16>
// ROPE: scf.if
// ROPE: %[[BATCH:.+]] = arith.divui %{{.+}}, %[[SEQ]] : index
// ROPE: %[[POS:.+]] = arith.remui %{{.+}}, %[[SEQ]] : index
// ROPE: %[[TB:.+]] = memref.dim %arg4, %c0 : memref<1x?x16xbf16>
// ROPE: %[[ONE:.+]] = arith.cmpi eq, %[[TB]], %c1 : index
// ROPE: %[[TROW:.+]] = arith.select %[[ONE]], %c0, %[[BATCH]] : index
// ROPE: arith.extf %{{.+}} : vector<2xbf16> to vector<2xf32>
// ROPE: %[[P1:.+]] = arith.extf %{{.+}} : vector<2xbf16> to vector<2xf32>
// ROPE: arith.negf %[[P1]] : vector<2xf32>
// ROPE: vector.load %arg5[%[[TROW]], %[[POS]], %{{.+}}] {alignment = 4 : i64} : memref<1x?x16xbf16>, vector<2xbf16>
// ROPE: vector.load %arg4[%[[TROW]], %[[POS]], %{{.+}}] {alignment = 4 : i64} : memref<1x?x16xbf16>, vector<2xbf16>
// ROPE: vector.store %{{.+}}, %arg6[%[[BATCH]], %{{.+}}, %[[POS]], %{{.+}}] {alignment = 4 : i64} : memref<?x4x?x16xbf16>, vector<2xbf16>
// mma.sync RoPE: the rounded tile goes through shared memory ([128, 40]
// over the x ring, between two barriers); each thread then reads its pair
// and its partner's (d ± 8).
// ROPE80-LABEL: gpu.func @qk_rope_rope
// ROPE80: %[[EX:.+]] = memref.view %{{.+}}[%c0][] : {{.+}} to memref<128x40xbf16
// ROPE80: gpu.barrier
// ROPE80: vector.store %{{.+}}, %[[EX]][
// ROPE80: gpu.barrier
// ROPE80: scf.if
// ROPE80: arith.remui %{{.+}}, %c16 : index
// ROPE80: arith.cmpi ult, %{{.+}}, %c8 : index
// ROPE80: vector.load %[[EX]][
// ROPE80: vector.store %{{.+}}, %arg6[
