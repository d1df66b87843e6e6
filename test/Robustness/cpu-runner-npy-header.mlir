// The CPU runner reads .npy headers with a bounded parser: a header it does
// not understand is refused with what was expected where, whatever its
// length (a long field used to overflow the stack in std::regex). The
// fixtures come from Inputs/npy_header.py, one named case each.
//
// RUN: %python %S/Inputs/npy_header.py %t.w.npy good-w

// Versions 1.0, 2.0 and 3.0 and either quote are read.
// RUN: %python %S/Inputs/npy_header.py %t.good.npy good
// RUN: liger-cpu-runner %s --entry=rms -i %t.good.npy -i %t.w.npy | FileCheck %s --check-prefix=OK
// RUN: %python %S/Inputs/npy_header.py %t.good-v2.npy good-v2
// RUN: liger-cpu-runner %s --entry=rms -i %t.good-v2.npy -i %t.w.npy | FileCheck %s --check-prefix=OK
// RUN: %python %S/Inputs/npy_header.py %t.good-v3.npy good-v3
// RUN: liger-cpu-runner %s --entry=rms -i %t.good-v3.npy -i %t.w.npy | FileCheck %s --check-prefix=OK
// RUN: %python %S/Inputs/npy_header.py %t.dq.npy double-quotes
// RUN: liger-cpu-runner %s --entry=rms -i %t.dq.npy -i %t.w.npy | FileCheck %s --check-prefix=OK
// OK: result #0: 3x8xf32

// RUN: %python %S/Inputs/npy_header.py %t.long-descr.npy long-descr
// RUN: not liger-cpu-runner %s --entry=rms -i %t.long-descr.npy -i %t.w.npy 2>&1 | FileCheck %s --check-prefix=LONG-DESCR
// LONG-DESCR: long-descr.npy: unsupported dtype '<<<<<<<<<<<<<<<<...' (60000 characters) (expected one of <u2 (bf16 bits), <f2, <f4, <f8, |b1, <i4, <i8)

// RUN: %python %S/Inputs/npy_header.py %t.long-shape.npy long-shape
// RUN: not liger-cpu-runner %s --entry=rms -i %t.long-shape.npy -i %t.w.npy 2>&1 | FileCheck %s --check-prefix=LONG-SHAPE
// LONG-SHAPE: long-shape.npy: malformed header: more than 64 dimensions

// RUN: %python %S/Inputs/npy_header.py %t.huge-header.npy huge-header
// RUN: not liger-cpu-runner %s --entry=rms -i %t.huge-header.npy -i %t.w.npy 2>&1 | FileCheck %s --check-prefix=HUGE-HEADER
// HUGE-HEADER: huge-header.npy: header of 70068 bytes is longer than the 65536 this reader accepts

// RUN: %python %S/Inputs/npy_header.py %t.version-4.npy version-4
// RUN: not liger-cpu-runner %s --entry=rms -i %t.version-4.npy -i %t.w.npy 2>&1 | FileCheck %s --check-prefix=VERSION-4
// VERSION-4: version-4.npy: unsupported .npy version 4.0 (expected 1.0, 2.0 or 3.0)

// RUN: %python %S/Inputs/npy_header.py %t.version-1.1.npy version-1.1
// RUN: not liger-cpu-runner %s --entry=rms -i %t.version-1.1.npy -i %t.w.npy 2>&1 | FileCheck %s --check-prefix=VERSION-MINOR
// VERSION-MINOR: version-1.1.npy: unsupported .npy version 1.1 (expected 1.0, 2.0 or 3.0)

// RUN: %python %S/Inputs/npy_header.py %t.unknown-key.npy unknown-key
// RUN: not liger-cpu-runner %s --entry=rms -i %t.unknown-key.npy -i %t.w.npy 2>&1 | FileCheck %s --check-prefix=UNKNOWN-KEY
// UNKNOWN-KEY: unknown-key.npy: malformed header: unknown key 'extra' (expected 'descr', 'fortran_order' and 'shape')

// RUN: %python %S/Inputs/npy_header.py %t.duplicate-key.npy duplicate-key
// RUN: not liger-cpu-runner %s --entry=rms -i %t.duplicate-key.npy -i %t.w.npy 2>&1 | FileCheck %s --check-prefix=DUPLICATE-KEY
// DUPLICATE-KEY: duplicate-key.npy: malformed header: key 'descr' appears twice

