#include "algorithms/rank_order_fold.h"

#include <cstring>

#include "kernels/reduce.h"

namespace loom::algo {

void foldInRankOrder(const Reduction& red, const std::byte* const* x, void* dst, size_t count) {
  const int n = red.nranks;
  if (n == 1) {
    kernels::finalize(red.dtype, red.op, n, dst, x[0], count);
    return;
  }
  if (n == 2) {
    kernels::reduceFinal(red.dtype, red.op, n, dst, x[0], x[1], count);
    return;
  }
  kernels::reduce(red.dtype, red.op, dst, x[0], x[1], count);
  for (int q = 2; q < n - 1; ++q) kernels::reduce(red.dtype, red.op, dst, dst, x[q], count);
  kernels::reduceFinal(red.dtype, red.op, n, dst, dst, x[n - 1], count);  // sum, round, divide
}

Status RankOrderFold::take(int peer, size_t bytes, const std::byte** data) {
  if (bulletin_) {
    // At most two pieces are live at once (x_0 and x_1), so halves alternate.
    std::byte* into = scratch_ + (takes_++ & 1) * bytes;
    LOOM_TRY(bulletin_->read(peer, into, bytes, ctx_.wait));
    *data = into;
    return Status::ok();
  }
  auto& conn = ctx_.links->recvFrom(peer);
  size_t got = 0;
  LOOM_TRY(conn.acquire(data, &got, ctx_.wait));
  if (got == bytes) return Status::ok();
  conn.release();
  return makeError(Code::kRemoteError,
                   "rank %d received %zu bytes from rank %d where %zu were expected "
                   "(do all ranks call the same collective with the same count and type?)",
                   ctx_.rank, got, peer, bytes);
}

void RankOrderFold::release(int peer) {
  if (!bulletin_) ctx_.links->recvFrom(peer).release();
}

Status RankOrderFold::fold(const void* own, void* dst, size_t count) {
  const int n = ctx_.nranks, r = ctx_.rank;
  const size_t bytes = count * dataTypeSize(red_.dtype);
  LOOM_ENFORCE(count > 0, Code::kInternalError, "rank-order fold of an empty piece on rank %d", r);
  if (n == 1) {
    kernels::finalize(red_.dtype, red_.op, n, dst, own, count);
    return Status::ok();
  }
  // The first step writes dst = x_0 (op) x_1; the kernels allow dst to alias
  // a source exactly, so own survives only when it is x_0 or x_1 (r < 2).
  const auto* ownBytes = static_cast<const std::byte*>(own);
  const auto* dstBytes = static_cast<const std::byte*>(dst);
  const bool overlaps = ownBytes < dstBytes + bytes && dstBytes < ownBytes + bytes;
  if (overlaps && !(ownBytes == dstBytes && r < 2)) {
    ownCopy_.resize(bytes);
    std::memcpy(ownCopy_.data(), own, bytes);
    own = ownCopy_.data();
  }

  const std::byte* x[2] = {nullptr, nullptr};
  for (int q = 0; q < 2; ++q) {
    if (q == r) x[q] = static_cast<const std::byte*>(own);
    else LOOM_TRY(take(q, bytes, &x[q]));
  }
  if (n == 2) kernels::reduceFinal(red_.dtype, red_.op, n, dst, x[0], x[1], count);
  else kernels::reduce(red_.dtype, red_.op, dst, x[0], x[1], count);
  for (int q = 0; q < 2; ++q)
    if (q != r) release(q);

  for (int q = 2; q < n; ++q) {
    const std::byte* next = static_cast<const std::byte*>(own);
    if (q != r) LOOM_TRY(take(q, bytes, &next));
    if (q == n - 1) kernels::reduceFinal(red_.dtype, red_.op, n, dst, dst, next, count);  // sum, round, divide
    else kernels::reduce(red_.dtype, red_.op, dst, dst, next, count);
    if (q != r) release(q);
  }
  return Status::ok();
}

}  // namespace loom::algo
