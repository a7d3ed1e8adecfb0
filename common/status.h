// Status and Result<T>: the error channel of every layer below src/api.
//
// A Status is a code (NCCL's categories, see loom.h) plus a message that says
// what went wrong in words a user can act on ("root 9 out of range [0, 4) on
// rank 2"). Success carries no allocation. Result<T> is a small `expected`.
#pragma once

#include <cstdarg>
#include <optional>
#include <string>
#include <utility>

#include "common/format.h"

namespace loom {

enum class Code : int {
  kSuccess = 0,
  kUnhandledCudaError = 1,
  kSystemError = 2,
  kInternalError = 3,
  kInvalidArgument = 4,
  kInvalidUsage = 5,
  kRemoteError = 6,
  kInProgress = 7,
  kTimeout = 8,
};

const char* codeName(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return {}; }

  bool isOk() const { return code_ == Code::kSuccess; }
  explicit operator bool() const { return isOk(); }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // Prepends context ("allreduce on rank 3: ") to the message; keeps the code.
  Status withContext(const std::string& context) const {
    if (isOk()) return *this;
    return {code_, context + message_};
  }

 private:
  Code code_ = Code::kSuccess;
  std::string message_;
};

// Builds a failed Status with a printf-style message.
Status makeError(Code code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
// A kSystemError that appends strerror(err).
Status makeSystemError(int err, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {}  // NOLINT

  bool isOk() const { return status_.isOk(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace loom

// Propagates a failed Status (or Result) to the caller.
#define LOOM_TRY(expr)                                   \
  do {                                                   \
    ::loom::Status loom_try_status_ = (expr);            \
    if (!loom_try_status_.isOk()) return loom_try_status_; \
  } while (0)

// Returns `code` with a formatted message unless `cond` holds.
#define LOOM_ENFORCE(cond, code, ...)                     \
  do {                                                    \
    if (!(cond)) return ::loom::makeError((code), __VA_ARGS__); \
  } while (0)
