// C ABI: point to point (loomSend, loomRecv), loomAllToAll and loomBarrier.
// Each validates on the communicator, then queues (or defers to the open
// group, see group.h for the order a group runs them in).
#include "src/api/group.h"
#include "src/api/handles.h"

using loom::Code;
using loom::Status;
using loom::algo::P2POp;

namespace {

// Runs `body` with a reference to comm held (a concurrent loomCommAbort
// cannot free it meanwhile), turning escaped exceptions into loomInternalError.
template <class Body>
loomResult_t guarded(const char* call, loomComm_t comm, Body&& body) {
  loom::api::CommRef ref{comm, call};
  if (!ref) return loom::api::fail(nullptr, ref.status());
  try {
    return body(ref);
  } catch (const std::exception& e) {
    return loom::api::fail(ref, loom::makeError(Code::kInternalError, "%s: unexpected exception: %s", call, e.what()));
  }
}

// NULL (blocking) or a live stream; comm is live.
// `ops`: the transfers of the call, when the device engine may run them (its
// kernels can be captured into a CUDA graph; the host executor cannot).
Status checkStream(const char* call, loomComm_t comm, loomStream_t stream,
                   const std::vector<P2POp>* ops = nullptr) {
  LOOM_ENFORCE(!stream || loom::api::isLiveStream(stream), Code::kInvalidArgument,
               "%s on rank %d: stream %p is not a live stream", call, comm->impl->rank(), static_cast<void*>(stream));
  if (!stream) return Status::ok();
  Status capture = stream->impl.requireNotCapturing(call, comm->impl->rank());
  if (!capture.isOk() && ops && comm->impl->engineTakesP2P(*ops, &stream->impl)) return Status::ok();
  return capture;
}

loom::Stream* implOf(loomStream_t stream) { return stream ? &stream->impl : nullptr; }

loomResult_t submitP2P(const char* call, const char* bufName, const void* buf, size_t count, loomDataType_t datatype,
                       int peer, P2POp::Kind kind, loomComm_t comm, loomStream_t stream) {
  return guarded(call, comm, [&](const loom::api::CommRef& ref) -> loomResult_t {
    Status s = comm->impl->validateP2P(call, bufName, buf, count, static_cast<loom::DataType>(datatype), peer);
    const size_t bytes = s.isOk() ? count * loom::dataTypeSize(static_cast<loom::DataType>(datatype)) : 0;
    const P2POp op = kind == P2POp::kSend ? P2POp::send(peer, buf, bytes)
                                          : P2POp::recv(peer, const_cast<void*>(buf), bytes);
    const std::vector<P2POp> single{op};
    if (Status checked = checkStream(call, comm, stream, &single); !checked.isOk()) s = checked;
    if (!s.isOk()) return loom::api::fail(ref, s);
    if (loom::api::inGroup()) {
      s = loom::api::deferP2P(comm, op, stream);
      return s.isOk() ? loomSuccess : loom::api::fail(ref, s);
    }
    // Alone, a send to self could only complete with a recv that has not
    // been called yet: the pair must share a group (and so one fused op).
    if (peer == comm->impl->rank())
      return loom::api::fail(
          ref, loom::makeError(Code::kInvalidUsage,
                               "%s on rank %d: peer %d is this rank; a send/recv to self must be matched by its "
                               "recv/send inside the same loomGroupStart/loomGroupEnd",
                               call, comm->impl->rank(), peer));
    s = comm->impl->enqueueP2P({op}, implOf(stream));
    return s.isOk() ? loomSuccess : loom::api::fail(ref, s);
  });
}

}  // namespace

extern "C" {

loomResult_t loomSend(const void* sendbuff, size_t count, loomDataType_t datatype, int peer, loomComm_t comm,
                      loomStream_t stream) {
  return submitP2P("loomSend", "sendbuff", sendbuff, count, datatype, peer, P2POp::kSend, comm, stream);
}

loomResult_t loomRecv(void* recvbuff, size_t count, loomDataType_t datatype, int peer, loomComm_t comm,
                      loomStream_t stream) {
  return submitP2P("loomRecv", "recvbuff", recvbuff, count, datatype, peer, P2POp::kRecv, comm, stream);
}

loomResult_t loomAllToAll(const void* sendbuff, void* recvbuff, size_t count, loomDataType_t datatype,
                          loomComm_t comm, loomStream_t stream) {
  const char* call = "loomAllToAll";
  return guarded(call, comm, [&](const loom::api::CommRef& ref) -> loomResult_t {
    const auto dtype = static_cast<loom::DataType>(datatype);
    Status s = comm->impl->validateAllToAll(sendbuff, recvbuff, count, dtype);
    if (!s.isOk()) return loom::api::fail(ref, s);
    auto ops = comm->impl->allToAllOps(sendbuff, recvbuff, count, dtype);
    s = checkStream(call, comm, stream, &ops);
    if (!s.isOk()) return loom::api::fail(ref, s);
    const auto desc = loom::OpDescriptor::allToAll(count, dtype);  // for LOOM_CHECK and the flight recorder
    if (loom::api::inGroup()) {
      loom::api::deferOrdered(comm, stream, [comm, desc, ops = std::move(ops)](loom::Stream* st) mutable {
        return comm->impl->enqueueP2PAsync(std::move(ops), st, &desc);
      });
      return loomSuccess;
    }
    s = comm->impl->enqueueP2P(std::move(ops), implOf(stream), &desc);
    return s.isOk() ? loomSuccess : loom::api::fail(ref, s);
  });
}

loomResult_t loomBarrier(loomComm_t comm, loomStream_t stream) {
  const char* call = "loomBarrier";
  return guarded(call, comm, [&](const loom::api::CommRef& ref) -> loomResult_t {
    Status s = checkStream(call, comm, stream);
    if (!s.isOk()) return loom::api::fail(ref, s);
    if (loom::api::inGroup()) {
      loom::api::deferOrdered(comm, stream, [comm](loom::Stream* st) { return comm->impl->enqueueBarrierAsync(st); });
      return loomSuccess;
    }
    s = comm->impl->enqueueBarrier(implOf(stream));
    return s.isOk() ? loomSuccess : loom::api::fail(ref, s);
  });
}

}  // extern "C"
