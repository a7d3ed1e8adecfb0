#include "common/status.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace loom {

std::string vstrprintf(const char* fmt, va_list args) {
  va_list copy;
  va_copy(copy, args);
  int n = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  if (n <= 0) return {};
  std::string out(static_cast<size_t>(n), '\0');
  std::vsnprintf(out.data(), out.size() + 1, fmt, args);
  return out;
}

std::string strprintf(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  std::string out = vstrprintf(fmt, args);
  va_end(args);
  return out;
}

const char* codeName(Code code) {
  switch (code) {
    case Code::kSuccess: return "success";
    case Code::kUnhandledCudaError: return "unhandled cuda error";
    case Code::kSystemError: return "system error";
    case Code::kInternalError: return "internal error";
    case Code::kInvalidArgument: return "invalid argument";
    case Code::kInvalidUsage: return "invalid usage";
    case Code::kRemoteError: return "remote process exited or there was a network error";
    case Code::kInProgress: return "operation in progress";
    case Code::kTimeout: return "timeout";
  }
  return "unknown result code";
}

Status makeError(Code code, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  std::string msg = vstrprintf(fmt, args);
  va_end(args);
  return {code, std::move(msg)};
}

Status makeSystemError(int err, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  std::string msg = vstrprintf(fmt, args);
  va_end(args);
  msg += ": ";
  msg += std::strerror(err);
  return {Code::kSystemError, std::move(msg)};
}

}  // namespace loom
