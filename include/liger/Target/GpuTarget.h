//===- GpuTarget.h - the GPU targets liger compiles for ---------*- C++ -*-===//
//
// What liger knows about each GPU target, asked in one place rather than
// with inline `sm >= 90` checks, and the validation of target strings:
// LLVM aborts the process on a malformed chip or feature string, so every
// string is checked here before LLVM sees it.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_TARGET_GPUTARGET_H
#define LIGER_TARGET_GPUTARGET_H

#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace mlir::liger {

/// A GPU target liger supports.
struct GpuTargetInfo {
  llvm::StringRef chip;     // "sm_90a"
  int computeCapability;    // 90
  bool hasWgmma;            // Hopper Tensor Core instructions
  bool hasTma;              // tensor memory accelerator
  int maxSharedMemoryBytes; // per CTA, with the opt-in, on each GPU it runs on
};

/// The target named `chip`, or nullopt when liger does not support it.
std::optional<GpuTargetInfo> lookupGpuTarget(llvm::StringRef chip);

/// The NN of a "+ptxNN" feature string (86 for PTX ISA 8.6), or nullopt when
/// it is malformed.
std::optional<unsigned> parsePtxVersion(llvm::StringRef features);

/// Checks `chip` and `features` ("+ptxNN") before LLVM sees them; on
/// failure returns false with a message that lists what is accepted.
bool validateGpuTarget(llvm::StringRef chip, llvm::StringRef features,
                       std::string &error);

} // namespace mlir::liger

#endif // LIGER_TARGET_GPUTARGET_H
