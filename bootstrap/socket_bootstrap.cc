#include "bootstrap/socket_bootstrap.h"

#include "bootstrap/socket_io.h"
#include "bootstrap/wire.h"
#include "common/format.h"

namespace loom::bootstrap {

SocketBootstrap::SocketBootstrap(int rank, int nranks, Socket next, Socket prev, Logger log)
    : rank_(rank), nranks_(nranks), next_(std::move(next)), prev_(std::move(prev)), log_(std::move(log)) {}

Result<std::unique_ptr<Bootstrap>> SocketBootstrap::formRing(const RingIdentity& self, Socket listener,
                                                             const std::vector<SockAddr>& table,
                                                             const WaitContext& wait, const Logger& log) {
  const int n = self.nranks;
  const std::string prefix = strprintf("bootstrap: rank %d of %d: ", self.rank, n);
  Socket next;
  Socket prev;
  if (n > 1) {
    const int nextRank = (self.rank + 1) % n;
    const int prevRank = (self.rank - 1 + n) % n;
    // Connect first, then accept: the connection completes in the peer's
    // backlog and the hello fits its socket buffer, so no rank ever waits for
    // a neighbour that is itself blocked connecting.
    Result<Socket> out = connectRingPeer(table[static_cast<size_t>(nextRank)], nextRank, self, wait);
    if (!out.isOk()) return out.status().withContext(prefix);
    Result<Socket> in = acceptRingPeer(listener, prevRank, self, wait, log);
    if (!in.isOk()) return in.status().withContext(prefix);
    next = std::move(out.value());
    prev = std::move(in.value());
  }
  LOOM_INFO(log, kSubsysBootstrap, "bootstrap: rank %d of %d joined the ring", self.rank, n);
  return std::unique_ptr<Bootstrap>(
      new SocketBootstrap(self.rank, n, std::move(next), std::move(prev), log));
}

Status SocketBootstrap::allGather(void* data, size_t bytes, const WaitContext& wait) {
  LOOM_ENFORCE(bytes <= kMaxSlotBytes, Code::kInvalidArgument,
               "bootstrap allGather on rank %d: %zu bytes per rank exceeds the limit of %zu", rank_, bytes,
               kMaxSlotBytes);
  LOOM_ENFORCE(data != nullptr || bytes == 0, Code::kInvalidArgument,
               "bootstrap allGather on rank %d: data is null with %zu bytes per rank", rank_, bytes);
  auto* base = static_cast<uint8_t*>(data);
  for (int step = 0; step + 1 < nranks_; ++step) {
    Status st = ringStep(base, bytes, step, wait);
    if (!st.isOk()) return st.withContext(strprintf("bootstrap allGather on rank %d of %d: ", rank_, nranks_));
  }
  return Status::ok();
}

Status SocketBootstrap::ringStep(uint8_t* base, size_t bytes, int step, const WaitContext& wait) {
  const int n = nranks_;
  const int sendSlot = ((rank_ - step) % n + n) % n;
  const int recvSlot = ((rank_ - step - 1) % n + n) % n;
  const int nextRank = (rank_ + 1) % n;
  const int prevRank = (rank_ - 1 + n) % n;
  const std::string what = strprintf("step %d (slot %d to rank %d, slot %d from rank %d)", step, sendSlot,
                                     nextRank, recvSlot, prevRank);
  // Headers first (a few bytes, never blocks for long), so that a size
  // mismatch is detected before any payload lands in the caller's buffer.
  uint8_t outHeader[kFrameHeaderBytes];
  uint8_t inHeader[kFrameHeaderBytes];
  encodeHeader(MsgType::kData, static_cast<uint32_t>(bytes), outHeader);
  LOOM_TRY(sendRecv(next_.fd(), outHeader, sizeof(outHeader), prev_.fd(), inHeader, sizeof(inHeader), wait, what));
  Result<FrameHeader> header = decodeHeader(inHeader);
  if (!header.isOk()) {
    LOOM_WARN(log_, kSubsysBootstrap, "bootstrap: invalid frame from rank %d: %s", prevRank,
              header.status().message().c_str());
    return header.status().withContext(strprintf("invalid frame from rank %d in %s: ", prevRank, what.c_str()));
  }
  if (header.value().type != MsgType::kData || header.value().length != bytes) {
    return makeError(Code::kInvalidUsage,
                     "rank %d sent %u bytes per rank (message type %u) where %zu were expected; every rank must "
                     "call allGather/barrier in the same order with the same size",
                     prevRank, header.value().length, static_cast<unsigned>(header.value().type), bytes);
  }
  return sendRecv(next_.fd(), base + static_cast<size_t>(sendSlot) * bytes, bytes, prev_.fd(),
                  base + static_cast<size_t>(recvSlot) * bytes, bytes, wait, what);
}

Status SocketBootstrap::barrier(const WaitContext& wait) {
  std::vector<uint8_t> slots(static_cast<size_t>(nranks_), 0);
  slots[static_cast<size_t>(rank_)] = 1;
  return allGather(slots.data(), 1, wait);
}

}  // namespace loom::bootstrap
