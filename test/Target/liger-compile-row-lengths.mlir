// Rows of every length through the row program, in bf16, f16 and f32:
// RMSNorm, softmax and SwiGLU at 7, 1000, 32001 (a Llama vocabulary plus
// one), 50257 (GPT-2's vocabulary) and 262147 columns. The vector width is
// the widest that divides the row (checkRowVectorWidth); a thread unrolls
// its chunks and keeps them in registers while they fit (at most 64
// chunks, 128 held elements at 256 threads; a program that holds nothing,
// as SwiGLU, at most 8 chunks), with more threads where that makes them
// fit (32001: 512 threads), and loops over them past that (scf.for; SwiGLU
// at 32001 and 50257); the chunks past the row's end are masked either
// way. A looped row its 16-byte chunks do not divide is peeled to them
// (softmax and SwiGLU; not RMSNorm, whose weight is indexed by column
// alone): its full chunks masked at their common length, its few single
// elements (the head and the tail) at their count. Each liger-compile run
// is bounded in time, and ptxas takes every kernel on both targets without
// spills.
// REQUIRES: ptxas
// RUN: timeout 60 liger-compile %s --emit=gpu -o %t.gpu.mlir
// RUN: FileCheck %s --check-prefix=GPU < %t.gpu.mlir
// RUN: timeout 60 liger-compile %s --emit=ptx -o %t.ptx
// RUN: ptxas -arch=sm_90a -v %t.ptx -o %t.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: timeout 60 liger-compile %s --target=sm_80 --emit=ptx -o %t.sm80.ptx
// RUN: ptxas -arch=sm_80 -v %t.sm80.ptx -o %t.sm80.cubin 2>&1 | FileCheck %s --check-prefix=PTXAS

// PTXAS-NOT: {{[1-9][0-9]*}} bytes spill
// PTXAS: Compiling entry function '{{.*}}_rowwise_0'
// PTXAS-NOT: {{[1-9][0-9]*}} bytes spill

