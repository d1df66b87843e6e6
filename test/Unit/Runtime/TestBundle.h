//===- TestBundle.h - bundle directories for the runtime's tests -*- C++
//-*-===//
//
// Writes what Bundle::open reads, for tests and liger-launch-bench (no
// GoogleTest here): a manifest and, for each of its modules, a cubin of
// its kernels (makeTestCubin), the manifest's placeholder digests
// (kUnsetCubinSha256) replaced by the cubins'. A test of a manifest that
// lies about its cubin changes what the cubin is made from.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_TEST_UNIT_RUNTIME_TESTBUNDLE_H
#define LIGER_TEST_UNIT_RUNTIME_TESTBUNDLE_H

#include "TestCubin.h"
#include "TestManifests.h"
#include "liger/Runtime/Sha256.h"

#include <fstream>
#include <functional>
#include <string>

namespace liger::runtime::testing {

/// Writes `manifest` (JSON) into `dir` as manifest.json and the cubin of
/// each of its modules, made from the module after `edit` (with
/// `staticSharedBytes` per kernel); the i-th kUnsetCubinSha256 of the
/// manifest becomes the i-th cubin's digest. A manifest that does not
/// parse is written alone.
inline void writeTestBundle(const std::string &dir, std::string manifest,
                            const std::function<void(ModuleSpec &)> &edit = {},
                            uint64_t staticSharedBytes = 0) {
  Manifest parsed;
  if (parseManifest(manifest, "test", &parsed).isOk()) {
    size_t at = 0;
    for (ModuleSpec module : parsed.modules) {
      if (edit)
        edit(module);
      std::string cubin = makeTestCubin(module, staticSharedBytes);
      std::ofstream(dir + "/" + module.cubinFile, std::ios::binary) << cubin;
      at = manifest.find(kUnsetCubinSha256, at);
      if (at != std::string::npos)
        manifest.replace(at, kUnsetCubinSha256.size(),
                         sha256Hex(cubin.data(), cubin.size()));
    }
  }
  std::ofstream(dir + "/manifest.json", std::ios::binary) << manifest;
}

} // namespace liger::runtime::testing

#endif // LIGER_TEST_UNIT_RUNTIME_TESTBUNDLE_H
