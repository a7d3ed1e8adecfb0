#include "api/handles.h"

#include <mutex>
#include <unordered_set>

namespace loom::api {
namespace {

std::mutex registryMu;
std::unordered_set<const void*>& liveHandles() {
  static std::unordered_set<const void*> handles;
  return handles;
}

thread_local std::string threadLastError;

}  // namespace

void registerComm(loomComm_t comm) {
  std::lock_guard<std::mutex> lock(registryMu);
  liveHandles().insert(comm);
}
void unregisterComm(loomComm_t comm) {
  std::lock_guard<std::mutex> lock(registryMu);
  liveHandles().erase(comm);
}
bool isLiveComm(loomComm_t comm) {
  std::lock_guard<std::mutex> lock(registryMu);
  return liveHandles().count(comm) != 0;
}
void registerStream(loomStream_t stream) { registerComm(reinterpret_cast<loomComm_t>(stream)); }
void unregisterStream(loomStream_t stream) { unregisterComm(reinterpret_cast<loomComm_t>(stream)); }
bool isLiveStream(loomStream_t stream) { return isLiveComm(reinterpret_cast<loomComm_t>(stream)); }

loomResult_t toResult(Code code) { return static_cast<loomResult_t>(static_cast<int>(code)); }

loomResult_t fail(loomComm_t comm, const Status& status) {
  threadLastError = status.message();
  if (comm && isLiveComm(comm)) {
    comm->impl->setLastError(status.message());
    if (status.code() != Code::kInProgress) LOOM_WARN(comm->impl->log(), kSubsysColl, "%s", status.message().c_str());
  } else if (status.code() != Code::kInProgress) {
    LOOM_WARN(Logger::process(), kSubsysColl, "%s", status.message().c_str());
  }
  return toResult(status.code());
}

const char* lastErrorOfThread() { return threadLastError.c_str(); }

Status checkComm(loomComm_t comm, const char* call) {
  LOOM_ENFORCE(comm != nullptr, Code::kInvalidArgument, "%s: comm is NULL", call);
  LOOM_ENFORCE(isLiveComm(comm), Code::kInvalidArgument,
               "%s: comm %p is not a live communicator (destroyed, aborted or never created)", call,
               static_cast<void*>(comm));
  return Status::ok();
}

}  // namespace loom::api