// GPU-LABEL: gpu.func @rms_norm_7_bf16_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 32, 1, 1>
//  GPU-SAME:   vector_width = 1
//   GPU-NOT:   scf.for
//       GPU:   arith.cmpi ult, %{{.+}}, %c7
//   GPU-NOT:   scf.for
//       GPU:   gpu.return
// GPU-LABEL: gpu.func @softmax_7_bf16_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 32, 1, 1>
//  GPU-SAME:   vector_width = 1
//   GPU-NOT:   scf.for
//       GPU:   arith.cmpi ult, %{{.+}}, %c7
//   GPU-NOT:   scf.for
//       GPU:   gpu.return
// GPU-LABEL: gpu.func @swiglu_7_bf16_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 32, 1, 1>
//  GPU-SAME:   vector_width = 1
//   GPU-NOT:   scf.for
//       GPU:   arith.cmpi ult, %{{.+}}, %c7
//   GPU-NOT:   scf.for
//       GPU:   gpu.return
// GPU-LABEL: gpu.func @rms_norm_7_f16_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 32, 1, 1>
//  GPU-SAME:   vector_width = 1
//   GPU-NOT:   scf.for
//       GPU:   arith.cmpi ult, %{{.+}}, %c7
//   GPU-NOT:   scf.for
//       GPU:   gpu.return
// GPU-LABEL: gpu.func @softmax_7_f16_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 32, 1, 1>
//  GPU-SAME:   vector_width = 1
//   GPU-NOT:   scf.for
//       GPU:   arith.cmpi ult, %{{.+}}, %c7
//   GPU-NOT:   scf.for
//       GPU:   gpu.return
// GPU-LABEL: gpu.func @swiglu_7_f16_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 32, 1, 1>
//  GPU-SAME:   vector_width = 1
//   GPU-NOT:   scf.for
//       GPU:   arith.cmpi ult, %{{.+}}, %c7
//   GPU-NOT:   scf.for
//       GPU:   gpu.return
// GPU-LABEL: gpu.func @rms_norm_7_f32_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 32, 1, 1>
//  GPU-SAME:   vector_width = 1
//   GPU-NOT:   scf.for
//       GPU:   arith.cmpi ult, %{{.+}}, %c7
//   GPU-NOT:   scf.for
//       GPU:   gpu.return
// GPU-LABEL: gpu.func @softmax_7_f32_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 32, 1, 1>
//  GPU-SAME:   vector_width = 1
//   GPU-NOT:   scf.for
//       GPU:   arith.cmpi ult, %{{.+}}, %c7
//   GPU-NOT:   scf.for
//       GPU:   gpu.return
// GPU-LABEL: gpu.func @swiglu_7_f32_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 32, 1, 1>
//  GPU-SAME:   vector_width = 1
//   GPU-NOT:   scf.for
//       GPU:   arith.cmpi ult, %{{.+}}, %c7
//   GPU-NOT:   scf.for
//       GPU:   gpu.return
// GPU-LABEL: gpu.func @rms_norm_1000_bf16_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 128, 1, 1>
//  GPU-SAME:   vector_width = 8
//   GPU-NOT:   scf.for
//       GPU:   arith.cmpi ult, %{{.+}}, %c1000
//   GPU-NOT:   scf.for
//       GPU:   gpu.return
// GPU-LABEL: gpu.func @softmax_1000_bf16_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 128, 1, 1>
//  GPU-SAME:   vector_width = 8
//   GPU-NOT:   scf.for
//       GPU:   arith.cmpi ult, %{{.+}}, %c1000
//   GPU-NOT:   scf.for
//       GPU:   gpu.return
// GPU-LABEL: gpu.func @swiglu_1000_bf16_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 128, 1, 1>
//  GPU-SAME:   vector_width = 8
//   GPU-NOT:   scf.for
//       GPU:   arith.cmpi ult, %{{.+}}, %c1000
//   GPU-NOT:   scf.for
//       GPU:   gpu.return
// GPU-LABEL: gpu.func @rms_norm_1000_f16_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 128, 1, 1>
//  GPU-SAME:   vector_width = 8
//   GPU-NOT:   scf.for
//       GPU:   arith.cmpi ult, %{{.+}}, %c1000
//   GPU-NOT:   scf.for
//       GPU:   gpu.return
// GPU-LABEL: gpu.func @softmax_1000_f16_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 128, 1, 1>
//  GPU-SAME:   vector_width = 8
//   GPU-NOT:   scf.for
//       GPU:   arith.cmpi ult, %{{.+}}, %c1000
//   GPU-NOT:   scf.for
//       GPU:   gpu.return
// GPU-LABEL: gpu.func @swiglu_1000_f16_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 128, 1, 1>
//  GPU-SAME:   vector_width = 8
//   GPU-NOT:   scf.for
//       GPU:   arith.cmpi ult, %{{.+}}, %c1000
//   GPU-NOT:   scf.for
//       GPU:   gpu.return
// GPU-LABEL: gpu.func @rms_norm_1000_f32_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 256, 1, 1>
//  GPU-SAME:   vector_width = 4
//   GPU-NOT:   scf.for
//       GPU:   arith.cmpi ult, %{{.+}}, %c1000
//   GPU-NOT:   scf.for
//       GPU:   gpu.return
// GPU-LABEL: gpu.func @softmax_1000_f32_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 256, 1, 1>
//  GPU-SAME:   vector_width = 4
//   GPU-NOT:   scf.for
//       GPU:   arith.cmpi ult, %{{.+}}, %c1000
//   GPU-NOT:   scf.for
//       GPU:   gpu.return
// GPU-LABEL: gpu.func @swiglu_1000_f32_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 256, 1, 1>
//  GPU-SAME:   vector_width = 4
//   GPU-NOT:   scf.for
//       GPU:   arith.cmpi ult, %{{.+}}, %c1000
//   GPU-NOT:   scf.for
//       GPU:   gpu.return
// GPU-LABEL: gpu.func @rms_norm_32001_bf16_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 512, 1, 1>
//  GPU-SAME:   vector_width = 1
//   GPU-NOT:   scf.for
//       GPU:   arith.cmpi ult, %{{.+}}, %c32001
//   GPU-NOT:   scf.for
//       GPU:   gpu.return
// GPU-LABEL: gpu.func @softmax_32001_bf16_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 512, 1, 1>
//  GPU-SAME:   vector_width = 1
//   GPU-NOT:   scf.for
//       GPU:   arith.cmpi ult, %{{.+}}, %c32001
//   GPU-NOT:   scf.for
//       GPU:   gpu.return
// GPU-LABEL: gpu.func @swiglu_32001_bf16_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 512, 1, 1>
//  GPU-SAME:   vector_width = 8
//       GPU:   scf.for
//       GPU:   arith.cmpi ult, %{{.+}}, %c31992
//       GPU:   arith.cmpi ult, %thread_id_x, %c9
//       GPU:   gpu.return
// GPU-LABEL: gpu.func @rms_norm_32001_f16_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 512, 1, 1>
//  GPU-SAME:   vector_width = 1
//   GPU-NOT:   scf.for
//       GPU:   arith.cmpi ult, %{{.+}}, %c32001
//   GPU-NOT:   scf.for
//       GPU:   gpu.return
// GPU-LABEL: gpu.func @softmax_32001_f16_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 512, 1, 1>
//  GPU-SAME:   vector_width = 1
//   GPU-NOT:   scf.for
//       GPU:   arith.cmpi ult, %{{.+}}, %c32001
//   GPU-NOT:   scf.for
//       GPU:   gpu.return
// GPU-LABEL: gpu.func @swiglu_32001_f16_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 512, 1, 1>
//  GPU-SAME:   vector_width = 8
//       GPU:   scf.for
//       GPU:   arith.cmpi ult, %{{.+}}, %c31992
//       GPU:   arith.cmpi ult, %thread_id_x, %c9
//       GPU:   gpu.return
// GPU-LABEL: gpu.func @rms_norm_32001_f32_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 512, 1, 1>
//  GPU-SAME:   vector_width = 1
//   GPU-NOT:   scf.for
//       GPU:   arith.cmpi ult, %{{.+}}, %c32001
//   GPU-NOT:   scf.for
//       GPU:   gpu.return
// GPU-LABEL: gpu.func @softmax_32001_f32_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 512, 1, 1>
//  GPU-SAME:   vector_width = 1
//   GPU-NOT:   scf.for
//       GPU:   arith.cmpi ult, %{{.+}}, %c32001
//   GPU-NOT:   scf.for
//       GPU:   gpu.return
// GPU-LABEL: gpu.func @swiglu_32001_f32_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 512, 1, 1>
//  GPU-SAME:   vector_width = 4
//       GPU:   scf.for
//       GPU:   arith.cmpi ult, %{{.+}}, %c31996
//       GPU:   arith.cmpi ult, %thread_id_x, %c5
//       GPU:   gpu.return
// GPU-LABEL: gpu.func @rms_norm_50257_bf16_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 512, 1, 1>
//  GPU-SAME:   vector_width = 1
//       GPU:   scf.for
//       GPU:   arith.cmpi ult, %{{.+}}, %c50257
//       GPU:   gpu.return
// GPU-LABEL: gpu.func @softmax_50257_bf16_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 512, 1, 1>
//  GPU-SAME:   vector_width = 8
//       GPU:   scf.for
//       GPU:   arith.cmpi ult, %{{.+}}, %c50248
//       GPU:   arith.cmpi ult, %thread_id_x, %c9
//       GPU:   gpu.return
// GPU-LABEL: gpu.func @swiglu_50257_bf16_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 512, 1, 1>
//  GPU-SAME:   vector_width = 8
//       GPU:   scf.for
//       GPU:   arith.cmpi ult, %{{.+}}, %c50248
//       GPU:   arith.cmpi ult, %thread_id_x, %c9
//       GPU:   gpu.return
// GPU-LABEL: gpu.func @rms_norm_50257_f16_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 512, 1, 1>
//  GPU-SAME:   vector_width = 1
//       GPU:   scf.for
//       GPU:   arith.cmpi ult, %{{.+}}, %c50257
//       GPU:   gpu.return
// GPU-LABEL: gpu.func @softmax_50257_f16_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 512, 1, 1>
//  GPU-SAME:   vector_width = 8
//       GPU:   scf.for
//       GPU:   arith.cmpi ult, %{{.+}}, %c50248
//       GPU:   arith.cmpi ult, %thread_id_x, %c9
//       GPU:   gpu.return
// GPU-LABEL: gpu.func @swiglu_50257_f16_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 512, 1, 1>
//  GPU-SAME:   vector_width = 8
//       GPU:   scf.for
//       GPU:   arith.cmpi ult, %{{.+}}, %c50248
//       GPU:   arith.cmpi ult, %thread_id_x, %c9
//       GPU:   gpu.return
// GPU-LABEL: gpu.func @rms_norm_50257_f32_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 512, 1, 1>
//  GPU-SAME:   vector_width = 1
//       GPU:   scf.for
//       GPU:   arith.cmpi ult, %{{.+}}, %c50257
//       GPU:   gpu.return
// GPU-LABEL: gpu.func @softmax_50257_f32_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 512, 1, 1>
//  GPU-SAME:   vector_width = 4
//       GPU:   scf.for
//       GPU:   arith.cmpi ult, %{{.+}}, %c50252
//       GPU:   arith.cmpi ult, %thread_id_x, %c5
//       GPU:   gpu.return
// GPU-LABEL: gpu.func @swiglu_50257_f32_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 512, 1, 1>
//  GPU-SAME:   vector_width = 4
//       GPU:   scf.for
//       GPU:   arith.cmpi ult, %{{.+}}, %c50252
//       GPU:   arith.cmpi ult, %thread_id_x, %c5
//       GPU:   gpu.return
// GPU-LABEL: gpu.func @rms_norm_262147_bf16_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 512, 1, 1>
//  GPU-SAME:   vector_width = 1
//       GPU:   scf.for
//       GPU:   arith.cmpi ult, %{{.+}}, %c262147
//       GPU:   gpu.return
// GPU-LABEL: gpu.func @softmax_262147_bf16_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 512, 1, 1>
//  GPU-SAME:   vector_width = 8
//       GPU:   scf.for
//       GPU:   arith.cmpi ult, %{{.+}}, %c262136
//       GPU:   arith.cmpi ult, %thread_id_x, %c11
//       GPU:   gpu.return
// GPU-LABEL: gpu.func @swiglu_262147_bf16_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 512, 1, 1>
//  GPU-SAME:   vector_width = 8
//       GPU:   scf.for
//       GPU:   arith.cmpi ult, %{{.+}}, %c262136
//       GPU:   arith.cmpi ult, %thread_id_x, %c11
//       GPU:   gpu.return
// GPU-LABEL: gpu.func @rms_norm_262147_f16_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 512, 1, 1>
//  GPU-SAME:   vector_width = 1
//       GPU:   scf.for
//       GPU:   arith.cmpi ult, %{{.+}}, %c262147
//       GPU:   gpu.return
// GPU-LABEL: gpu.func @softmax_262147_f16_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 512, 1, 1>
//  GPU-SAME:   vector_width = 8
//       GPU:   scf.for
//       GPU:   arith.cmpi ult, %{{.+}}, %c262136
//       GPU:   arith.cmpi ult, %thread_id_x, %c11
//       GPU:   gpu.return
// GPU-LABEL: gpu.func @swiglu_262147_f16_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 512, 1, 1>
//  GPU-SAME:   vector_width = 8
//       GPU:   scf.for
//       GPU:   arith.cmpi ult, %{{.+}}, %c262136
//       GPU:   arith.cmpi ult, %thread_id_x, %c11
//       GPU:   gpu.return
// GPU-LABEL: gpu.func @rms_norm_262147_f32_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 512, 1, 1>
//  GPU-SAME:   vector_width = 1
//       GPU:   scf.for
//       GPU:   arith.cmpi ult, %{{.+}}, %c262147
//       GPU:   gpu.return
// GPU-LABEL: gpu.func @softmax_262147_f32_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 512, 1, 1>
//  GPU-SAME:   vector_width = 4
//       GPU:   scf.for
//       GPU:   arith.cmpi ult, %thread_id_x, %c3
//       GPU:   gpu.return
// GPU-LABEL: gpu.func @swiglu_262147_f32_rowwise_0(
//  GPU-SAME:   known_block_size = array<i32: 512, 1, 1>
//  GPU-SAME:   vector_width = 4
//       GPU:   scf.for
//       GPU:   arith.cmpi ult, %thread_id_x, %c3
//       GPU:   gpu.return

