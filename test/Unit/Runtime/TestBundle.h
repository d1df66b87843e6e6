//===- TestBundle.h - bundle directories for the runtime's tests -*- C++
//-*-===//
//
// Writes what Bundle::open reads, for tests and liger-launch-bench (no
// GoogleTest here): a manifest and the cubin it names, the manifest's
// placeholder digests (kUnsetCubinSha256) replaced by the cubin's.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_TEST_UNIT_RUNTIME_TESTBUNDLE_H
#define LIGER_TEST_UNIT_RUNTIME_TESTBUNDLE_H

#include "TestManifests.h"
#include "liger/Runtime/Sha256.h"

#include <fstream>
#include <string>

namespace liger::runtime::testing {

/// The bytes of the test cubin `k.cubin` (nothing loads it but a stand-in
/// driver).
inline std::string testCubin() {
  return std::string("\x7f"
                     "ELF") +
         std::string(100, '\0');
}

/// Writes `manifest` (JSON) into `dir` as manifest.json, with every
/// kUnsetCubinSha256 replaced by the digest of the cubin, and the cubin as
/// k.cubin.
inline void writeTestBundle(const std::string &dir, std::string manifest) {
  std::string cubin = testCubin();
  std::string digest = sha256Hex(cubin.data(), cubin.size());
  for (size_t at = manifest.find(kUnsetCubinSha256); at != std::string::npos;
       at = manifest.find(kUnsetCubinSha256, at))
    manifest.replace(at, digest.size(), digest);
  std::ofstream(dir + "/manifest.json", std::ios::binary) << manifest;
  std::ofstream(dir + "/k.cubin", std::ios::binary) << cubin;
}

} // namespace liger::runtime::testing

#endif // LIGER_TEST_UNIT_RUNTIME_TESTBUNDLE_H
