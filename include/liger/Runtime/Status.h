//===- Status.h - error values of the liger runtime -------------*- C++ -*-===//
//
// The runtime never throws through its API and never aborts: every fallible
// call returns a Status that carries a code, a message and where it was
// made. Adapters (LibTorch, Python) turn a failed Status into their own error
// mechanism. No MLIR, LLVM or Python headers here.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_RUNTIME_STATUS_H
#define LIGER_RUNTIME_STATUS_H

#include <exception>
#include <new>
#include <string>
#include <utility>

namespace liger::runtime {

/// What kind of failure a Status reports.
enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    ///< A caller passed something malformed.
  kNotFound,           ///< A file, kernel or symbol does not exist.
  kFailedPrecondition, ///< The system is not in a state to do this (no GPU).
  kUnavailable,        ///< A dependency (the CUDA driver) could not be loaded.
  kInternal,           ///< A CUDA or system call failed.
};

/// Returns the name of `code`, e.g. "INVALID_ARGUMENT".
const char *statusCodeName(StatusCode code);

/// The outcome of a runtime call: OK, or a code with a message and the
/// source location that produced it. Cheap to move; copying copies the
/// message.
class [[nodiscard]] Status {
public:
  /// An OK status.
  Status() = default;
  Status(StatusCode code, std::string message, const char *file = nullptr,
         int line = 0)
      : code_(code), message_(std::move(message)), file_(file), line_(line) {}

  static Status ok() { return Status(); }

  bool isOk() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return isOk(); }
  StatusCode code() const { return code_; }
  const std::string &message() const { return message_; }

  /// "OK", or "<CODE>: <message> (at <file>:<line>)".
  std::string toString() const;

private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  const char *file_ = nullptr;
  int line_ = 0;
};

/// Runs `body` and returns what it returns; where it throws, returns
/// `onException(why)` instead, `why` being "out of memory (std::bad_alloc)",
/// the exception's what(), or "an unknown C++ exception". The runtime's
/// entry points (Bundle, the C API) run their bodies through it: no C++
/// exception leaves them. `onException` must not throw.
template <typename Body, typename OnException>
auto catchExceptions(Body &&body, OnException &&onException) noexcept
    -> decltype(body()) {
  try {
    return body();
  } catch (const std::bad_alloc &) {
    return onException("out of memory (std::bad_alloc)");
  } catch (const std::exception &e) {
    return onException(e.what());
  } catch (...) {
    return onException("an unknown C++ exception");
  }
}

/// kInternal "<where>: <why>", for catchExceptions; where even that message
/// cannot be allocated, a status without one.
Status exceptionStatus(const char *where, const char *why) noexcept;

} // namespace liger::runtime

/// Makes a failed Status that records the current file and line.
#define LIGER_MAKE_STATUS(code, message)                                       \
  ::liger::runtime::Status((code), (message), __FILE__, __LINE__)

/// Evaluates `expr` (a Status) and returns it from the enclosing function if
/// it is not OK.
#define LIGER_RETURN_IF_ERROR(expr)                                            \
  do {                                                                         \
    ::liger::runtime::Status ligerStatus_ = (expr);                            \
    if (!ligerStatus_.isOk())                                                  \
      return ligerStatus_;                                                     \
  } while (false)

#endif // LIGER_RUNTIME_STATUS_H