func.func @rms_norm_7_bf16(%x: tensor<?x7xbf16>, %w: tensor<7xbf16>) -> tensor<?x7xbf16> {
  %y = liger.rms_norm %x, %w eps = 1.0e-6 : tensor<?x7xbf16>, tensor<7xbf16>
  return %y : tensor<?x7xbf16>
}

func.func @softmax_7_bf16(%x: tensor<?x7xbf16>) -> tensor<?x7xbf16> {
  %y = liger.softmax %x : tensor<?x7xbf16>
  return %y : tensor<?x7xbf16>
}

func.func @swiglu_7_bf16(%g: tensor<?x7xbf16>, %u: tensor<?x7xbf16>) -> tensor<?x7xbf16> {
  %y = liger.swiglu %g, %u : tensor<?x7xbf16>
  return %y : tensor<?x7xbf16>
}

func.func @rms_norm_7_f16(%x: tensor<?x7xf16>, %w: tensor<7xf16>) -> tensor<?x7xf16> {
  %y = liger.rms_norm %x, %w eps = 1.0e-6 : tensor<?x7xf16>, tensor<7xf16>
  return %y : tensor<?x7xf16>
}

func.func @softmax_7_f16(%x: tensor<?x7xf16>) -> tensor<?x7xf16> {
  %y = liger.softmax %x : tensor<?x7xf16>
  return %y : tensor<?x7xf16>
}

