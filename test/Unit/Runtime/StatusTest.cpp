//===- StatusTest.cpp - tests of liger::runtime::Status -------------------===//

#include "liger/Runtime/Status.h"

#include <gtest/gtest.h>
#include <stdexcept>

using namespace liger::runtime;

namespace {

Status failIfNegative(int value) {
  if (value < 0)
    return LIGER_MAKE_STATUS(StatusCode::kInvalidArgument,
                             "value must be >= 0, got " +
                                 std::to_string(value));
  return Status::ok();
}

Status chain(int value, bool *reachedEnd) {
  LIGER_RETURN_IF_ERROR(failIfNegative(value));
  *reachedEnd = true;
  return Status::ok();
}

TEST(StatusTest, DefaultIsOk) {
  Status status;
  EXPECT_TRUE(status.isOk());
  EXPECT_TRUE(static_cast<bool>(status));
  EXPECT_EQ(status.code(), StatusCode::kOk);
  EXPECT_EQ(status.toString(), "OK");
}

TEST(StatusTest, ErrorCarriesCodeMessageAndLocation) {
  Status status = failIfNegative(-3);
  ASSERT_FALSE(status.isOk());
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "value must be >= 0, got -3");
  std::string text = status.toString();
  EXPECT_EQ(text.rfind("INVALID_ARGUMENT: value must be >= 0, got -3 (at ", 0),
            0u)
      << text;
  EXPECT_NE(text.find("StatusTest.cpp:"), std::string::npos) << text;
}

TEST(StatusTest, ReturnIfErrorStopsAtTheFirstFailure) {
  bool reachedEnd = false;
  Status status = chain(-1, &reachedEnd);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(reachedEnd);

  status = chain(1, &reachedEnd);
  EXPECT_TRUE(status.isOk());
  EXPECT_TRUE(reachedEnd);
}

TEST(StatusTest, EveryCodeHasAName) {
  for (StatusCode code :
       {StatusCode::kOk, StatusCode::kInvalidArgument, StatusCode::kNotFound,
        StatusCode::kFailedPrecondition, StatusCode::kUnavailable,
        StatusCode::kInternal})
    EXPECT_STRNE(statusCodeName(code), "UNKNOWN");
}

TEST(StatusTest, AnExceptionBecomesAStatus) {
  auto guarded = [](auto body) {
    return catchExceptions(
        body, [](const char *why) { return exceptionStatus("b.bundle", why); });
  };
  Status s = guarded([]() -> Status { throw std::bad_alloc(); });
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_EQ(s.message(), "b.bundle: out of memory (std::bad_alloc)");
  s = guarded([]() -> Status { throw std::length_error("too long"); });
  EXPECT_EQ(s.message(), "b.bundle: too long");
  s = guarded([]() -> Status { throw 7; });
  EXPECT_EQ(s.message(), "b.bundle: an unknown C++ exception");
  s = guarded([] { return Status::ok(); });
  EXPECT_TRUE(s.isOk());
}

} // namespace
