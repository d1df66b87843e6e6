//===- GpuTarget.cpp - the GPU targets liger compiles for -----------------===//

#include "liger/Target/GpuTarget.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir::liger;

// The shared memory budget is the least any GPU running the target's
// kernels allows a block: sm_80 for compute capability 8.0 (A100, A30) and
// 8.7 (163 KB), sm_86 for 8.6 (A10, A40, RTX 30) and 8.9 (L4, L40S, RTX 40),
// which allow 99 KB.
static const GpuTargetInfo kTargets[] = {
    {"sm_80", 80, false, false, 163 * 1024},
    {"sm_86", 86, false, false, 99 * 1024},
    {"sm_90a", 90, true, true, 227 * 1024},
};

std::optional<GpuTargetInfo>
mlir::liger::lookupGpuTarget(llvm::StringRef chip) {
  for (const GpuTargetInfo &target : kTargets)
    if (target.chip == chip)
      return target;
  return std::nullopt;
}

std::optional<unsigned> mlir::liger::parsePtxVersion(llvm::StringRef features) {
  // "+ptxNN" with two or three digits.
  llvm::StringRef version = features;
  unsigned number = 0;
  if (!version.consume_front("+ptx") || version.size() < 2 ||
      version.size() > 3 ||
      !llvm::all_of(version, [](char c) { return llvm::isDigit(c); }) ||
      version.getAsInteger(10, number))
    return std::nullopt;
  return number;
}

bool mlir::liger::validateGpuTarget(llvm::StringRef chip,
                                    llvm::StringRef features,
                                    std::string &error) {
  if (!lookupGpuTarget(chip)) {
    error = "unsupported GPU target '" + chip.str() + "' (supported: ";
    for (const GpuTargetInfo &target : kTargets)
      error += (&target == kTargets ? "" : ", ") + target.chip.str();
    error += ")";
    return false;
  }
  // ptxas 13 accepts PTX 8.0-8.8.
  std::optional<unsigned> number = parsePtxVersion(features);
  if (!number) {
    error = "malformed PTX feature string '" + features.str() +
            "' (expected +ptxNN, e.g. +ptx86)";
    return false;
  }
  if (*number < 70 || *number > 88) {
    error = "PTX ISA version in '" + features.str() +
            "' is outside what liger uses (+ptx70 to +ptx88)";
    return false;
  }
  return true;
}