func.func @swiglu_7_f16(%g: tensor<?x7xf16>, %u: tensor<?x7xf16>) -> tensor<?x7xf16> {
  %y = liger.swiglu %g, %u : tensor<?x7xf16>
  return %y : tensor<?x7xf16>
}

func.func @rms_norm_7_f32(%x: tensor<?x7xf32>, %w: tensor<7xf32>) -> tensor<?x7xf32> {
  %y = liger.rms_norm %x, %w eps = 1.0e-6 : tensor<?x7xf32>, tensor<7xf32>
  return %y : tensor<?x7xf32>
}

func.func @softmax_7_f32(%x: tensor<?x7xf32>) -> tensor<?x7xf32> {
  %y = liger.softmax %x : tensor<?x7xf32>
  return %y : tensor<?x7xf32>
}

func.func @swiglu_7_f32(%g: tensor<?x7xf32>, %u: tensor<?x7xf32>) -> tensor<?x7xf32> {
  %y = liger.swiglu %g, %u : tensor<?x7xf32>
  return %y : tensor<?x7xf32>
}

func.func @rms_norm_1000_bf16(%x: tensor<?x1000xbf16>, %w: tensor<1000xbf16>) -> tensor<?x1000xbf16> {
  %y = liger.rms_norm %x, %w eps = 1.0e-6 : tensor<?x1000xbf16>, tensor<1000xbf16>
  return %y : tensor<?x1000xbf16>
}

