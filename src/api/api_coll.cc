// C ABI: the collectives. Each builds CollArgs, validates them on the
// communicator, then queues them (or defers them to the open group).
#include "src/api/group.h"
#include "src/api/handles.h"

using loom::Code;
using loom::Status;
using loom::algo::CollArgs;
using loom::algo::CollType;

namespace {

loomResult_t submit(const char* call, loomComm_t comm, loomStream_t stream, const CollArgs& args) {
  // Held to the end of the call: a concurrent loomCommAbort cannot free comm under us.
  loom::api::CommRef ref{comm, call};
  if (!ref) return loom::api::fail(nullptr, ref.status());
  try {
    if (stream && !loom::api::isLiveStream(stream))
      return loom::api::fail(ref, loom::makeError(Code::kInvalidArgument, "%s on rank %d: stream %p is not a live stream",
                                                  call, comm->impl->rank(), static_cast<void*>(stream)));
    // The host executor cannot run inside a CUDA graph (Stream::requireNotCapturing);
    // the device engine's kernels can. A host stream has no capture to ask about.
    if (stream && stream->impl.device()) {
      if (Status capture = stream->impl.requireNotCapturing(call, comm->impl->rank());
          !capture.isOk() && !comm->impl->engineTakes(args, &stream->impl))
        return loom::api::fail(ref, capture);
    }
    Status s = comm->impl->validate(args);
    if (!s.isOk()) return loom::api::fail(ref, s);
    if (loom::api::inGroup()) {
      loom::api::deferCollective(comm, args, stream);
      return loomSuccess;
    }
    s = comm->impl->enqueue(args, stream ? &stream->impl : nullptr);
    return s.isOk() ? loomSuccess : loom::api::fail(ref, s);
  } catch (const std::exception& e) {
    return loom::api::fail(ref, loom::makeError(Code::kInternalError, "%s: unexpected exception: %s", call, e.what()));
  }
}

CollArgs makeArgs(CollType type, const void* send, void* recv, size_t count, loomDataType_t dtype,
                  loomRedOp_t op, int root) {
  CollArgs a;
  a.type = type;
  a.sendbuf = send;
  a.recvbuf = recv;
  a.count = count;
  a.dtype = static_cast<loom::DataType>(dtype);
  a.op = static_cast<loom::RedOp>(op);
  a.root = root;
  return a;
}

}  // namespace

extern "C" {

loomResult_t loomAllReduce(const void* sendbuff, void* recvbuff, size_t count, loomDataType_t datatype,
                           loomRedOp_t op, loomComm_t comm, loomStream_t stream) {
  return submit("loomAllReduce", comm, stream,
                makeArgs(CollType::kAllReduce, sendbuff, recvbuff, count, datatype, op, 0));
}

loomResult_t loomBroadcast(const void* sendbuff, void* recvbuff, size_t count, loomDataType_t datatype, int root,
                           loomComm_t comm, loomStream_t stream) {
  return submit("loomBroadcast", comm, stream,
                makeArgs(CollType::kBroadcast, sendbuff, recvbuff, count, datatype, loomSum, root));
}

loomResult_t loomBcast(void* buff, size_t count, loomDataType_t datatype, int root, loomComm_t comm,
                       loomStream_t stream) {
  return submit("loomBcast", comm, stream, makeArgs(CollType::kBroadcast, buff, buff, count, datatype, loomSum, root));
}

loomResult_t loomReduce(const void* sendbuff, void* recvbuff, size_t count, loomDataType_t datatype, loomRedOp_t op,
                        int root, loomComm_t comm, loomStream_t stream) {
  return submit("loomReduce", comm, stream, makeArgs(CollType::kReduce, sendbuff, recvbuff, count, datatype, op, root));
}

loomResult_t loomReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, loomDataType_t datatype,
                               loomRedOp_t op, loomComm_t comm, loomStream_t stream) {
  return submit("loomReduceScatter", comm, stream,
                makeArgs(CollType::kReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, 0));
}

loomResult_t loomAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, loomDataType_t datatype,
                           loomComm_t comm, loomStream_t stream) {
  return submit("loomAllGather", comm, stream,
                makeArgs(CollType::kAllGather, sendbuff, recvbuff, sendcount, datatype, loomSum, 0));
}

}  // extern "C"
