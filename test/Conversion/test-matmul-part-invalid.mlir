// A part the pass does not know is an error naming the parts it does.
// RUN: not liger-opt %s --liger-test-matmul-part=part=prologue -o /dev/null 2>&1 | FileCheck %s
// CHECK: error: liger-test-matmul-part: unknown part 'prologue' (barriers, producer, slice-load, norm-prologue, epilogue, tma-store, rope)

func.func @empty() {
  return
}