func.func @softmax_1000_bf16(%x: tensor<?x1000xbf16>) -> tensor<?x1000xbf16> {
  %y = liger.softmax %x : tensor<?x1000xbf16>
  return %y : tensor<?x1000xbf16>
}

func.func @swiglu_1000_bf16(%g: tensor<?x1000xbf16>, %u: tensor<?x1000xbf16>) -> tensor<?x1000xbf16> {
  %y = liger.swiglu %g, %u : tensor<?x1000xbf16>
  return %y : tensor<?x1000xbf16>
}

func.func @rms_norm_1000_f16(%x: tensor<?x1000xf16>, %w: tensor<1000xf16>) -> tensor<?x1000xf16> {
  %y = liger.rms_norm %x, %w eps = 1.0e-6 : tensor<?x1000xf16>, tensor<1000xf16>
  return %y : tensor<?x1000xf16>
}

func.func @softmax_1000_f16(%x: tensor<?x1000xf16>) -> tensor<?x1000xf16> {
  %y = liger.softmax %x : tensor<?x1000xf16>
  return %y : tensor<?x1000xf16>
}

func.func @swiglu_1000_f16(%g: tensor<?x1000xf16>, %u: tensor<?x1000xf16>) -> tensor<?x1000xf16> {
  %y = liger.swiglu %g, %u : tensor<?x1000xf16>
  return %y : tensor<?x1000xf16>
}

func.func @rms_norm_1000_f32(%x: tensor<?x1000xf32>, %w: tensor<1000xf32>) -> tensor<?x1000xf32> {
  %y = liger.rms_norm %x, %w eps = 1.0e-6 : tensor<?x1000xf32>, tensor<1000xf32>
  return %y : tensor<?x1000xf32>
}

