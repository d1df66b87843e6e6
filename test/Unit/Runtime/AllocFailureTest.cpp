//===- AllocFailureTest.cpp - no exception crosses the runtime's API -----===//
//
// The runtime promises that no C++ exception leaves its C API (nor
// Bundle::open, checkDevice and launch). This executable replaces the
// global operator new with one that throws std::bad_alloc at the N-th
// allocation (once, or from then on), and runs liger_bundle_open, the
// C++ Bundle::open and the C API's failing calls with every allocation
// failing in turn: each returns a status with a message, never throws,
// aborts or crashes. Its own executable: the replacement is process-wide.
//
//===----------------------------------------------------------------------===//

#include "BundleDir.h"
#include "TestManifests.h"
#include "liger/Runtime/Bundle.h"
#include "liger/Runtime/liger_runtime.h"

#include <cstdlib>
#include <gtest/gtest.h>
#include <new>
#include <string>

namespace {
/// Allocations left before the failing one; negative: none fails.
long countdown = -1;
/// Whether every allocation after the failing one fails too.
bool failFromThenOn = false;
/// Whether an allocation failed since the last arm().
bool failed = false;

void *allocate(std::size_t size) {
  if (countdown == 0 || (failed && failFromThenOn)) {
    failed = true;
    countdown = -1;
    throw std::bad_alloc();
  }
  if (countdown > 0)
    --countdown;
  if (void *p = std::malloc(size ? size : 1))
    return p;
  throw std::bad_alloc();
}
} // namespace

void *operator new(std::size_t size) { return allocate(size); }
void *operator new[](std::size_t size) { return allocate(size); }
void *operator new(std::size_t size, const std::nothrow_t &) noexcept {
  try {
    return allocate(size);
  } catch (...) {
    return nullptr;
  }
}
void *operator new[](std::size_t size, const std::nothrow_t &) noexcept {
  return operator new(size, std::nothrow);
}
void operator delete(void *p) noexcept { std::free(p); }
void operator delete[](void *p) noexcept { std::free(p); }
void operator delete(void *p, std::size_t) noexcept { std::free(p); }
void operator delete[](void *p, std::size_t) noexcept { std::free(p); }

using namespace liger::runtime;
using liger::runtime::testing::kTestManifest;

namespace {

/// The N-th allocation from now fails (and, with `fromThenOn`, every one
/// after it).
void arm(long n, bool fromThenOn) {
  failed = false;
  failFromThenOn = fromThenOn;
  countdown = n;
}
/// Stops failing; whether an allocation failed.
bool disarm() {
  countdown = -1;
  failFromThenOn = false;
  return failed;
}

bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

class AllocFailureTest : public liger::runtime::testing::BundleDirTest {
protected:
  void SetUp() override {
    BundleDirTest::SetUp();
    std::unique_ptr<Bundle> b;
    ASSERT_TRUE(openWith(kTestManifest, &b).isOk());
  }
  /// liger_bundle_open on the test's bundle (closed again where it opened).
  liger_status openAndClose() {
    liger_bundle *b = nullptr;
    liger_status s = liger_bundle_open(dir.c_str(), &b);
    liger_bundle_close(b);
    return s;
  }
};

/// Runs `call` with the N-th allocation failing, for N = 0, 1, ... until
/// no allocation fails; `check(failed)` judges each run. Returns how many
/// allocations the call makes.
template <typename Call, typename Check>
long everyAllocation(bool fromThenOn, Call call, Check check) {
  for (long n = 0; n < 100000; ++n) {
    arm(n, fromThenOn);
    auto result = call();
    bool failed = disarm();
    check(result, failed);
    if (!failed)
      return n;
  }
  ADD_FAILURE() << "the call did not finish without a failing allocation";
  return -1;
}

TEST_F(AllocFailureTest, OpenFailsWithAMessageAtEveryAllocation) {
  long allocations = everyAllocation(
      false, [&] { return openAndClose(); },
      [](liger_status s, bool failed) {
        if (!failed) {
          EXPECT_EQ(s, LIGER_OK) << liger_last_error();
          return;
        }
        EXPECT_EQ(s, LIGER_INTERNAL);
        EXPECT_TRUE(
            endsWith(liger_last_error(), ": out of memory (std::bad_alloc)"))
            << liger_last_error();
      });
  EXPECT_GT(allocations, 20); // the manifest, the JSON, the kernels, ...
}

// From the failing allocation on, none succeeds: not even the message's.
TEST_F(AllocFailureTest, OpenSurvivesRunningOutOfMemoryForGood) {
  everyAllocation(
      true, [&] { return openAndClose(); },
      [](liger_status s, bool failed) {
        EXPECT_EQ(s == LIGER_OK, !failed) << liger_last_error();
        if (failed) {
          EXPECT_NE(std::string(liger_last_error()), "");
        }
      });
}

TEST_F(AllocFailureTest, TheCppOpenReturnsAStatus) {
  everyAllocation(
      false,
      [&] {
        std::unique_ptr<Bundle> b;
        return Bundle::open(dir, &b);
      },
      [&](const Status &s, bool failed) {
        if (!failed) {
          EXPECT_TRUE(s.isOk()) << s.message();
          return;
        }
        EXPECT_EQ(s.code(), StatusCode::kInternal);
        EXPECT_TRUE(endsWith(s.message(), ": out of memory (std::bad_alloc)"))
            << s.message();
      });
}

// The calls that fail with a message (and so allocate) on an open bundle.
TEST_F(AllocFailureTest, FailingCallsFailWithAMessageAtEveryAllocation) {
  liger_bundle *b = nullptr;
  ASSERT_EQ(liger_bundle_open(dir.c_str(), &b), LIGER_OK);
  alignas(16) static char buf[64];
  int64_t shape[] = {3, 4095};
  liger_tensor wrong[] = {{buf, LIGER_BF16, 2, shape}};
  int32_t ranks[4];
  int64_t sizes[4 * LIGER_MAX_RANK];
  auto judge = [](const char *expected) {
    return [expected](liger_status s, bool failed) {
      std::string message = liger_last_error();
      if (!failed || s != LIGER_INTERNAL)
        EXPECT_EQ(message, expected);
      else
        EXPECT_TRUE(endsWith(message, ": out of memory (std::bad_alloc)"))
            << message;
      EXPECT_NE(s, LIGER_OK);
    };
  };
  everyAllocation(
      false,
      [&] { return liger_bundle_launch(b, "norm", wrong, 1, nullptr, 0); },
      judge("kernel 'norm': expects 4 tensors (inputs then outputs), got 1"));
  everyAllocation(
      false,
      [&] { return liger_bundle_launch(b, "nope", wrong, 1, nullptr, 0); },
      judge((dir + " has no kernel 'nope'").c_str()));
  everyAllocation(
      false,
      [&] { return liger_bundle_output_shapes(b, 0, wrong, 1, ranks, sizes); },
      judge("kernel 'norm': takes 2 input tensors (input0, input1), got 1"));
  liger_bundle_close(b);
}

} // namespace
