#include "api/handles.h"

#include <mutex>
#include <unordered_set>

namespace loom::api {
namespace {

// One lock for both tables: every API call takes it once, to look its
// handle up and reference it in one step (a handle found live cannot be
// freed before its reference count went up).
std::mutex registryMu;
std::unordered_set<const void*>& liveComms() {
  static std::unordered_set<const void*> handles;
  return handles;
}
std::unordered_set<const void*>& liveStreams() {
  static std::unordered_set<const void*> handles;
  return handles;
}
// Addresses of communicators aborted and not destroyed since: lets a later
// call say "aborted" instead of "not a live communicator", and lets
// loomCommDestroy after loomCommAbort succeed without touching freed memory.
// Bounded: a program that aborts without destroying forgets the oldest
// (their calls then get the generic message).
constexpr size_t kMaxRememberedAborts = 4096;
std::unordered_set<const void*>& abortedComms() {
  static std::unordered_set<const void*> handles;
  return handles;
}

thread_local std::string threadLastError;

}  // namespace

CommRef::CommRef(loomComm_t comm, const char* call) {
  if (!comm) {
    status_ = makeError(Code::kInvalidArgument, "%s: comm is NULL", call);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(registryMu);
    if (liveComms().count(comm) != 0) {
      comm->refs.fetch_add(1, std::memory_order_relaxed);
      comm_ = comm;
      return;
    }
    if (abortedComms().count(comm) != 0) {
      status_ = makeError(Code::kInvalidUsage,
                          "%s: comm %p was aborted (loomCommAbort); it accepts only loomCommDestroy now, create a "
                          "new communicator to go on",
                          call, static_cast<void*>(comm));
      return;
    }
  }
  status_ = makeError(Code::kInvalidArgument,
                      "%s: comm %p is not a live communicator (destroyed, aborted or never created)", call,
                      static_cast<void*>(comm));
}

CommRef& CommRef::operator=(CommRef&& other) noexcept {
  if (this != &other) {
    reset();
    comm_ = other.comm_;
    status_ = std::move(other.status_);
    other.comm_ = nullptr;
  }
  return *this;
}

void CommRef::reset() {
  if (comm_) releaseComm(comm_);
  comm_ = nullptr;
}

void registerComm(loomComm_t comm) {
  std::lock_guard<std::mutex> lock(registryMu);
  liveComms().insert(comm);
  abortedComms().erase(comm);  // the allocator reused a freed handle's address
}

bool retireComm(loomComm_t comm, Retire why) {
  std::lock_guard<std::mutex> lock(registryMu);
  if (liveComms().erase(comm) == 0) return false;
  if (why == Retire::kAbort) {
    if (abortedComms().size() >= kMaxRememberedAborts) abortedComms().clear();
    abortedComms().insert(comm);
  }
  return true;
}

bool wasAborted(loomComm_t comm) {
  std::lock_guard<std::mutex> lock(registryMu);
  return abortedComms().count(comm) != 0;
}

bool forgetAborted(loomComm_t comm) {
  std::lock_guard<std::mutex> lock(registryMu);
  return abortedComms().erase(comm) != 0;
}

void releaseComm(loomComm_t comm) {
  // acq_rel: the thread that frees must see every other holder's writes.
  if (comm->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete comm;
}

bool isLiveComm(loomComm_t comm) {
  std::lock_guard<std::mutex> lock(registryMu);
  return liveComms().count(comm) != 0;
}

void registerStream(loomStream_t stream) {
  std::lock_guard<std::mutex> lock(registryMu);
  liveStreams().insert(stream);
}
void unregisterStream(loomStream_t stream) {
  std::lock_guard<std::mutex> lock(registryMu);
  liveStreams().erase(stream);
}
bool isLiveStream(loomStream_t stream) {
  std::lock_guard<std::mutex> lock(registryMu);
  return liveStreams().count(stream) != 0;
}

loomResult_t toResult(Code code) { return static_cast<loomResult_t>(static_cast<int>(code)); }

loomResult_t fail(loomComm_t comm, const Status& status) {
  // A call that loomCommAbort interrupted says so: its own message only
  // names the wait that ended.
  Status reported = status;
  if (comm && comm->aborted.load(std::memory_order_acquire) && status.code() != Code::kInProgress)
    reported = Status(status.code(), status.message() + " (the communicator was aborted by loomCommAbort during the call)");
  threadLastError = reported.message();
  if (comm) {
    comm->impl->setLastError(reported.message());
    if (reported.code() != Code::kInProgress)
      LOOM_WARN(comm->impl->log(), kSubsysColl, "%s", reported.message().c_str());
  } else if (reported.code() != Code::kInProgress) {
    LOOM_WARN(Logger::process(), kSubsysColl, "%s", reported.message().c_str());
  }
  return toResult(reported.code());
}

const char* lastErrorOfThread() { return threadLastError.c_str(); }

}  // namespace loom::api
