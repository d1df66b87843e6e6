//===- BundleDir.h - a bundle directory for the runtime's unit tests ------===//
//
// A temporary bundle directory for a test, holding what writeTestBundle
// writes (TestBundle.h) or what the test puts there.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_TEST_UNIT_RUNTIME_BUNDLEDIR_H
#define LIGER_TEST_UNIT_RUNTIME_BUNDLEDIR_H

#include "TestBundle.h"
#include "liger/Runtime/Bundle.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <gtest/gtest.h>
#include <memory>
#include <string>
#include <unistd.h>

namespace liger::runtime::testing {

/// A fixture that owns liger-bundle-test-XXXXXX in /dev/shm (where the
/// fuzz tests' thousands of bundles are written in memory), else in /tmp,
/// and removes it with whatever the test put there.
class BundleDirTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string pattern =
        std::string(access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp") +
        "/liger-bundle-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir = pattern;
  }
  void TearDown() override {
    std::error_code ignored; // a test that failed early may leave less
    std::filesystem::remove_all(dir, ignored);
  }
  void write(const std::string &name, const std::string &bytes) {
    std::ofstream(dir + "/" + name, std::ios::binary) << bytes;
  }
  /// Writes `manifest` and its cubin (writeTestBundle: the cubin made from
  /// the module after `edit`, with `staticSharedBytes` per kernel), and
  /// opens the bundle.
  Status openWith(const std::string &manifest, std::unique_ptr<Bundle> *b,
                  const std::function<void(ModuleSpec &)> &edit = {},
                  uint64_t staticSharedBytes = 0) {
    writeTestBundle(dir, manifest, edit, staticSharedBytes);
    return Bundle::open(dir, b);
  }
  std::string dir;
};

} // namespace liger::runtime::testing

#endif // LIGER_TEST_UNIT_RUNTIME_BUNDLEDIR_H
