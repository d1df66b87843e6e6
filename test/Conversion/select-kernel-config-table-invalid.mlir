// A matmul configuration table is untrusted input: each rule of its format
// (MatmulConfigTable.cpp) has a case here, failing before any group is
// configured, with the file, the entry and the field named. An entry that
// matches a group it does not fit is an error on the group naming the entry.
// RUN: rm -rf %t && split-file %s %t
// RUN: not liger-opt %t/groups.mlir --liger-select-kernel-config="matmul-config-table=%t/absent.json" 2>&1 | FileCheck %s --check-prefix=ABSENT
// RUN: not liger-opt %t/groups.mlir --liger-select-kernel-config="matmul-config-table=%t/text.json" 2>&1 | FileCheck %s --check-prefix=TEXT
// RUN: not liger-opt %t/groups.mlir --liger-select-kernel-config="matmul-config-table=%t/list.json" 2>&1 | FileCheck %s --check-prefix=LIST
// RUN: not liger-opt %t/groups.mlir --liger-select-kernel-config="matmul-config-table=%t/noversion.json" 2>&1 | FileCheck %s --check-prefix=NOVERSION
// RUN: not liger-opt %t/groups.mlir --liger-select-kernel-config="matmul-config-table=%t/version2.json" 2>&1 | FileCheck %s --check-prefix=VERSION2
// RUN: not liger-opt %t/groups.mlir --liger-select-kernel-config="matmul-config-table=%t/toplevel.json" 2>&1 | FileCheck %s --check-prefix=TOPLEVEL
// RUN: not liger-opt %t/groups.mlir --liger-select-kernel-config="matmul-config-table=%t/entries.json" 2>&1 | FileCheck %s --check-prefix=ENTRIES
// RUN: not liger-opt %t/groups.mlir --liger-select-kernel-config="matmul-config-table=%t/entry.json" 2>&1 | FileCheck %s --check-prefix=ENTRY
// RUN: not liger-opt %t/groups.mlir --liger-select-kernel-config="matmul-config-table=%t/noconfig.json" 2>&1 | FileCheck %s --check-prefix=NOCONFIG
// RUN: not liger-opt %t/groups.mlir --liger-select-kernel-config="matmul-config-table=%t/matchfield.json" 2>&1 | FileCheck %s --check-prefix=MATCHFIELD
// RUN: not liger-opt %t/groups.mlir --liger-select-kernel-config="matmul-config-table=%t/configfield.json" 2>&1 | FileCheck %s --check-prefix=CONFIGFIELD
// RUN: not liger-opt %t/groups.mlir --liger-select-kernel-config="matmul-config-table=%t/chip.json" 2>&1 | FileCheck %s --check-prefix=CHIP
// RUN: not liger-opt %t/groups.mlir --liger-select-kernel-config="matmul-config-table=%t/body.json" 2>&1 | FileCheck %s --check-prefix=BODY
// RUN: not liger-opt %t/groups.mlir --liger-select-kernel-config="matmul-config-table=%t/dtype.json" 2>&1 | FileCheck %s --check-prefix=DTYPE
// RUN: not liger-opt %t/groups.mlir --liger-select-kernel-config="matmul-config-table=%t/k.json" 2>&1 | FileCheck %s --check-prefix=K
// RUN: not liger-opt %t/groups.mlir --liger-select-kernel-config="matmul-config-table=%t/widths.json" 2>&1 | FileCheck %s --check-prefix=WIDTHS
// RUN: not liger-opt %t/groups.mlir --liger-select-kernel-config="matmul-config-table=%t/norm.json" 2>&1 | FileCheck %s --check-prefix=NORM
// RUN: not liger-opt %t/groups.mlir --liger-select-kernel-config="matmul-config-table=%t/transposed.json" 2>&1 | FileCheck %s --check-prefix=TRANSPOSED
// RUN: not liger-opt %t/groups.mlir --liger-select-kernel-config="matmul-config-table=%t/rank.json" 2>&1 | FileCheck %s --check-prefix=RANK
// RUN: not liger-opt %t/groups.mlir --liger-select-kernel-config="matmul-config-table=%t/accumulate.json" 2>&1 | FileCheck %s --check-prefix=ACCUMULATE
// RUN: not liger-opt %t/groups.mlir --liger-select-kernel-config="matmul-config-table=%t/bounds.json" 2>&1 | FileCheck %s --check-prefix=BOUNDS
// RUN: not liger-opt %t/groups.mlir --liger-select-kernel-config="matmul-config-table=%t/tile.json" 2>&1 | FileCheck %s --check-prefix=TILE
// RUN: not liger-opt %t/groups.mlir --liger-select-kernel-config="matmul-config-table=%t/schedule.json" 2>&1 | FileCheck %s --check-prefix=SCHEDULE
// RUN: not liger-opt %t/groups.mlir --liger-select-kernel-config="matmul-config-table=%t/largetile.json" 2>&1 | FileCheck %s --check-prefix=LARGETILE
// RUN: not liger-opt %t/groups.mlir --liger-select-kernel-config="matmul-config-table=%t/dwk.json" 2>&1 | FileCheck %s --check-prefix=DWK
// Deep nesting is refused before the (recursive) parser sees it.
// RUN: %python -c "print('[' * 100000 + ']' * 100000)" > %t/deep.json
// RUN: not liger-opt %t/groups.mlir --liger-select-kernel-config="matmul-config-table=%t/deep.json" 2>&1 | FileCheck %s --check-prefix=DEEP
// RUN: not liger-opt %t/groups.mlir --liger-select-kernel-config="matmul-config-table=%t/smem.json" 2>&1 | FileCheck %s --check-prefix=SMEM
// RUN: not liger-opt %t/groups.mlir --liger-select-kernel-config="matmul-config-table=%t/lorapingpong.json" 2>&1 | FileCheck %s --check-prefix=LORAPP
// RUN: not liger-opt %t/groups.mlir --liger-select-kernel-config="chip=sm_80 matmul-config-table=%t/sm80pingpong.json" 2>&1 | FileCheck %s --check-prefix=SM80PP
// RUN: not liger-opt %t/groups.mlir --liger-select-kernel-config="matmul-config-table=%t/lorapersistent.json" 2>&1 | FileCheck %s --check-prefix=LORAPS
// RUN: not liger-opt %t/groups.mlir --liger-select-kernel-config="chip=sm_80 matmul-config-table=%t/sm80persistent.json" 2>&1 | FileCheck %s --check-prefix=SM80PS
// RUN: not liger-opt %t/groups.mlir --liger-select-kernel-config="matmul-schedule=pingpong matmul-config-table=%t/smem.json" 2>&1 | FileCheck %s --check-prefix=BOTH
// liger-lower-to-gpu reads the table for a lone op's group.
// RUN: not liger-opt %t/lone.mlir --liger-lower-to-gpu="matmul-kernels=true matmul-config-table=%t/smem.json" 2>&1 | FileCheck %s --check-prefix=LONE

