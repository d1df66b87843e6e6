//===- FuzzTest.cpp - damaged and lying bundles, against the stand-in driver
//===//
//
// Bundles the loader must treat as hostile, opened and (where they open)
// launched against the stand-in driver (FakeCuda.c), in the fake-driver
// executable: a cubin cut at every length class and with bits flipped at
// positions drawn with a fixed seed (with the manifest's digest, and with
// one rewritten to match); a manifest cut short, with bytes flipped or
// garbled, every number replaced by extreme values, another arch; and
// launch data that lies (grid, block, shared memory, parameters, tensor
// maps, alignment). Each case is refused at open with a message that names
// the bundle's file, or opens, and then every kernel launches or fails
// with a status: nothing crashes (the ASan + UBSan build runs this too).
// What opens though it lies is what the cubin does not record (the grid,
// the dynamic shared memory, the vector width): docs/Design/Kernel-ABI.md.
//
//===----------------------------------------------------------------------===//

#include "BundleDir.h"
#include "TestCubin.h"
#include "TestManifests.h"
#include "liger/Runtime/Bundle.h"
#include "liger/Runtime/CudaDriver.h"
#include "liger/Runtime/Sha256.h"
#include "liger/Runtime/liger_runtime.h"

#include <cstring>
#include <fstream>
#include <gtest/gtest.h>
#include <random>
#include <regex>

using namespace liger::runtime;
using liger::runtime::testing::kTestManifest;
using liger::runtime::testing::kUnsetCubinSha256;
using liger::runtime::testing::makeTestCubin;

namespace {

/// Tensors for every parameter of `k`: two rows (a batch of one and a
/// sequence of two for [B, H, T, ...] tensors), one CTA row per partials
/// workspace, the static sizes the manifest says, all at one 256-byte
/// aligned buffer (the stand-in driver reads none).
std::vector<TensorArg> argsFor(const KernelSpec &k) {
  alignas(256) static char buffer[256];
  std::vector<TensorArg> args;
  for (const KernelParam &p : k.params) {
    TensorArg a;
    a.data = buffer;
    a.dtype = p.dtype;
    switch (p.kind) {
    case ParamKind::Rows:
      a.shape = {2, p.length};
      break;
    case ParamKind::RowScalars:
      a.shape = {2};
      break;
    case ParamKind::Feature:
      a.shape = {p.length};
      break;
    case ParamKind::Scalar:
      break;
    case ParamKind::Heads:
      a.shape = {1, p.outer, 2, p.length};
      break;
    case ParamKind::Tables:
      a.shape = {1, 2, p.length};
      break;
    case ParamKind::Partials:
      a.shape = {1, p.length};
      break;
    case ParamKind::Matrix:
      a.shape = {p.outer, p.length};
      break;
    case ParamKind::HeadScalars:
      a.shape = {1, p.outer, 2};
      break;
    }
    args.push_back(a);
  }
  return args;
}

class FuzzTest : public liger::runtime::testing::BundleDirTest {
protected:
  void SetUp() override {
    ASSERT_TRUE(CudaDriver::get(&driver).isOk())
        << "LIGER_LIBCUDA should name the stand-in driver";
    BundleDirTest::SetUp();
    Manifest m;
    ASSERT_TRUE(parseManifest(kTestManifest, "t", &m).isOk());
    cubin = makeTestCubin(m.modules[0], 1024);
    digest = sha256Hex(cubin.data(), cubin.size());
    manifest = kTestManifest;
    manifest.replace(manifest.find(kUnsetCubinSha256), 64, digest);
    CUcontext primary = nullptr;
    ASSERT_EQ(driver->cuDevicePrimaryCtxRetain(&primary, 0), kCudaSuccess);
    ASSERT_EQ(driver->cuCtxSetCurrent(primary), kCudaSuccess);
  }

  /// Writes `text` and `bytes` as the bundle, opens it and launches each
  /// of its kernels. Returns false when it was refused, after checking
  /// the message names a file of the bundle; counts what opened.
  bool tryBundle(const std::string &text, const std::string &bytes,
                 const std::string &what) {
    std::ofstream(dir + "/manifest.json", std::ios::binary) << text;
    std::ofstream(dir + "/k.cubin", std::ios::binary) << bytes;
    std::unique_ptr<Bundle> b;
    Status s = Bundle::open(dir, &b);
    ++cases;
    if (!s.isOk()) {
      EXPECT_NE(s.message().find(dir + "/"), std::string::npos)
          << what << ": " << s.message();
      return false;
    }
    ++opened;
    for (size_t k = 0; k < b->kernelCount(); ++k) {
      std::vector<TensorArg> args = argsFor(b->kernel(k));
      Status launched = b->launch(k, args.data(), args.size(), nullptr, 0);
      if (!launched.isOk()) {
        EXPECT_FALSE(launched.message().empty()) << what;
      }
    }
    return true;
  }
  /// The same with the manifest's digest made the cubin's.
  bool tryMatching(std::string text, const std::string &bytes,
                   const std::string &what) {
    size_t at = text.find(digest);
    if (at != std::string::npos)
      text.replace(at, 64, sha256Hex(bytes.data(), bytes.size()));
    return tryBundle(text, bytes, what);
  }