func.func @softmax_1000_f32(%x: tensor<?x1000xf32>) -> tensor<?x1000xf32> {
  %y = liger.softmax %x : tensor<?x1000xf32>
  return %y : tensor<?x1000xf32>
}

func.func @swiglu_1000_f32(%g: tensor<?x1000xf32>, %u: tensor<?x1000xf32>) -> tensor<?x1000xf32> {
  %y = liger.swiglu %g, %u : tensor<?x1000xf32>
  return %y : tensor<?x1000xf32>
}

func.func @rms_norm_32001_bf16(%x: tensor<?x32001xbf16>, %w: tensor<32001xbf16>) -> tensor<?x32001xbf16> {
  %y = liger.rms_norm %x, %w eps = 1.0e-6 : tensor<?x32001xbf16>, tensor<32001xbf16>
  return %y : tensor<?x32001xbf16>
}

func.func @softmax_32001_bf16(%x: tensor<?x32001xbf16>) -> tensor<?x32001xbf16> {
  %y = liger.softmax %x : tensor<?x32001xbf16>
  return %y : tensor<?x32001xbf16>
}

func.func @swiglu_32001_bf16(%g: tensor<?x32001xbf16>, %u: tensor<?x32001xbf16>) -> tensor<?x32001xbf16> {
  %y = liger.swiglu %g, %u : tensor<?x32001xbf16>
  return %y : tensor<?x32001xbf16>
}

func.func @rms_norm_32001_f16(%x: tensor<?x32001xf16>, %w: tensor<32001xf16>) -> tensor<?x32001xf16> {
  %y = liger.rms_norm %x, %w eps = 1.0e-6 : tensor<?x32001xf16>, tensor<32001xf16>
  return %y : tensor<?x32001xf16>
}

func.func @softmax_32001_f16(%x: tensor<?x32001xf16>) -> tensor<?x32001xf16> {
  %y = liger.softmax %x : tensor<?x32001xf16>
  return %y : tensor<?x32001xf16>
}

func.func @swiglu_32001_f16(%g: tensor<?x32001xf16>, %u: tensor<?x32001xf16>) -> tensor<?x32001xf16> {
  %y = liger.swiglu %g, %u : tensor<?x32001xf16>
  return %y : tensor<?x32001xf16>
}

func.func @rms_norm_32001_f32(%x: tensor<?x32001xf32>, %w: tensor<32001xf32>) -> tensor<?x32001xf32> {
  %y = liger.rms_norm %x, %w eps = 1.0e-6 : tensor<?x32001xf32>, tensor<32001xf32>
  return %y : tensor<?x32001xf32>
}

func.func @softmax_32001_f32(%x: tensor<?x32001xf32>) -> tensor<?x32001xf32> {
  %y = liger.softmax %x : tensor<?x32001xf32>
  return %y : tensor<?x32001xf32>
}

func.func @swiglu_32001_f32(%g: tensor<?x32001xf32>, %u: tensor<?x32001xf32>) -> tensor<?x32001xf32> {
  %y = liger.swiglu %g, %u : tensor<?x32001xf32>
  return %y : tensor<?x32001xf32>
}

func.func @rms_norm_50257_bf16(%x: tensor<?x50257xbf16>, %w: tensor<50257xbf16>) -> tensor<?x50257xbf16> {
  %y = liger.rms_norm %x, %w eps = 1.0e-6 : tensor<?x50257xbf16>, tensor<50257xbf16>
  return %y : tensor<?x50257xbf16>
}

func.func @softmax_50257_bf16(%x: tensor<?x50257xbf16>) -> tensor<?x50257xbf16> {
  %y = liger.softmax %x : tensor<?x50257xbf16>
  return %y : tensor<?x50257xbf16>
}

func.func @swiglu_50257_bf16(%g: tensor<?x50257xbf16>, %u: tensor<?x50257xbf16>) -> tensor<?x50257xbf16> {
  %y = liger.swiglu %g, %u : tensor<?x50257xbf16>
  return %y : tensor<?x50257xbf16>
}

