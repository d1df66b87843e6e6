//===- Status.cpp - error values of the liger runtime ---------------------===//

#include "liger/Runtime/Status.h"

#include <cstring>

using namespace liger::runtime;

const char *liger::runtime::statusCodeName(StatusCode code) {
  switch (code) {
  case StatusCode::kOk:
    return "OK";
  case StatusCode::kInvalidArgument:
    return "INVALID_ARGUMENT";
  case StatusCode::kNotFound:
    return "NOT_FOUND";
  case StatusCode::kFailedPrecondition:
    return "FAILED_PRECONDITION";
  case StatusCode::kUnavailable:
    return "UNAVAILABLE";
  case StatusCode::kInternal:
    return "INTERNAL";
  }
  return "UNKNOWN";
}

std::string Status::toString() const {
  if (isOk())
    return "OK";
  std::string out = statusCodeName(code_);
  out += ": ";
  out += message_;
  if (file_) {
    // Keep the path short: from the last "lib/" or "include/" on.
    const char *shown = file_;
    for (const char *marker : {"/lib/", "/include/"})
      if (const char *at = std::strstr(file_, marker))
        shown = at + 1;
    out += " (at ";
    out += shown;
    out += ":";
    out += std::to_string(line_);
    out += ")";
  }
  return out;
}

Status liger::runtime::exceptionStatus(const char *where,
                                       const char *why) noexcept {
  try {
    return Status(StatusCode::kInternal, std::string(where) + ": " + why);
  } catch (...) {
  }
  try {
    return Status(StatusCode::kInternal, "out of memory"); // short: no heap
  } catch (...) {
    return Status(StatusCode::kInternal, std::string());
  }
}
