// A function that returns one value twice (or whose results the pipeline
// folds into one buffer, as the two identical halves of a RoPE of q with
// itself) gives the CPU runner one buffer for two results: both results are
// read before the buffer is freed. 8192 x 8 f32 (256 KiB) is a buffer the
// allocator returns to the system when freed, so reading it after a free
// fails at once.
//
// RUN: %python %S/Inputs/npy_header.py %t.x.npy x-8192x8
// RUN: liger-cpu-runner %s --entry=twice -i %t.x.npy -o %t.a.npy -o %t.b.npy
// RUN: %python %S/Inputs/check_silu.py %t.x.npy %t.a.npy %t.b.npy | FileCheck %s
// CHECK: ok

func.func @twice(%x: tensor<?x8xf32>) -> (tensor<?x8xf32>, tensor<?x8xf32>) {
  %y = liger.silu %x : tensor<?x8xf32>
  return %y, %y : tensor<?x8xf32>, tensor<?x8xf32>
}
