#include "algorithms/p2p.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "common/format.h"

namespace loom::algo {
namespace {

struct OpState {
  size_t done = 0;       // payload bytes moved so far
  bool started = false;  // header sent / parsed
  std::vector<size_t> overlappingSends;  // kRecv: remote sends whose source this op's destination overlaps
};

// The ops of one (peer, direction), in call order; the front one is active.
struct Queue {
  int peer = 0;
  P2POp::Kind kind = P2POp::kSend;
  std::vector<size_t> ops;  // indices into the op list
  size_t next = 0;          // first unfinished op
  // kRecv: a chunk acquired but not yet copied (its bytes' sends lag behind).
  bool holding = false;
  const std::byte* held = nullptr;
  size_t heldBytes = 0;

  bool finished() const { return next == ops.size(); }
};

class Engine {
 public:
  Engine(const std::vector<P2POp>& ops, const AlgoContext& ctx) : ops_(ops), ctx_(ctx), state_(ops.size()) {}

  Status prepare();
  // Moves whatever is ready on every queue; *progressed says whether anything moved.
  Status pass(bool* progressed);
  bool finished() const {
    return std::all_of(queues_.begin(), queues_.end(), [](const Queue& q) { return q.finished(); });
  }
  std::string pending() const;
  // The only unfinished queue, or null if none or several are.
  Queue* soleUnfinished();
  // Blocks (transport wait: its own wake-up signal) until `q` moves one chunk.
  Status blockOn(Queue& q);

 private:
  Status copySelfPairs(const std::vector<size_t>& sends, const std::vector<size_t>& recvs);
  Status stepSend(Queue& q, bool* moved);
  void fillSlot(Queue& q, transport::SendConnection& conn, std::byte* slot);
  Status stepRecv(Queue& q, bool* moved);
  // Copies the held chunk out unless a send still has to read its bytes.
  Status consumeHeld(Queue& q, bool* moved);
  // Whether every remote send reading [dst+from, dst+from+n) of recv `r` has read it.
  bool sendsHaveRead(size_t r, size_t from, size_t n) const;

