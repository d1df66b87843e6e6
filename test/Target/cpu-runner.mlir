// The CPU runner's contract: results on the success path, and a diagnostic
// plus a non-zero exit for every kind of bad input, never a crash or a read
// out of bounds.
//
// RUN: %python %S/Inputs/make_npy.py %t.x.npy f32 3,8
// RUN: %python %S/Inputs/make_npy.py %t.w.npy f32 8
// RUN: %python %S/Inputs/make_npy.py %t.w9.npy f32 9
// RUN: %python %S/Inputs/make_npy.py %t.xbf.npy bf16 3,8
// RUN: %python %S/Inputs/make_npy.py %t.xu4.npy u4 3,8
// RUN: %python %S/Inputs/make_npy.py %t.trunc.npy f32 3,8 --truncate
// RUN: %python %S/Inputs/make_npy.py %t.magic.npy f32 3,8 --bad-magic
// RUN: %python %S/Inputs/make_npy.py %t.q.npy f32 2,2,3,8
// RUN: %python %S/Inputs/make_npy.py %t.k.npy f32 3,1,3,8
// RUN: %python %S/Inputs/make_npy.py %t.cos.npy f32 1,3,8

// RUN: liger-cpu-runner %s --entry=rms -i %t.x.npy -i %t.w.npy | FileCheck %s --check-prefix=OK
// RUN: liger-cpu-runner %s --entry=rms --specialize-shapes -i %t.x.npy -i %t.w.npy | FileCheck %s --check-prefix=OK
// OK: result #0: 3x8xf32
// OK-NEXT: result #1: 3xf32

// RUN: liger-cpu-runner %s --entry=rms -i %t.x.npy -i %t.w.npy -o %t.y.npy -o %t.r.npy
// RUN: %python -c "import numpy, sys; y = numpy.load(sys.argv[1]); print(y.dtype, y.shape)" %t.y.npy | FileCheck %s --check-prefix=FILE
// FILE: float32 (3, 8)

// RUN: not liger-cpu-runner %s --entry=rms -i %t.x.npy 2>&1 | FileCheck %s --check-prefix=COUNT
// COUNT: error: expects 2 input(s), got 1

// RUN: not liger-cpu-runner %s --entry=rms -i %t.xbf.npy -i %t.w.npy 2>&1 | FileCheck %s --check-prefix=DTYPE
// DTYPE: error: input #0: expected f32 elements for 'tensor<?x8xf32>', got 3x8xbf16

// RUN: not liger-cpu-runner %s --entry=rms -i %t.x.npy -i %t.w9.npy 2>&1 | FileCheck %s --check-prefix=SHAPE
// SHAPE: error: input #1: expected shape [8] for 'tensor<8xf32>', got 9xf32

// RUN: not liger-cpu-runner %s --entry=rms -i %t.w.npy -i %t.w.npy 2>&1 | FileCheck %s --check-prefix=RANK
// RANK: error: input #0: expected shape [?, 8] for 'tensor<?x8xf32>', got 8xf32

// Two dynamic batch sizes that the op needs equal: caught before running.
// RUN: not liger-cpu-runner %s --entry=rope -i %t.q.npy -i %t.k.npy -i %t.cos.npy -i %t.cos.npy 2>&1 | FileCheck %s --check-prefix=ROPE
// ROPE: error: 'liger.rope' op expects 'k' to match 'q' in dimension 0 (batch): 3 vs 2

// RUN: not liger-cpu-runner %s --entry=missing -i %t.x.npy 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: error: no function named '@missing' in the module

// RUN: not liger-cpu-runner %s --entry=scalar_arg -i %t.x.npy -i %t.x.npy 2>&1 | FileCheck %s --check-prefix=SCALAR
// SCALAR: error: argument #0 has type 'f32'; only ranked tensors can be passed

// RUN: not liger-cpu-runner %s --entry=scalar_result -i %t.x.npy 2>&1 | FileCheck %s --check-prefix=SCALAR-RESULT
// SCALAR-RESULT: error: result #0 has type 'index'; the CPU runner returns ranked tensors of bf16, f16, f32, f64, i1, i32 or i64

// RUN: not liger-cpu-runner %s --entry=rms -i %t.xu4.npy -i %t.w.npy 2>&1 | FileCheck %s --check-prefix=BADTYPE
// BADTYPE: xu4.npy: unsupported dtype '<u4'

// RUN: not liger-cpu-runner %s --entry=rms -i %t.trunc.npy -i %t.w.npy 2>&1 | FileCheck %s --check-prefix=TRUNC
// TRUNC: trunc.npy: expected 96 bytes of data for 3x8xf32, found 92

// RUN: not liger-cpu-runner %s --entry=rms -i %t.magic.npy -i %t.w.npy 2>&1 | FileCheck %s --check-prefix=MAGIC
// MAGIC: magic.npy: not a .npy file (bad magic string)

// RUN: not liger-cpu-runner %s --entry=rms -i %t.nonexistent.npy -i %t.w.npy 2>&1 | FileCheck %s --check-prefix=NOFILE
// NOFILE: nonexistent.npy: cannot open the file

// RUN: not liger-cpu-runner %s --entry=rms -i %t.x.npy -i %t.w.npy -o %t.only.npy 2>&1 | FileCheck %s --check-prefix=OUTS
// OUTS: '@rms' returns 2 result(s), but 1 output file(s) were given

func.func @rms(%x: tensor<?x8xf32>, %w: tensor<8xf32>) -> (tensor<?x8xf32>, tensor<?xf32>) {
  %y, %r = liger.rms_norm %x, %w rstd : tensor<?x8xf32>, tensor<8xf32>
  return %y, %r : tensor<?x8xf32>, tensor<?xf32>
}

func.func @rope(%q: tensor<?x2x?x8xf32>, %k: tensor<?x1x?x8xf32>, %c: tensor<1x?x8xf32>, %s: tensor<1x?x8xf32>)
    -> (tensor<?x2x?x8xf32>, tensor<?x1x?x8xf32>) {
  %qo, %ko = liger.rope %q, %k, %c, %s : tensor<?x2x?x8xf32>, tensor<?x1x?x8xf32>, tensor<1x?x8xf32>
  return %qo, %ko : tensor<?x2x?x8xf32>, tensor<?x1x?x8xf32>
}

func.func @scalar_arg(%a: f32, %x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  return %x : tensor<?x8xf32>
}

func.func @scalar_result(%x: tensor<?x8xf32>) -> index {
  %c0 = arith.constant 0 : index
  %d = tensor.dim %x, %c0 : tensor<?x8xf32>
  return %d : index
}
