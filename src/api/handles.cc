#include "src/api/handles.h"

#include <mutex>
#include <unordered_set>
#include <vector>

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

// Shells of handles whose Communicator was freed: kept (reachable, so leak
// checkers stay quiet) because fast-path callers may still read them.
std::vector<loomComm_t>& graveyard() {
  static auto* shells = new std::vector<loomComm_t>;
  return *shells;
}

// Handles that recently passed the registry lookup, filled round-robin under
// registryMu. Every entry points at a shell, which is never freed, so the
// fast path may dereference it without the lock.
constexpr int kRecentHandles = 8;
std::atomic<loomComm_t> recentHandles[kRecentHandles];
int nextRecent = 0;  // guarded by registryMu

bool isRecentHandle(loomComm_t comm) {
  for (const auto& h : recentHandles)
    if (h.load(std::memory_order_relaxed) == comm) return true;
  return false;
}

void rememberRecent(loomComm_t comm) {  // registryMu held
  if (isRecentHandle(comm)) return;
  recentHandles[nextRecent].store(comm, std::memory_order_relaxed);
  nextRecent = (nextRecent + 1) % kRecentHandles;
}

}  // namespace

CommRef::CommRef(loomComm_t comm, const char* call) {
  if (!comm) {
    status_ = makeError(Code::kInvalidArgument, "%s: comm is NULL", call);
    return;
  }
  if (isRecentHandle(comm)) {
    // seq_cst pairs with retireComm's store of live = false: either we see
    // it and back off, or our reference is counted before the owner's
    // reference is dropped, so the Communicator cannot be freed under us.
    comm->refs.fetch_add(1, std::memory_order_seq_cst);
    if (comm->live.load(std::memory_order_seq_cst)) {
      comm_ = comm;
      return;
    }
    releaseComm(comm);  // retired meanwhile: the lookup below says how
  }
  {
    std::lock_guard<std::mutex> lock(registryMu);
    if (liveComms().count(comm) != 0) {
      comm->refs.fetch_add(1, std::memory_order_relaxed);
      comm_ = comm;
      rememberRecent(comm);
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
  abortedComms().erase(comm);  // defensive: shells are never freed, so addresses are not reused
  comm->live.store(true, std::memory_order_seq_cst);
}

bool retireComm(loomComm_t comm, Retire why) {
  std::lock_guard<std::mutex> lock(registryMu);
  if (liveComms().erase(comm) == 0) return false;
  comm->live.store(false, std::memory_order_seq_cst);
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
  if (comm->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  // A fast-path caller that found the handle retired also drops its
  // reference here, so zero can be reached twice: free only once.
  if (comm->buried.exchange(true, std::memory_order_acq_rel)) return;
  std::unique_ptr<loom::Communicator> impl = std::move(comm->impl);
  impl.reset();
  std::lock_guard<std::mutex> lock(registryMu);
  graveyard().push_back(comm);
}

bool isLiveComm(loomComm_t comm) {
  std::lock_guard<std::mutex> lock(registryMu);
  return liveComms().count(comm) != 0;
}

namespace {
// Streams that recently passed the lookup: a call on a stream checks its
// handle without the registry lock (a stream call on the latency path pays
// for every lock). Entries are cleared when their stream is destroyed, under
// registryMu, so a hit is a live stream; using a stream while another thread
// destroys it is the caller's race, with or without the lock.
std::atomic<loomStream_t> recentStreams[kRecentHandles];
int nextRecentStream = 0;  // guarded by registryMu
}  // namespace

void registerStream(loomStream_t stream) {
  std::lock_guard<std::mutex> lock(registryMu);
  liveStreams().insert(stream);
}
void unregisterStream(loomStream_t stream) {
  std::lock_guard<std::mutex> lock(registryMu);
  liveStreams().erase(stream);
  for (auto& recent : recentStreams)
    if (recent.load(std::memory_order_relaxed) == stream) recent.store(nullptr, std::memory_order_relaxed);
}
bool isLiveStream(loomStream_t stream) {
  for (const auto& recent : recentStreams)
    if (stream && recent.load(std::memory_order_relaxed) == stream) return true;
  std::lock_guard<std::mutex> lock(registryMu);
  if (liveStreams().count(stream) == 0) return false;
  recentStreams[nextRecentStream].store(stream, std::memory_order_relaxed);
  nextRecentStream = (nextRecentStream + 1) % kRecentHandles;
  return true;
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

void setLastErrorOfThread(std::string message) { threadLastError = std::move(message); }

}  // namespace loom::api