  const std::vector<P2POp>& ops_;
  const AlgoContext& ctx_;
  std::vector<OpState> state_;
  std::vector<Queue> queues_;
};

bool rangesOverlap(uintptr_t a, size_t aBytes, uintptr_t b, size_t bBytes) {
  return aBytes && bBytes && a < b + bBytes && b < a + aBytes;
}

Status Engine::prepare() {
  std::vector<size_t> selfSends, selfRecvs;
  // queueOf[peer*2 + kind] -> index in queues_ (created on first use, so a
  // fused op of two touches two queues whatever the world size).
  std::vector<int> queueOf(static_cast<size_t>(ctx_.nranks) * 2, -1);
  for (size_t i = 0; i < ops_.size(); ++i) {
    const P2POp& op = ops_[i];
    const char* verb = op.kind == P2POp::kSend ? "send to" : "recv from";
    LOOM_ENFORCE(op.peer >= 0 && op.peer < ctx_.nranks, Code::kInvalidArgument,
                 "%s peer %d on rank %d: peer out of range [0, %d)", verb, op.peer, ctx_.rank, ctx_.nranks);
    LOOM_ENFORCE(op.bytes <= kMaxP2PMessageBytes, Code::kInvalidArgument,
                 "%s peer %d on rank %d: %zu bytes exceed the largest message (2^48 - 1 bytes)", verb, op.peer,
                 ctx_.rank, op.bytes);
    if (op.peer == ctx_.rank) {
      (op.kind == P2POp::kSend ? selfSends : selfRecvs).push_back(i);
      continue;
    }
    int& slot = queueOf[static_cast<size_t>(op.peer) * 2 + (op.kind == P2POp::kSend ? 0 : 1)];
    if (slot < 0) {
      slot = static_cast<int>(queues_.size());
      queues_.push_back(Queue{op.peer, op.kind, {}, 0, false, nullptr, 0});
    }
    queues_[static_cast<size_t>(slot)].ops.push_back(i);
  }
  for (const Queue& q : queues_) {
    const size_t cap = std::min(ctx_.chunkBytes, q.kind == P2POp::kSend ? ctx_.links->sendTo(q.peer).chunkBytes()
                                                                        : ctx_.links->recvFrom(q.peer).chunkBytes());
    LOOM_ENFORCE(cap >= kP2PHeaderBytes, Code::kInternalError,
                 "rank %d: chunks of %zu bytes to/from peer %d cannot hold the %zu-byte message header", ctx_.rank,
                 cap, q.peer, kP2PHeaderBytes);
  }
  // Recvs landing where remote sends read wait for those sends (see p2p.h).
  for (size_t r = 0; r < ops_.size(); ++r) {
    const P2POp& recv = ops_[r];
    if (recv.kind != P2POp::kRecv || recv.peer == ctx_.rank) continue;
    for (size_t s = 0; s < ops_.size(); ++s) {
      const P2POp& send = ops_[s];
      if (send.kind == P2POp::kSend && send.peer != ctx_.rank &&
          rangesOverlap(reinterpret_cast<uintptr_t>(recv.dst), recv.bytes, reinterpret_cast<uintptr_t>(send.src),
                        send.bytes))
        state_[r].overlappingSends.push_back(s);
    }
  }
  return copySelfPairs(selfSends, selfRecvs);
}

Status Engine::copySelfPairs(const std::vector<size_t>& sends, const std::vector<size_t>& recvs) {
  const size_t pairs = std::min(sends.size(), recvs.size());
  for (size_t k = 0; k < pairs; ++k) {
    const P2POp& s = ops_[sends[k]];
    const P2POp& r = ops_[recvs[k]];
    LOOM_ENFORCE(s.bytes == r.bytes, Code::kInvalidUsage,
                 "rank %d: send to self #%zu has %zu bytes but its matching recv from self has %zu bytes", ctx_.rank,
                 k + 1, s.bytes, r.bytes);
    if (s.bytes) std::memmove(r.dst, s.src, s.bytes);
  }
  LOOM_ENFORCE(sends.size() == recvs.size(), Code::kInvalidUsage,
               "rank %d: %zu send(s) to self but %zu recv(s) from self in one fused operation; each needs a match",
               ctx_.rank, sends.size(), recvs.size());
  return Status::ok();
}

Status Engine::stepSend(Queue& q, bool* moved) {
  transport::SendConnection& conn = ctx_.links->sendTo(q.peer);
  std::byte* slot = nullptr;
  if (!conn.tryAcquire(&slot)) return Status::ok();
  fillSlot(q, conn, slot);
  *moved = true;
  return Status::ok();
}

void Engine::fillSlot(Queue& q, transport::SendConnection& conn, std::byte* slot) {
  const size_t i = q.ops[q.next];
  const P2POp& op = ops_[i];
  OpState& st = state_[i];
  const size_t cap = std::min(ctx_.chunkBytes, conn.chunkBytes());
  size_t offset = 0;
  if (!st.started) {
    encodeP2PHeader(op.bytes, slot);
    offset = kP2PHeaderBytes;
    st.started = true;
  }
  const size_t n = std::min(cap - offset, op.bytes - st.done);
  if (n) std::memcpy(slot + offset, static_cast<const std::byte*>(op.src) + st.done, n);
  conn.commit(offset + n);
  st.done += n;
  if (st.done == op.bytes) ++q.next;
}

bool Engine::sendsHaveRead(size_t r, size_t from, size_t n) const {
  const uintptr_t lo = reinterpret_cast<uintptr_t>(ops_[r].dst) + from;
  const uintptr_t hi = lo + n;
  for (size_t s : state_[r].overlappingSends) {
    const uintptr_t src = reinterpret_cast<uintptr_t>(ops_[s].src);
    const uintptr_t overlapLo = std::max(lo, src);
    const uintptr_t overlapHi = std::min(hi, src + ops_[s].bytes);
    if (overlapLo < overlapHi && src + state_[s].done < overlapHi) return false;
  }
  return true;
}

Status Engine::stepRecv(Queue& q, bool* moved) {
  if (!q.holding) {
    if (!ctx_.links->recvFrom(q.peer).tryAcquire(&q.held, &q.heldBytes)) return Status::ok();
    q.holding = true;
    *moved = true;
  }
  return consumeHeld(q, moved);
}

Status Engine::consumeHeld(Queue& q, bool* moved) {
  const size_t i = q.ops[q.next];
  const P2POp& op = ops_[i];
  OpState& st = state_[i];
  transport::RecvConnection& conn = ctx_.links->recvFrom(q.peer);
  if (!st.started) {
    LOOM_TRY(checkP2PHeader(q.held, q.heldBytes, op.bytes, ctx_.rank, q.peer));
    q.held += kP2PHeaderBytes;
    q.heldBytes -= kP2PHeaderBytes;
    st.started = true;
  }
  LOOM_ENFORCE(q.heldBytes <= op.bytes - st.done, Code::kRemoteError,
               "rank %d: recv of %zu bytes from peer %d got %zu bytes past the %zu already received", ctx_.rank,
               op.bytes, q.peer, q.heldBytes, st.done);
  if (!sendsHaveRead(i, st.done, q.heldBytes)) return Status::ok();
  if (q.heldBytes) std::memcpy(static_cast<std::byte*>(op.dst) + st.done, q.held, q.heldBytes);
  st.done += q.heldBytes;
  conn.release();
  q.holding = false;
  if (st.done == op.bytes) ++q.next;
  *moved = true;
  return Status::ok();
}

Status Engine::pass(bool* progressed) {
  for (Queue& q : queues_) {
    while (!q.finished()) {
      bool moved = false;
      LOOM_TRY(q.kind == P2POp::kSend ? stepSend(q, &moved) : stepRecv(q, &moved));
      if (!moved) break;
      *progressed = true;
    }
  }
  return Status::ok();
}

Queue* Engine::soleUnfinished() {
  Queue* sole = nullptr;
  for (Queue& q : queues_) {
    if (q.finished()) continue;
    if (sole) return nullptr;
    sole = &q;
  }
  return sole;
}

Status Engine::blockOn(Queue& q) {
  bool moved = false;
  if (q.kind == P2POp::kSend) {
    transport::SendConnection& conn = ctx_.links->sendTo(q.peer);
    std::byte* slot = nullptr;
    LOOM_TRY(conn.acquire(&slot, ctx_.wait));
    fillSlot(q, conn, slot);
    return Status::ok();
  }
  if (!q.holding) {
    LOOM_TRY(ctx_.links->recvFrom(q.peer).acquire(&q.held, &q.heldBytes, ctx_.wait));
    q.holding = true;
  }
  return consumeHeld(q, &moved);
}

std::string Engine::pending() const {
  std::string out;
  size_t unfinished = 0;
  for (const Queue& q : queues_) {
    if (q.finished()) continue;
    if (unfinished++ == 0) {
      const size_t i = q.ops[q.next];
      out = strprintf("%s of %zu bytes %s peer %d (%zu moved)", q.kind == P2POp::kSend ? "send" : "recv",
                      ops_[i].bytes, q.kind == P2POp::kSend ? "to" : "from", q.peer, state_[i].done);
    }
  }
  if (unfinished > 1) out += strprintf(" and %zu more peer queue(s)", unfinished - 1);
  return strprintf("rank %d: ", ctx_.rank) + out;
}

}  // namespace

Status runP2P(const std::vector<P2POp>& ops, const AlgoContext& ctx) {
  Engine engine(ops, ctx);
  LOOM_TRY(engine.prepare());
  Status failure;
  while (!engine.finished()) {
    bool progressed = false;
    LOOM_TRY(engine.pass(&progressed));
    if (progressed) continue;
    // Nothing was ready. With one queue left (a lone send or recv, the tail
    // of most fused ops) the transport's own wait applies: it sleeps on that
    // connection's signal and wakes as soon as the peer moves. A held chunk
    // cannot be gated then, since every send it could wait for has finished.
    if (Queue* sole = engine.soleUnfinished()) {
      const Status s = engine.blockOn(*sole);
      if (!s.isOk()) return s.withContext(engine.pending() + ": ");
      continue;
    }
    // Several queues: wait politely, but keep polling every one, since any
    // of them may be the one that moves next.
    LOOM_TRY(waitUntil(
        [&] {
          bool moved = false;
          failure = engine.pass(&moved);
          return moved || !failure.isOk() || engine.finished();
        },
        nullptr, ctx.wait, [&] { return engine.pending(); }));
    LOOM_TRY(failure);
  }
  return Status::ok();
}

}  // namespace loom::algo