// RUN: %python %S/Inputs/npy_header.py %t.no-shape.npy no-shape
// RUN: not liger-cpu-runner %s --entry=rms -i %t.no-shape.npy -i %t.w.npy 2>&1 | FileCheck %s --check-prefix=NO-SHAPE
// NO-SHAPE: no-shape.npy: malformed header: no 'shape'

// RUN: %python %S/Inputs/npy_header.py %t.no-brace.npy no-brace
// RUN: not liger-cpu-runner %s --entry=rms -i %t.no-brace.npy -i %t.w.npy 2>&1 | FileCheck %s --check-prefix=NO-BRACE
// NO-BRACE: no-brace.npy: malformed header: expected '{' opening the dict at byte 0, found '''

// RUN: %python %S/Inputs/npy_header.py %t.unterminated.npy unterminated
// RUN: not liger-cpu-runner %s --entry=rms -i %t.unterminated.npy -i %t.w.npy 2>&1 | FileCheck %s --check-prefix=UNTERMINATED
// UNTERMINATED: unterminated.npy: malformed header: unterminated string starting at byte 10

// RUN: %python %S/Inputs/npy_header.py %t.truncated-dict.npy truncated-dict
// RUN: not liger-cpu-runner %s --entry=rms -i %t.truncated-dict.npy -i %t.w.npy 2>&1 | FileCheck %s --check-prefix=TRUNCATED
// TRUNCATED: truncated-dict.npy: malformed header: expected ':' after 'fortran_order' at byte 54, found the end of the header

// RUN: %python %S/Inputs/npy_header.py %t.negative-dim.npy negative-dim
// RUN: not liger-cpu-runner %s --entry=rms -i %t.negative-dim.npy -i %t.w.npy 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// NEGATIVE: negative-dim.npy: malformed header: expected a dimension or ')' at byte 54, found '-'

// RUN: %python %S/Inputs/npy_header.py %t.huge-dim.npy huge-dim
// RUN: not liger-cpu-runner %s --entry=rms -i %t.huge-dim.npy -i %t.w.npy 2>&1 | FileCheck %s --check-prefix=HUGE-DIM
// HUGE-DIM: huge-dim.npy: malformed header: dimension at byte 51 is larger than 2^48

// RUN: %python %S/Inputs/npy_header.py %t.nested-shape.npy nested-shape
// RUN: not liger-cpu-runner %s --entry=rms -i %t.nested-shape.npy -i %t.w.npy 2>&1 | FileCheck %s --check-prefix=NESTED
// NESTED: nested-shape.npy: malformed header: expected a dimension or ')' at byte 51, found '('

// RUN: %python %S/Inputs/npy_header.py %t.bad-bool.npy bad-bool
// RUN: not liger-cpu-runner %s --entry=rms -i %t.bad-bool.npy -i %t.w.npy 2>&1 | FileCheck %s --check-prefix=BAD-BOOL
// BAD-BOOL: bad-bool.npy: malformed header: expected True or False at byte 34, found '0'

// RUN: %python %S/Inputs/npy_header.py %t.trailing.npy trailing
// RUN: not liger-cpu-runner %s --entry=rms -i %t.trailing.npy -i %t.w.npy 2>&1 | FileCheck %s --check-prefix=TRAILING
// TRAILING: trailing.npy: malformed header: unexpected 'x' after the dict

// RUN: %python %S/Inputs/npy_header.py %t.escape.npy escape
// RUN: not liger-cpu-runner %s --entry=rms -i %t.escape.npy -i %t.w.npy 2>&1 | FileCheck %s --check-prefix=ESCAPE
// ESCAPE: escape.npy: malformed header: escape sequence in the string at byte 10 (not supported)

// RUN: %python %S/Inputs/npy_header.py %t.fortran.npy fortran
// RUN: not liger-cpu-runner %s --entry=rms -i %t.fortran.npy -i %t.w.npy 2>&1 | FileCheck %s --check-prefix=FORTRAN
// FORTRAN: fortran.npy: Fortran-ordered arrays are not supported; save a C-ordered copy (numpy.ascontiguousarray)

func.func @rms(%x: tensor<?x8xf32>, %w: tensor<8xf32>) -> tensor<?x8xf32> {
  %y = liger.rms_norm %x, %w : tensor<?x8xf32>, tensor<8xf32>
  return %y : tensor<?x8xf32>
}