// ABSENT: error: liger-select-kernel-config: cannot read the matmul configuration table {{.*}}absent.json: {{[Nn]}}o such file or directory
// TEXT: error: liger-select-kernel-config: matmul configuration table {{.*}}text.json: not JSON: {{.+}}
// LIST: error: liger-select-kernel-config: matmul configuration table {{.*}}list.json: must be a JSON object with 'version' and 'entries'
// NOVERSION: error: liger-select-kernel-config: matmul configuration table {{.*}}noversion.json: 'version' is missing
// VERSION2: error: liger-select-kernel-config: matmul configuration table {{.*}}version2.json: version 2 is not one this compiler reads (1)
// TOPLEVEL: error: liger-select-kernel-config: matmul configuration table {{.*}}toplevel.json: unknown field 'entry'
// ENTRIES: error: liger-select-kernel-config: matmul configuration table {{.*}}entries.json: 'entries' must be a list
// ENTRY: error: liger-select-kernel-config: matmul configuration table {{.*}}entry.json: entry 1: must be an object with 'match' and 'config'
// NOCONFIG: error: liger-select-kernel-config: matmul configuration table {{.*}}noconfig.json: entry 0: 'config' is missing
// MATCHFIELD: error: liger-select-kernel-config: matmul configuration table {{.*}}matchfield.json: entry 0: match: unknown field 'n'
// CONFIGFIELD: error: liger-select-kernel-config: matmul configuration table {{.*}}configfield.json: entry 0: config: unknown field 'tile_mn'
// CHIP: error: liger-select-kernel-config: matmul configuration table {{.*}}chip.json: entry 0: match: 'chip': unsupported GPU target 'sm_89' (supported: sm_80, sm_86, sm_90a)
// BODY: error: {{.*}}body.json: entry 0: match: 'body' must be one of projection, qk_rope, grad_input, grad_weight
// DTYPE: error: {{.*}}dtype.json: entry 0: match: 'dtype' must be one of bf16, f16, f32
// K: error: {{.*}}k.json: entry 0: match: 'k' must be a positive integer
// WIDTHS: error: {{.*}}widths.json: entry 0: match: 'widths' must be a non-empty list of positive integers
// NORM: error: {{.*}}norm.json: entry 0: match: 'norm' must be true or false
// TRANSPOSED: error: {{.*}}transposed.json: entry 0: match: 'weight_transposed' must be true or false
// RANK: error: {{.*}}rank.json: entry 0: match: 'lora_rank' must be a non-negative integer
// ACCUMULATE: error: {{.*}}accumulate.json: entry 0: match: 'accumulate' must be true or false
// BOUNDS: error: {{.*}}bounds.json: entry 0: match: m_min 100 is above m_max 50
// TILE: error: {{.*}}tile.json: entry 0: config: 'tile_m' must be a positive integer
// SCHEDULE: error: {{.*}}schedule.json: entry 0: config: 'schedule' must be one of data-parallel, pingpong, persistent
// LARGETILE: error: {{.*}}largetile.json: entry 0: config: 'tile_k' must be at most 256, got 4611686018427387920
// DWK: error: {{.*}}dwk.json: entry 0: match: 'k' never holds of a grad_weight group (its K is the tokens, dynamic): bound its rows with m_min and m_max
// DEEP: error: {{.*}}deep.json: nested more than 32 levels deep
// SMEM: error: 'liger.fusion' op matches entry 0 of the matmul configuration table {{.*}}smem.json, whose configuration does not fit it: it needs {{[0-9]+}} bytes of shared memory, sm_90a has {{[0-9]+}} beside the kernel's 1024 static bytes
// LORAPP: error: 'liger.fusion' op matches entry 0 of the matmul configuration table {{.*}}lorapingpong.json, whose configuration does not fit it: the pingpong schedule does not take this group: LoRA's B tile is read once per CTA
// SM80PP: error: 'liger.fusion' op matches entry 0 of the matmul configuration table {{.*}}sm80pingpong.json, whose configuration does not fit it: the pingpong schedule is the wgmma template's
// LORAPS: error: 'liger.fusion' op matches entry 0 of the matmul configuration table {{.*}}lorapersistent.json, whose configuration does not fit it: the persistent schedule does not take this group: LoRA's B tile is read once per CTA
// SM80PS: error: 'liger.fusion' op matches entry 0 of the matmul configuration table {{.*}}sm80persistent.json, whose configuration does not fit it: the persistent schedule is the wgmma template's
// BOTH: error: liger-select-kernel-config: matmul-schedule and matmul-config-table both choose the configuration of matmul groups: give one (a table entry states its schedule)
// LONE: error: 'liger.fusion' op matches entry 0 of the matmul configuration table {{.*}}smem.json, whose configuration does not fit it: it needs

