//===- MatmulConfigTable.h - measured matmul configurations ------*- C++ -*-===//
//
// A table of matmul kernel configurations measured per shape
// (bench/matmul_config_sweep.py writes one), read by
// liger-select-kernel-config and liger-lower-to-gpu (their
// `matmul-config-table` option, liger-compile's --matmul-config-table): a
// matmul group that an entry matches takes the entry's tile, stages and
// schedule instead of the default rule's (selectMatmulKernelConfig). The
// file is untrusted input: every field is checked when it is read, and an
// entry that matches a group it does not fit is an error on the group.
//
// The format (JSON; docs/Design/GPU-Lowering.md, *Configuration tables*):
//
//   {"version": 1,
//    "entries": [
//      {"match": {"chip": "sm_90a", "body": "projection", "dtype": "bf16",
//                 "k": 4096, "widths": [14336], "norm": false,
//                 "lora_rank": 0, "accumulate": false,
//                 "weight_transposed": false, "m_min": 65, "m_max": 1024},
//       "config": {"tile_m": 128, "tile_n": 256, "tile_k": 64, "stages": 4,
//                  "schedule": "data-parallel", "cluster": 2},
//       "note": "anything: the sweep's timings"}]}
//
// Every `match` field is optional (absent: any value) and the first entry
// whose fields all hold is taken. `m_min` / `m_max` bound a static row
// count; a group of dynamic rows matches only entries with neither. Every
// `config` field is optional: an absent tile field keeps the default
// rule's value, absent `stages` is as many as shared memory holds (2 to 5;
// 8 in pingpong), absent `schedule` is data-parallel (or "pingpong",
// "persistent"), absent `cluster` is 1 (or 2: the weight tiles multicast
// to a cluster of two CTAs, MatmulKernelConfig::cluster).
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_CONVERSION_LIGERTOGPU_MATMULCONFIGTABLE_H
#define LIGER_CONVERSION_LIGERTOGPU_MATMULCONFIGTABLE_H

#include "liger/Conversion/LigerToGPU/MatmulConfig.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir::liger {

class MatmulConfigTable {
public:
  /// One entry: what it matches (each field absent: any) and what it sets.
  struct Entry {
    std::optional<std::string> chip, body, dtype;
    std::optional<int64_t> k, mMin, mMax, loraRank;
    std::optional<std::vector<int64_t>> widths;
    std::optional<bool> norm, accumulate, weightTransposed;
    std::optional<int64_t> tileM, tileN, tileK, stages, cluster;
    std::optional<MatmulSchedule> schedule;
  };

  /// Reads the table at `path`; on failure `error` says why (the file, the
  /// entry and the field).
  static std::optional<MatmulConfigTable> read(StringRef path,
                                               std::string &error);
  /// Parses a table from `text`; `source` names it in errors.
  static std::optional<MatmulConfigTable>
  parse(StringRef text, StringRef source, std::string &error);

  /// The configuration of the first entry matching `plan` on `target`, none
  /// where no entry matches; fails with a diagnostic on the plan's group
  /// where the matching entry's configuration does not fit it
  /// (matmulConfigProblem).
  FailureOr<std::optional<MatmulKernelConfig>>
  lookup(const MatmulPlan &plan, const GpuTargetInfo &target) const;

  StringRef source() const { return name; }
  size_t size() const { return entries.size(); }

private:
  std::string name;
  std::vector<Entry> entries;
};

/// How a matmul group without a pinned configuration gets one: the
/// schedule choice of `--matmul-schedule` and, where given, a table of
/// measured configurations (consulted first).
struct MatmulSelection {
  MatmulScheduleChoice schedule = MatmulScheduleChoice::Auto;
  const MatmulConfigTable *table = nullptr;
};

/// What options named `scheduleOption` and `tableOption` say when a
/// schedule other than auto is given beside a table: both would choose.
std::string conflictingMatmulSelection(StringRef scheduleOption,
                                       StringRef tableOption);

/// A pass's `matmul-schedule` and `matmul-config-table` options, read once
/// per run.
struct MatmulSelectionOptions {
  MatmulScheduleChoice schedule = MatmulScheduleChoice::Auto;
  std::optional<MatmulConfigTable> table;
  MatmulSelection selection() const {
    return {schedule, table ? &*table : nullptr};
  }
};

/// Reads the options (`tablePath` empty: no table); emits "<pass>: <why>"
/// on `anchor` and fails where the schedule names no choice, the table
/// cannot be read or is malformed, or both are given.
FailureOr<MatmulSelectionOptions>
readMatmulSelectionOptions(Operation *anchor, StringRef pass,
                           StringRef schedule, StringRef tablePath);

/// The name of a plan's operands' dtype in a table (bf16, f16, f32).
std::string matmulDtypeName(const MatmulPlan &plan);

} // namespace mlir::liger

#endif // LIGER_CONVERSION_LIGERTOGPU_MATMULCONFIGTABLE_H
