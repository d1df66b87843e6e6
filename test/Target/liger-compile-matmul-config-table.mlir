// liger-compile --matmul-config-table: a matmul group that an entry of the
// table matches compiles with the entry's tile (here 128 x 64 pingpong for
// the 1024-wide projection: one CTA per SM, 64-column tiles), the others
// with the default rule's (the 4096-wide projection: 128 x 256,
// data-parallel, 16 column tiles). A table that cannot be used is refused
// before anything compiles, and no bundle is written.
// REQUIRES: ptxas
// RUN: rm -rf %t && split-file %s %t
// RUN: liger-compile %t/proj.mlir --matmul-config-table=%t/table.json -o %t/out.bundle 2>&1 | FileCheck %s --check-prefix=OUT
// RUN: FileCheck %s --check-prefix=MANIFEST < %t/out.bundle/manifest.json
// RUN: FileCheck %s --check-prefix=PTX < %t/out.bundle/liger_kernels.sm_90a.ptx
// RUN: not liger-compile %t/proj.mlir --matmul-config-table=%t/table.json --no-matmul-kernels -o %t/off.bundle 2>&1 | FileCheck %s --check-prefix=OFF
// --no-fuse still compiles the matmul groups a module holds (here the lone
// projections, each its own group), with the table:
// RUN: liger-compile %t/proj.mlir --matmul-config-table=%t/table.json --no-fuse -o %t/nofuse.bundle
// RUN: FileCheck %s --check-prefix=MANIFEST < %t/nofuse.bundle/manifest.json
// RUN: not liger-compile %t/proj.mlir --matmul-config-table=%t/table.json --matmul-schedule=data-parallel -o %t/off.bundle 2>&1 | FileCheck %s --check-prefix=BOTH
// RUN: not liger-compile %t/proj.mlir --matmul-config-table=%t/bad.json -o %t/bad.bundle 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not ls %t/off.bundle %t/bad.bundle

// OUT-NOT: warning
// OUT: liger-compile: 2 kernels for sm_90a
// MANIFEST: "function": "kv",
// MANIFEST-NEXT: "grid": [
// MANIFEST-NEXT: "sms",
// MANIFEST: "function": "o",
// MANIFEST-NEXT: "grid": [
// MANIFEST-NEXT: 16,
// MANIFEST-NEXT: "rows/128",
// PTX-LABEL: .entry kv_matmul_0(
// PTX: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16
// PTX-LABEL: .entry o_matmul_0(
// PTX: wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16
// OFF: liger-compile: --matmul-config-table chooses how matmul groups compile, which --no-matmul-kernels leaves uncompiled
// BOTH: liger-compile: --matmul-schedule and --matmul-config-table both choose the configuration of matmul groups: give one (a table entry states its schedule)
// BAD: liger-compile: matmul configuration table {{.*}}bad.json: entry 0: config: 'stages' must be a positive integer

//--- table.json
{"version": 1,
 "entries": [
  {"match": {"chip": "sm_90a", "body": "projection", "k": 4096, "widths": [1024]},
   "config": {"tile_m": 128, "tile_n": 64, "schedule": "pingpong"}}]}
//--- bad.json
{"version": 1, "entries": [{"match": {}, "config": {"stages": -1}}]}
//--- proj.mlir
func.func @kv(%x: tensor<?x4096xbf16>, %w: tensor<1024x4096xbf16>) -> tensor<?x1024xbf16> {
  %y = liger.linear %x, %w : tensor<?x4096xbf16>, tensor<1024x4096xbf16>
  return %y : tensor<?x1024xbf16>
}
func.func @o(%x: tensor<?x4096xbf16>, %w: tensor<4096x4096xbf16>) -> tensor<?x4096xbf16> {
  %y = liger.linear %x, %w : tensor<?x4096xbf16>, tensor<4096x4096xbf16>
  return %y : tensor<?x4096xbf16>
}
