// The C ABI's view of Loom objects: opaque handles, the registry that tells
// live handles from destroyed or bogus ones, and the error channel
// (loomGetLastError) that every API function reports through.
#pragma once

#include <memory>
#include <string>

#include "comm/comm.h"
#include "comm/stream.h"
#include "loom/loom.h"

struct loomComm {
  std::unique_ptr<loom::Communicator> impl;
};
struct loomStream {
  loom::Stream impl;
};

namespace loom::api {

void registerComm(loomComm_t comm);
void unregisterComm(loomComm_t comm);
bool isLiveComm(loomComm_t comm);
void registerStream(loomStream_t stream);
void unregisterStream(loomStream_t stream);
bool isLiveStream(loomStream_t stream);

loomResult_t toResult(Code code);
// Records `status` as the last error of this thread (and of `comm` if
// given), logs it as a warning, and returns its code.
loomResult_t fail(loomComm_t comm, const Status& status);
const char* lastErrorOfThread();

// Checks that `comm` is a live communicator; the message names the call.
Status checkComm(loomComm_t comm, const char* call);

}  // namespace loom::api
