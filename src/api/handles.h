// The C ABI's view of Loom objects: opaque handles, the registry that tells
// live handles from destroyed or bogus ones, and the error channel
// (loomGetLastError) that every API function reports through.
//
// Communicator handles are reference counted, so loomCommAbort (or
// loomCommDestroy) on one thread cannot free a handle under a call that is
// running on another: the handle starts with one reference, its owner's,
// which destroy/abort drop; every API call holds one more (CommRef) for its
// duration; whoever drops the last one frees the communicator. Taking a
// reference is the registry lookup every call already did plus one atomic
// increment; releasing it is one atomic decrement.
//
// The per-call fast path takes no lock: a handle's memory (the small shell
// below, not its Communicator) is never returned to the allocator, so a
// pointer that was once a live handle can always be read. A call on one of
// the last few handles that passed the registry lookup only bumps `refs`
// and checks `live`; anything else takes the registry's lock as before.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "src/comm/comm.h"
#include "src/comm/stream.h"
#include "loom/loom.h"

struct loomComm {
  std::unique_ptr<loom::Communicator> impl;
  // The owner's reference plus one per API call in progress (see above).
  std::atomic<int> refs{1};
  // Set by loomCommAbort, so a call it interrupted can say so.
  std::atomic<bool> aborted{false};
  // True from registerComm to retireComm (both under the registry's lock).
  std::atomic<bool> live{false};
  // Set once by whoever frees the Communicator (refs reached zero).
  std::atomic<bool> buried{false};
};
struct loomStream {
  loom::Stream impl;
};

namespace loom::api {

// A reference to a live communicator handle, held for the duration of one API
// call: while it exists the handle and its Communicator stay allocated, even
// if another thread destroys or aborts the communicator meanwhile.
class CommRef {
 public:
  CommRef() = default;
  // Takes a reference if `comm` is live; otherwise the ref is empty and
  // status() says why (NULL, aborted, destroyed or never created), naming `call`.
  CommRef(loomComm_t comm, const char* call);
  ~CommRef() { reset(); }
  CommRef(CommRef&& other) noexcept : comm_(other.comm_), status_(std::move(other.status_)) { other.comm_ = nullptr; }
  CommRef& operator=(CommRef&& other) noexcept;
  CommRef(const CommRef&) = delete;
  CommRef& operator=(const CommRef&) = delete;

  explicit operator bool() const { return comm_ != nullptr; }
  loomComm_t get() const { return comm_; }
  loomComm_t operator->() const { return comm_; }
  const Status& status() const { return status_; }
  // Drops the reference (frees the communicator if it was the last one).
  void reset();

 private:
  loomComm_t comm_ = nullptr;
  Status status_;
};

// Makes a newly created handle (refs == 1) live.
void registerComm(loomComm_t comm);
// Why a handle stopped being live.
enum class Retire { kDestroy, kAbort };
// Takes `comm` out of the registry, so no new call can reference it; the
// caller then drops the owner's reference with releaseComm(). False if the
// handle was not live (another thread retired it first).
bool retireComm(loomComm_t comm, Retire why);
// True if `comm` was retired by loomCommAbort and not destroyed since.
bool wasAborted(loomComm_t comm);
// Forgets that `comm` was aborted (loomCommDestroy after loomCommAbort).
bool forgetAborted(loomComm_t comm);
// Drops one reference; the last one frees the handle's Communicator (the
// shell itself is kept, see above).
void releaseComm(loomComm_t comm);
bool isLiveComm(loomComm_t comm);

void registerStream(loomStream_t stream);
void unregisterStream(loomStream_t stream);
bool isLiveStream(loomStream_t stream);

loomResult_t toResult(Code code);
// Records `status` as the last error of this thread (and of `comm` if
// given), logs it as a warning, and returns its code. A non-null `comm` must
// be referenced by the caller (a CommRef), so it cannot be freed meanwhile.
loomResult_t fail(loomComm_t comm, const Status& status);
inline loomResult_t fail(const CommRef& comm, const Status& status) { return fail(comm.get(), status); }
const char* lastErrorOfThread();
// Makes `message` this thread's last error without logging it again (an
// error another thread already reported, handed to the caller that waits).
void setLastErrorOfThread(std::string message);

}  // namespace loom::api
