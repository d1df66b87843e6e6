//===- ManifestError.h - a manifest's error messages ------------*- C++ -*-===//
//
// One message form for the JSON reader (ManifestJson.cpp) and the verifier
// (KernelAbi.cpp): the manifest, the field, what is wrong.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_LIB_RUNTIME_MANIFESTERROR_H
#define LIGER_LIB_RUNTIME_MANIFESTERROR_H

#include "liger/Runtime/Status.h"

#include <string>

namespace liger::runtime {

/// "<origin>: <path>: <what>", e.g. "b/manifest.json: modules[0].kernels[1]:
/// name is empty".
inline Status manifestError(const std::string &origin, const std::string &path,
                            const std::string &what) {
  return LIGER_MAKE_STATUS(StatusCode::kInvalidArgument,
                           origin + ": " + path + ": " + what);
}

} // namespace liger::runtime

#endif // LIGER_LIB_RUNTIME_MANIFESTERROR_H
