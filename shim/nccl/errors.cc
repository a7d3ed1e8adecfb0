#include "shim/nccl/errors.h"

#include <cctype>
#include <cstdarg>
#include <cstdio>
#include <string>

namespace loom::nccl_shim {
namespace {

thread_local std::string threadLastError;

bool isWordChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

}  // namespace

std::string withNcclNames(const char* loomMessage) {
  std::string text = loomMessage ? loomMessage : "";
  for (size_t at = text.find("loom"); at != std::string::npos; at = text.find("loom", at + 4)) {
    const bool wordStart = at == 0 || !isWordChar(text[at - 1]);
    const bool apiName = at + 4 < text.size() && std::isupper(static_cast<unsigned char>(text[at + 4]));
    if (wordStart && apiName) text.replace(at, 4, "nccl");
  }
  return text;
}

ncclResult_t fromLoom(loomResult_t result) {
  if (result == loomSuccess) return ncclSuccess;
  threadLastError = withNcclNames(loomGetLastError(nullptr));  // Loom records every failure per thread too
  switch (result) {
    case loomUnhandledCudaError: return ncclUnhandledCudaError;
    case loomSystemError: return ncclSystemError;
    case loomInternalError: return ncclInternalError;
    case loomInvalidArgument: return ncclInvalidArgument;
    case loomInvalidUsage: return ncclInvalidUsage;
    case loomRemoteError: return ncclRemoteError;
    case loomInProgress: return ncclInProgress;
    // NCCL has no timeout code: a wait past LOOM_TIMEOUT means a peer did
    // not answer, which NCCL reports as a remote error. The message says timeout.
    case loomTimeout: return ncclRemoteError;
    default: return ncclInternalError;
  }
}

ncclResult_t fail(ncclResult_t code, const char* format, ...) {
  char buffer[1024];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buffer, sizeof(buffer), format, args);
  va_end(args);
  threadLastError = buffer;
  return code;
}

const char* lastErrorOfThread() { return threadLastError.c_str(); }

ncclResult_t rankOf(const char* call, ncclComm_t comm, int* rank) {
  if (!comm) return fail(ncclInvalidArgument, "%s: comm is NULL", call);
  const loomResult_t r = loomCommUserRank(toLoom(comm), rank);
  if (r == loomSuccess) return ncclSuccess;
  const ncclResult_t code = fromLoom(r);
  // Loom's message names the query ("loomCommUserRank: comm ... was aborted"): name the caller's call.
  std::string message = threadLastError;
  const std::string asked = "ncclCommUserRank";
  if (size_t at = message.find(asked); at != std::string::npos) message.replace(at, asked.size(), call);
  threadLastError = message;
  return code;
}

ncclResult_t checkDataType(const char* call, int rank, ncclDataType_t datatype) {
  const int value = static_cast<int>(datatype);
  if (value >= ncclInt8 && value <= ncclBfloat16) return ncclSuccess;  // the same values as loomDataType_t
  if (value == ncclFloat8e4m3 || value == ncclFloat8e5m2)
    return fail(ncclInvalidArgument,
                "%s on rank %d: datatype %s (%d) is not supported by Loom (it has ncclInt8 .. ncclBfloat16, 0..9)",
                call, rank, value == ncclFloat8e4m3 ? "ncclFloat8e4m3" : "ncclFloat8e5m2", value);
  return fail(ncclInvalidArgument, "%s on rank %d: datatype %d is not an ncclDataType_t (valid: 0..%d)", call,
              rank, value, ncclNumTypes - 1);
}

}  // namespace loom::nccl_shim