//--- text.json
version = 1
//--- list.json
[{"version": 1}]
//--- noversion.json
{"entries": []}
//--- version2.json
{"version": 2, "entries": []}
//--- toplevel.json
{"version": 1, "entries": [], "entry": []}
//--- entries.json
{"version": 1, "entries": {"match": {}, "config": {}}}
//--- entry.json
{"version": 1, "entries": [{"match": {}, "config": {}}, 3]}
//--- noconfig.json
{"version": 1, "entries": [{"match": {}}]}
//--- matchfield.json
{"version": 1, "entries": [{"match": {"n": 4096}, "config": {}}]}
//--- configfield.json
{"version": 1, "entries": [{"match": {}, "config": {"tile_mn": 128}}]}
//--- chip.json
{"version": 1, "entries": [{"match": {"chip": "sm_89"}, "config": {}}]}
//--- body.json
{"version": 1, "entries": [{"match": {"body": "mlp"}, "config": {}}]}
//--- dtype.json
{"version": 1, "entries": [{"match": {"dtype": "bfloat16"}, "config": {}}]}
//--- k.json
{"version": 1, "entries": [{"match": {"k": "4096"}, "config": {}}]}
//--- widths.json
{"version": 1, "entries": [{"match": {"widths": []}, "config": {}}]}
//--- norm.json
{"version": 1, "entries": [{"match": {"norm": 1}, "config": {}}]}
//--- transposed.json
{"version": 1, "entries": [{"match": {"weight_transposed": "yes"}, "config": {}}]}
//--- rank.json
{"version": 1, "entries": [{"match": {"lora_rank": -16}, "config": {}}]}
//--- accumulate.json
{"version": 1, "entries": [{"match": {"accumulate": "f32"}, "config": {}}]}
//--- bounds.json
{"version": 1, "entries": [{"match": {"m_min": 100, "m_max": 50}, "config": {}}]}
//--- tile.json
{"version": 1, "entries": [{"match": {}, "config": {"tile_m": 0}}]}
//--- schedule.json
{"version": 1, "entries": [{"match": {}, "config": {"schedule": "auto"}}]}
//--- largetile.json
{"version": 1, "entries": [{"match": {}, "config": {"tile_k": 4611686018427387920}}]}
//--- dwk.json
{"version": 1, "entries": [{"match": {"body": "grad_weight", "k": 4096}, "config": {}}]}
//--- smem.json
{"version": 1, "entries": [{"match": {"k": 4096}, "config": {"tile_n": 256, "stages": 8}}]}
//--- lorapingpong.json
{"version": 1, "entries": [{"match": {"lora_rank": 16}, "config": {"schedule": "pingpong"}}]}
//--- sm80pingpong.json
{"version": 1, "entries": [{"match": {}, "config": {"schedule": "pingpong"}}]}
//--- lorapersistent.json
{"version": 1, "entries": [{"match": {"lora_rank": 16}, "config": {"schedule": "persistent"}}]}
//--- sm80persistent.json
{"version": 1, "entries": [{"match": {}, "config": {"schedule": "persistent"}}]}