  const CudaDriver *driver = nullptr;
  std::string cubin, digest, manifest;
  size_t cases = 0, opened = 0;
};

TEST_F(FuzzTest, TheTruthOpensAndLaunches) {
  EXPECT_TRUE(tryBundle(manifest, cubin, "the truth"));
}

// The filed case: alignment_bytes 0 made liger_bundle_launch divide by zero.
TEST_F(FuzzTest, AZeroAlignmentIsRefusedAtOpen) {
  std::string text = manifest;
  text.replace(text.find("\"alignment_bytes\": 16"), 21,
               "\"alignment_bytes\": 0");
  std::ofstream(dir + "/manifest.json") << text;
  std::ofstream(dir + "/k.cubin", std::ios::binary) << cubin;
  liger_bundle *b = nullptr;
  EXPECT_EQ(liger_bundle_open(dir.c_str(), &b), LIGER_INVALID_ARGUMENT);
  EXPECT_EQ(b, nullptr);
  EXPECT_STREQ(liger_last_error(),
               (dir + "/manifest.json: modules[0].kernels[0]: alignment_bytes "
                      "must be a power of two in [1, 256], got 0")
                   .c_str());
}

// Every length class of a cut: through the ELF header byte by byte, then
// around every header and section boundary, then every 61st byte.
TEST_F(FuzzTest, ACubinCutAnywhereIsRefused) {
  std::vector<size_t> lengths;
  for (size_t n = 0; n <= 72; ++n)
    lengths.push_back(n);
  for (size_t n = 72; n < cubin.size(); n += 61)
    lengths.push_back(n);
  for (size_t n = cubin.size() - 72; n < cubin.size(); ++n)
    lengths.push_back(n);
  for (size_t n : lengths) {
    std::string cut = cubin.substr(0, n);
    EXPECT_FALSE(tryBundle(manifest, cut, "cut at " + std::to_string(n)))
        << "a cubin cut at " << n << " opened";
    EXPECT_FALSE(tryMatching(manifest, cut, "cut at " + std::to_string(n)))
        << "a cubin cut at " << n << " opened under a matching digest";
  }
}

// Flipped bits: all refused under the manifest's digest. Under a matching
// one, refused where a check reads the byte; elsewhere (code, a constant
// bank's contents) opened and launched against the stand-in driver.
TEST_F(FuzzTest, ACubinWithFlippedBitsIsRefusedOrHarmless) {
  std::mt19937 random(2024);
  size_t refusedMatching = 0;
  for (int i = 0; i < 1000; ++i) {
    std::string flipped = cubin;
    size_t at = random() % flipped.size();
    flipped[at] ^= static_cast<char>(1 << random() % 8);
    std::string what = "byte " + std::to_string(at) + " flipped";
    EXPECT_FALSE(tryBundle(manifest, flipped, what)) << what;
    refusedMatching += !tryMatching(manifest, flipped, what);
  }
  // The headers, tables and .nv.info records are a large share of a test
  // cubin: the checks must have refused many.
  EXPECT_GT(refusedMatching, 150u); // 188 with this seed
}

// The manifest cut short, with bytes flipped, or with a character
// replaced by JSON's structural ones: refused with a message, or (a
// change inside a name, a value the verifier allows) opened.
TEST_F(FuzzTest, AGarbledManifestIsRefusedOrOpens) {
  for (size_t n = 0; n < manifest.size(); n += 7)
    EXPECT_FALSE(tryBundle(manifest.substr(0, n), cubin, "cut manifest"))
        << "a manifest cut at " << n << " opened";
  std::mt19937 random(7);
  const char kGarble[] = "{}[],:\"0-9e.\\ \x01\xff";
  for (int i = 0; i < 1500; ++i) {
    std::string text = manifest;
    size_t at = random() % text.size();
    if (i % 2)
      text[at] ^= static_cast<char>(1 << random() % 8);
    else
      text[at] = kGarble[random() % (sizeof kGarble - 1)];
    tryBundle(text, cubin, "garbled at " + std::to_string(at));
  }
}

// Every integer of the manifest in turn replaced by values at and past
// the edges of every range: refused, or opened and launched.
TEST_F(FuzzTest, ExtremeNumbersAreRefusedOrHarmless) {
  const char *kValues[] = {"0",
                           "-1",
                           "1",
                           "3",
                           "1025",
                           "65536",
                           "2147483647",
                           "2147483648",
                           "4294967296",
                           "9223372036854775807",
                           "-9223372036854775808",
                           "18446744073709551615",
                           "1e308",
                           "99999999999999999999999"};
  std::regex number("-?[0-9]+");
  std::vector<std::pair<size_t, size_t>> numbers;
  for (auto it = std::sregex_iterator(manifest.begin(), manifest.end(), number);
       it != std::sregex_iterator(); ++it)
    if (manifest.compare(it->position() - 1, 1, "\"") != 0) // not in a name
      numbers.push_back({static_cast<size_t>(it->position()),
                         static_cast<size_t>(it->length())});
  ASSERT_GT(numbers.size(), 50u);
  for (auto [at, length] : numbers)
    for (const char *v : kValues) {
      std::string text = manifest;
      text.replace(at, length, v);
      tryBundle(text, cubin, "number at " + std::to_string(at) + " = " + v);
    }
  // Values that lie about what the cubin records are refused.
  EXPECT_LT(opened, cases);
}

// Launch data the cubin does not contradict opens; what it records is
// refused. Each lie is a field of one kernel.
TEST_F(FuzzTest, LyingLaunchDataIsRefusedOrDocumented) {
  struct Lie {
    const char *from, *to;
    bool opens; ///< the cubin does not record it
  };
  const Lie kLies[] = {
      {"\"grid\": [\"rows\", 1, 1]", "\"grid\": [\"rows/2\", 1, 1]", true},
      {"\"grid\": [\"rows\", 1, 1]", "\"grid\": [1, 1, 1]", true},
      {"\"grid\": [\"rows\", 1, 1]", "\"grid\": [\"rows\", 65535, 65535]",
       true},
      {"\"grid\": [\"rows\", 1, 1]",
       "\"grid\": [\"rows/999999999999999999\", 1, 1]", true},
      {"\"dynamic_shared_memory_bytes\": 36",
       "\"dynamic_shared_memory_bytes\": 0", true},
      {"\"dynamic_shared_memory_bytes\": 36",
       "\"dynamic_shared_memory_bytes\": 2147483647", true},
      {"\"vector_width\": 8", "\"vector_width\": 16", true},
      {"\"block\": [256, 1, 1]", "\"block\": [128, 1, 1]", false},
      {"\"block\": [256, 1, 1]", "\"block\": [256, 2, 1]", false},
      {"\"block\": [256, 1, 1]", "\"block\": [4294967296, 4294967296, 1]",
       false},
      {"\"block\": [256, 1, 1]", "\"block\": [0, 1, 1]", false},
      {"\"block\": [128, 1, 1]", "\"block\": [256, 1, 1]", false}, // grad
      {"\"grid\": [32, 1, 1], \"block\": [256, 1, 1]",
       "\"grid\": [32, 1, 1], \"block\": [64, 1, 1]", false}, // its finish
      {"\"grid\": [32, 1, 1]", "\"grid\": [0, 1, 1]", false},
      {"\"ctas_per_sm\": 4", "\"ctas_per_sm\": 1000000", false},
      {"\"alignment_bytes\": 16", "\"alignment_bytes\": 0", false},
      {"\"alignment_bytes\": 16", "\"alignment_bytes\": 3", false},
      {"\"box\": [128, 64]", "\"box\": [128, 0]", false},
      {"\"box\": [128, 64]", "\"box\": [1099511627776, 64]", false},
      {"\"swizzle\": 128", "\"swizzle\": 32", false},
      {", \"oob\": \"zero\"}]",
       ", \"oob\": \"zero\"}, {\"param\": "
       "\"input0\", \"box\": [128, 64], \"swizzle\": "
       "128, \"oob\": \"zero\"}]",
       false}, // a tensor map more
      {"\"shape\": [\"rows\", 4096]}",
       "\"shape\": [\"rows\", 4096]}, "
       "{\"name\": \"extra\", \"role\": "
       "\"output\", \"kind\": \"scalar\", "
       "\"dtype\": \"f32\", \"shape\": []}",
       false}, // a parameter more
      {"\"arch\": \"sm_90a\"", "\"arch\": \"sm_80\"", false},
      {"\"name\": \"norm\"", "\"name\": \"other\"", false},
  };
  for (const Lie &lie : kLies) {
    std::string text = manifest;
    size_t at = text.find(lie.from);
    ASSERT_NE(at, std::string::npos) << lie.from;
    text.replace(at, std::strlen(lie.from), lie.to);
    EXPECT_EQ(tryBundle(text, cubin, lie.to), lie.opens) << lie.to;
  }
}

} // namespace
