//===- BundleFilesTest.cpp - a bundle's files, read as hostile ------------===//
//
// Bundle::open reads only regular files inside the bundle directory: a
// manifest or cubin that is a symbolic link (to /dev/zero, or out of the
// bundle), a FIFO (which must not block the open), a directory or a device
// is refused with a message before a byte of it is read, and so is a file
// larger than the runtime reads (kMaxManifestBytes, kMaxCubinBytes). The
// directory itself may be a symbolic link.
//
//===----------------------------------------------------------------------===//

#include "BundleDir.h"
#include "TestManifests.h"
#include "liger/Runtime/Bundle.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

using namespace liger::runtime;
using liger::runtime::testing::kTestManifest;

namespace {

class HostileFilesTest : public liger::runtime::testing::BundleDirTest {
protected:
  /// The message of opening the bundle, "" when it opens.
  std::string opened() {
    std::unique_ptr<Bundle> b;
    Status s = Bundle::open(dir, &b);
    return s.isOk() ? "" : s.message();
  }
  /// Writes the test manifest and its cubin, then replaces `name` by what
  /// `make` makes at its path.
  template <typename Make> void replace(const std::string &name, Make make) {
    std::error_code ignored; // what an earlier replace made
    std::filesystem::remove_all(dir + "/manifest.json", ignored);
    std::filesystem::remove_all(dir + "/k.cubin", ignored);
    std::unique_ptr<Bundle> b;
    ASSERT_TRUE(openWith(kTestManifest, &b).isOk());
    ASSERT_EQ(std::remove((dir + "/" + name).c_str()), 0);
    make(dir + "/" + name);
  }
  /// A file `bytes` bytes long that takes no disk space.
  static void sparse(const std::string &path, off_t bytes) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, bytes), 0);
    ::close(fd);
  }
  const std::string kRule = "; a bundle's files are regular files in its "
                            "directory";
};

TEST_F(HostileFilesTest, AManifestLinkedFromElsewhereIsRefused) {
  std::string outside = dir + ".manifest";
  std::ofstream(outside) << kTestManifest;
  replace("manifest.json", [&](const std::string &path) {
    ASSERT_EQ(::symlink(outside.c_str(), path.c_str()), 0);
  });
  EXPECT_EQ(opened(), dir + "/manifest.json is a symbolic link" + kRule);
  std::remove(outside.c_str());
}

// The filed case: a cubin that links to /dev/zero was read until
// std::bad_alloc.
TEST_F(HostileFilesTest, ACubinLinkedToDevZeroIsRefused) {
  replace("k.cubin", [](const std::string &path) {
    ASSERT_EQ(::symlink("/dev/zero", path.c_str()), 0);
  });
  EXPECT_EQ(opened(), dir + "/k.cubin is a symbolic link" + kRule);
}

TEST_F(HostileFilesTest, ALinkWithinTheBundleIsRefusedToo) {
  replace("k.cubin", [](const std::string &path) {
    ASSERT_EQ(::symlink("manifest.json", path.c_str()), 0);
  });
  EXPECT_EQ(opened(), dir + "/k.cubin is a symbolic link" + kRule);
}

// A FIFO would block a plain open until a writer came.
TEST_F(HostileFilesTest, AFifoDoesNotBlockAndIsRefused) {
  replace("k.cubin", [](const std::string &path) {
    ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  });
  EXPECT_EQ(opened(), dir + "/k.cubin is a FIFO" + kRule);
  replace("manifest.json", [](const std::string &path) {
    ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  });
  EXPECT_EQ(opened(), dir + "/manifest.json is a FIFO" + kRule);
}

TEST_F(HostileFilesTest, ADirectoryIsRefused) {
  replace("k.cubin", [](const std::string &path) {
    ASSERT_EQ(::mkdir(path.c_str(), 0700), 0);
  });
  EXPECT_EQ(opened(), dir + "/k.cubin is a directory" + kRule);
}

TEST_F(HostileFilesTest, ADeviceIsRefused) {
  bool made = true;
  replace("k.cubin", [&](const std::string &path) {
    made = ::mknod(path.c_str(), S_IFCHR | 0600, makedev(1, 5)) == 0;
  });
  if (!made)
    GTEST_SKIP() << "cannot make a device node here (needs privileges)";
  EXPECT_EQ(opened(), dir + "/k.cubin is a character device" + kRule);
}

TEST_F(HostileFilesTest, FilesLargerThanTheRuntimeReadsAreRefused) {
  replace("manifest.json",
          [](const std::string &path) { sparse(path, kMaxManifestBytes + 1); });
  EXPECT_EQ(opened(), dir + "/manifest.json is 16777217 bytes; a manifest is "
                            "at most 16777216 bytes (the runtime reads no "
                            "more)");
  replace("k.cubin",
          [](const std::string &path) { sparse(path, kMaxCubinBytes + 1); });
  EXPECT_EQ(opened(), dir + "/k.cubin is 67108865 bytes; a cubin is at most "
                            "67108864 bytes (the runtime reads no more)");
}

TEST_F(HostileFilesTest, AMissingDirectoryOrFileIsNotFound) {
  std::unique_ptr<Bundle> b;
  Status s = Bundle::open(dir + "/none", &b);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "cannot read bundle directory " + dir +
                             "/none: No such file or directory");
  replace("k.cubin", [](const std::string &) {});
  s = Bundle::open(dir, &b);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(),
            "cannot read " + dir + "/k.cubin: No such file or directory");
}

// The caller chose the directory's path; links to it are how bundles are
// often installed ("latest -> v3.bundle").
TEST_F(HostileFilesTest, TheDirectoryItselfMayBeALink) {
  std::unique_ptr<Bundle> b;
  ASSERT_TRUE(openWith(kTestManifest, &b).isOk());
  std::string link = dir + ".link";
  ASSERT_EQ(::symlink(dir.c_str(), link.c_str()), 0);
  Status s = Bundle::open(link, &b);
  std::remove(link.c_str());
  EXPECT_TRUE(s.isOk()) << s.message();
}

} // namespace
