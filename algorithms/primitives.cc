#include "algorithms/primitives.h"

#include <algorithm>
#include <cstring>

#include "kernels/reduce.h"
#include "kernels/stream_copy.h"

namespace loom::algo {
namespace {

// A received chunk must be exactly as long as the step expects: every rank
// computes the same piece boundaries, so a mismatch means the ranks called
// different collectives (or a transport bug) and continuing would corrupt.
Status checkLength(size_t got, size_t want, int from) {
  if (got == want) return Status::ok();
  return makeError(Code::kRemoteError,
                   "received %zu bytes from rank %d where %zu were expected "
                   "(do all ranks call the same collective with the same count and type?)",
                   got, from, want);
}

}  // namespace

Status reduceOnOneRank(const CollArgs& args) {
  kernels::finalize(args.dtype, args.op, 1, args.recvbuf, args.sendbuf, args.count);
  return Status::ok();
}

Status Steps::send(int peer, const void* src, size_t count) {
  auto& conn = ctx_.links->sendTo(peer);
  std::byte* slot = nullptr;
  LOOM_TRY(conn.acquire(&slot, ctx_.wait));
  size_t bytes = count * elemSize();
  if (bytes) std::memcpy(slot, src, bytes);
  conn.commit(bytes);
  advanced();
  return Status::ok();
}

Status Steps::recv(int peer, void* dst, size_t count) {
  auto& conn = ctx_.links->recvFrom(peer);
  const std::byte* data = nullptr;
  size_t got = 0;
  LOOM_TRY(conn.acquire(&data, &got, ctx_.wait));
  size_t bytes = count * elemSize();
  Status st = checkLength(got, bytes, peer);
  if (st.isOk() && bytes) {
    if (streamOutputs_) kernels::copyStreaming(dst, data, bytes);
    else std::memcpy(dst, data, bytes);
  }
  conn.release();
  advanced();
  return st;
}

Status Steps::recvReduceSend(int from, int to, const void* local, size_t count) {
  auto& in = ctx_.links->recvFrom(from);
  auto& out = ctx_.links->sendTo(to);
  const std::byte* data = nullptr;
  size_t got = 0;
  LOOM_TRY(in.acquire(&data, &got, ctx_.wait));
  LOOM_TRY(checkLength(got, count * elemSize(), from));
  std::byte* slot = nullptr;
  LOOM_TRY(out.acquire(&slot, ctx_.wait));
  kernels::reduce(red_.dtype, red_.op, slot, data, local, count);
  out.commit(count * elemSize());
  in.release();
  advanced();
  return Status::ok();
}

Status Steps::recvReduceInPlace(int from, void* inout, size_t count, bool receivedFirst) {
  auto& in = ctx_.links->recvFrom(from);
  const std::byte* data = nullptr;
  size_t got = 0;
  LOOM_TRY(in.acquire(&data, &got, ctx_.wait));
  LOOM_TRY(checkLength(got, count * elemSize(), from));
  if (receivedFirst) kernels::reduce(red_.dtype, red_.op, inout, data, inout, count);
  else kernels::reduce(red_.dtype, red_.op, inout, inout, data, count);
  in.release();
  advanced();
  return Status::ok();
}

Status Steps::recvReduceFinal(int from, const void* local, void* dst, size_t count) {
  auto& in = ctx_.links->recvFrom(from);
  const std::byte* data = nullptr;
  size_t got = 0;
  LOOM_TRY(in.acquire(&data, &got, ctx_.wait));
  const size_t bytes = count * elemSize();
  LOOM_TRY(checkLength(got, bytes, from));
  if (streamReduced_ && bytes) {
    std::byte* result = scratch(bytes);
    kernels::reduceFinal(red_.dtype, red_.op, red_.nranks, result, data, local, count);
    kernels::copyStreaming(dst, result, bytes);
  } else {
    kernels::reduceFinal(red_.dtype, red_.op, red_.nranks, dst, data, local, count);
  }
  in.release();
  advanced();
  return Status::ok();
}

Status Steps::recvReduceFinalSend(int from, int to, const void* local, void* dst, size_t count) {
  LOOM_TRY(recvReduceFinal(from, local, dst, count));
  return send(to, dst, count);
}

Status Steps::recvCopySend(int from, int to, void* dst, size_t count) {
  auto& in = ctx_.links->recvFrom(from);
  auto& out = ctx_.links->sendTo(to);
  const std::byte* data = nullptr;
  size_t got = 0;
  LOOM_TRY(in.acquire(&data, &got, ctx_.wait));
  size_t bytes = count * elemSize();
  LOOM_TRY(checkLength(got, bytes, from));
  std::byte* slot = nullptr;
  LOOM_TRY(out.acquire(&slot, ctx_.wait));
  if (bytes && streamOutputs_) {
    std::memcpy(slot, data, bytes);
    kernels::copyStreaming(dst, data, bytes);
  } else if (bytes) {
    std::memcpy(dst, data, bytes);
    std::memcpy(slot, dst, bytes);  // from dst: it is hot in cache now
  }
  out.commit(bytes);
  in.release();
  advanced();
  return Status::ok();
}

Status Steps::recvCopySendTwo(int from, int to0, int to1, void* dst, size_t count) {
  auto& in = ctx_.links->recvFrom(from);
  auto& out0 = ctx_.links->sendTo(to0);
  auto& out1 = ctx_.links->sendTo(to1);
  const std::byte* data = nullptr;
  size_t got = 0;
  LOOM_TRY(in.acquire(&data, &got, ctx_.wait));
  const size_t bytes = count * elemSize();
  LOOM_TRY(checkLength(got, bytes, from));
  std::byte* slot0 = nullptr;
  std::byte* slot1 = nullptr;
  LOOM_TRY(out0.acquire(&slot0, ctx_.wait));
  LOOM_TRY(out1.acquire(&slot1, ctx_.wait));
  if (bytes) {
    std::memcpy(slot0, data, bytes);
    std::memcpy(slot1, data, bytes);
    if (streamOutputs_) kernels::copyStreaming(dst, data, bytes);
    else std::memcpy(dst, data, bytes);
  }
  out0.commit(bytes);
  out1.commit(bytes);
  in.release();
  advanced();
  return Status::ok();
}

Status Steps::acquireTwo(int from0, int from1, size_t count, const std::byte** data0, const std::byte** data1) {
  size_t got0 = 0, got1 = 0;
  LOOM_TRY(ctx_.links->recvFrom(from0).acquire(data0, &got0, ctx_.wait));
  LOOM_TRY(checkLength(got0, count * elemSize(), from0));
  LOOM_TRY(ctx_.links->recvFrom(from1).acquire(data1, &got1, ctx_.wait));
  return checkLength(got1, count * elemSize(), from1);
}

Status Steps::recv2ReduceSend(int from0, int from1, int to, const void* local, size_t count) {
  const std::byte* data0 = nullptr;
  const std::byte* data1 = nullptr;
  LOOM_TRY(acquireTwo(from0, from1, count, &data0, &data1));
  auto& out = ctx_.links->sendTo(to);
  std::byte* slot = nullptr;
  LOOM_TRY(out.acquire(&slot, ctx_.wait));
  kernels::reduce(red_.dtype, red_.op, slot, data0, local, count);
  kernels::reduce(red_.dtype, red_.op, slot, data1, slot, count);
  out.commit(count * elemSize());
  ctx_.links->recvFrom(from0).release();
  ctx_.links->recvFrom(from1).release();
  advanced();
  return Status::ok();
}

Status Steps::recv2ReduceFinal(int from0, int from1, const void* local, void* dst, size_t count) {
  const std::byte* data0 = nullptr;
  const std::byte* data1 = nullptr;
  LOOM_TRY(acquireTwo(from0, from1, count, &data0, &data1));
  const size_t bytes = count * elemSize();
  if (streamReduced_ && bytes) {
    std::byte* result = scratch(bytes);
    kernels::reduce(red_.dtype, red_.op, result, data0, local, count);
    kernels::reduceFinal(red_.dtype, red_.op, red_.nranks, result, data1, result, count);
    kernels::copyStreaming(dst, result, bytes);
  } else {
    kernels::reduce(red_.dtype, red_.op, dst, data0, local, count);
    kernels::reduceFinal(red_.dtype, red_.op, red_.nranks, dst, data1, dst, count);
  }
  ctx_.links->recvFrom(from0).release();
  ctx_.links->recvFrom(from1).release();
  advanced();
  return Status::ok();
}

std::byte* Steps::scratch(size_t bytes) {
  if (scratch_.size() < bytes) scratch_.resize(std::max(bytes, ctx_.chunkBytes));
  return scratch_.data();
}

Status chunkElemsFor(const CollArgs& args, const AlgoContext& ctx, const char* algorithm, size_t* elems) {
  *elems = ctx.chunkBytes / dataTypeSize(args.dtype);
  LOOM_ENFORCE(*elems > 0, Code::kInvalidArgument, "%s on rank %d: chunk size %zu bytes is smaller than one %s element",
               algorithm, ctx.rank, ctx.chunkBytes, dataTypeName(args.dtype));
  return Status::ok();
}

}  // namespace loom::algo