func.func @rms_norm_50257_f16(%x: tensor<?x50257xf16>, %w: tensor<50257xf16>) -> tensor<?x50257xf16> {
  %y = liger.rms_norm %x, %w eps = 1.0e-6 : tensor<?x50257xf16>, tensor<50257xf16>
  return %y : tensor<?x50257xf16>
}

func.func @softmax_50257_f16(%x: tensor<?x50257xf16>) -> tensor<?x50257xf16> {
  %y = liger.softmax %x : tensor<?x50257xf16>
  return %y : tensor<?x50257xf16>
}

func.func @swiglu_50257_f16(%g: tensor<?x50257xf16>, %u: tensor<?x50257xf16>) -> tensor<?x50257xf16> {
  %y = liger.swiglu %g, %u : tensor<?x50257xf16>
  return %y : tensor<?x50257xf16>
}

func.func @rms_norm_50257_f32(%x: tensor<?x50257xf32>, %w: tensor<50257xf32>) -> tensor<?x50257xf32> {
  %y = liger.rms_norm %x, %w eps = 1.0e-6 : tensor<?x50257xf32>, tensor<50257xf32>
  return %y : tensor<?x50257xf32>
}

func.func @softmax_50257_f32(%x: tensor<?x50257xf32>) -> tensor<?x50257xf32> {
  %y = liger.softmax %x : tensor<?x50257xf32>
  return %y : tensor<?x50257xf32>
}

func.func @swiglu_50257_f32(%g: tensor<?x50257xf32>, %u: tensor<?x50257xf32>) -> tensor<?x50257xf32> {
  %y = liger.swiglu %g, %u : tensor<?x50257xf32>
  return %y : tensor<?x50257xf32>
}

func.func @rms_norm_262147_bf16(%x: tensor<?x262147xbf16>, %w: tensor<262147xbf16>) -> tensor<?x262147xbf16> {
  %y = liger.rms_norm %x, %w eps = 1.0e-6 : tensor<?x262147xbf16>, tensor<262147xbf16>
  return %y : tensor<?x262147xbf16>
}

func.func @softmax_262147_bf16(%x: tensor<?x262147xbf16>) -> tensor<?x262147xbf16> {
  %y = liger.softmax %x : tensor<?x262147xbf16>
  return %y : tensor<?x262147xbf16>
}

func.func @swiglu_262147_bf16(%g: tensor<?x262147xbf16>, %u: tensor<?x262147xbf16>) -> tensor<?x262147xbf16> {
  %y = liger.swiglu %g, %u : tensor<?x262147xbf16>
  return %y : tensor<?x262147xbf16>
}

func.func @rms_norm_262147_f16(%x: tensor<?x262147xf16>, %w: tensor<262147xf16>) -> tensor<?x262147xf16> {
  %y = liger.rms_norm %x, %w eps = 1.0e-6 : tensor<?x262147xf16>, tensor<262147xf16>
  return %y : tensor<?x262147xf16>
}

func.func @softmax_262147_f16(%x: tensor<?x262147xf16>) -> tensor<?x262147xf16> {
  %y = liger.softmax %x : tensor<?x262147xf16>
  return %y : tensor<?x262147xf16>
}

func.func @swiglu_262147_f16(%g: tensor<?x262147xf16>, %u: tensor<?x262147xf16>) -> tensor<?x262147xf16> {
  %y = liger.swiglu %g, %u : tensor<?x262147xf16>
  return %y : tensor<?x262147xf16>
}

func.func @rms_norm_262147_f32(%x: tensor<?x262147xf32>, %w: tensor<262147xf32>) -> tensor<?x262147xf32> {
  %y = liger.rms_norm %x, %w eps = 1.0e-6 : tensor<?x262147xf32>, tensor<262147xf32>
  return %y : tensor<?x262147xf32>
}

func.func @softmax_262147_f32(%x: tensor<?x262147xf32>) -> tensor<?x262147xf32> {
  %y = liger.softmax %x : tensor<?x262147xf32>
  return %y : tensor<?x262147xf32>
}

func.func @swiglu_262147_f32(%g: tensor<?x262147xf32>, %u: tensor<?x262147xf32>) -> tensor<?x262147xf32> {
  %y = liger.swiglu %g, %u : tensor<?x262147xf32>
  return %y : tensor<?x262147xf32>
}