//--- groups.mlir
func.func @lora(%x: tensor<?x4096xbf16>, %w: tensor<4096x4096xbf16>, %a16: tensor<16x4096xbf16>, %b16: tensor<4096x16xbf16>) -> tensor<?x4096xbf16> {
  %0 = liger.fusion matmul(%x, %w, %a16, %b16) : (tensor<?x4096xbf16>, tensor<4096x4096xbf16>, tensor<16x4096xbf16>, tensor<4096x16xbf16>) -> tensor<?x4096xbf16> {
  ^bb0(%i: tensor<?x4096xbf16>, %j: tensor<4096x4096xbf16>, %k: tensor<16x4096xbf16>, %l: tensor<4096x16xbf16>):
    %p = liger.lora_linear %i, %j, %k, %l scale = 2.0 : tensor<?x4096xbf16>, tensor<4096x4096xbf16>, tensor<16x4096xbf16>, tensor<4096x16xbf16>
    liger.yield %p : tensor<?x4096xbf16>
  }
  return %0 : tensor<?x4096xbf16>
}

//--- lone.mlir
func.func @lone(%dy: tensor<?x4096xbf16>, %w: tensor<4096x14336xbf16>) -> tensor<?x14336xbf16> {
  %dx = liger.linear_grad_input %dy, %w : tensor<?x4096xbf16>, tensor<4096x14336xbf16>
  return %dx : tensor<?x14336xbf16>
}
