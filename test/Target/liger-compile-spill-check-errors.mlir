// liger-compile's spill check reads the assembler's report (-v) on each
// kernel with a spill fallback. A report it cannot read, a failing run and
// a report that leaves a kernel out are errors, never read as "no spill".
// A report of spills compiles the kernel at its fallback (256 threads).
// The toolkits are stand-ins that run the real assembler except for -v.
// REQUIRES: ptxas
// RUN: %python %S/Inputs/fake_toolkit.py %t.garbled garbled ptxas
// RUN: not liger-compile %s --cuda-toolkit=%t.garbled -o %t.b1 2>&1 | FileCheck %s --check-prefix=GARBLED
// RUN: %python %S/Inputs/fake_toolkit.py %t.fail fail ptxas
// RUN: not liger-compile %s --cuda-toolkit=%t.fail -o %t.b2 2>&1 | FileCheck %s --check-prefix=FAIL
// RUN: %python %S/Inputs/fake_toolkit.py %t.silent silent ptxas
// RUN: not liger-compile %s --cuda-toolkit=%t.silent -o %t.b3 2>&1 | FileCheck %s --check-prefix=SILENT
// RUN: %python %S/Inputs/fake_toolkit.py %t.spills spills ptxas
// RUN: liger-compile %s --cuda-toolkit=%t.spills -o %t.b4
// RUN: FileCheck %s --check-prefix=SPILLS < %t.b4/manifest.json

// GARBLED: error: cannot read ptxas's spill report of softmax_rowwise_0: no bytes stack frame, some bytes spill stores, 0 bytes spill loads
// FAIL: error: ptxas from {{.+}}/bin failed checking 1 kernel(s) for spills
// FAIL-NEXT: ptxas fatal   : out of memory (stand-in)
// SILENT: error: ptxas did not report on kernel softmax_rowwise_0 when checking it for spills
// SPILLS:      "block": [
// SPILLS-NEXT:   256,

func.func @softmax(%x: tensor<?x128256xbf16>) -> tensor<?x128256xbf16> {
  %y = liger.softmax %x : tensor<?x128256xbf16>
  return %y : tensor<?x128256xbf16>
}
