// The device engine's collectives: what one thread block of one rank does
// for a call (runEngineBlock), written once as LOOM_HOST_DEVICE templates
// over the element type, the reduction, the Memory policy and the Block
// policy (engine_protocol.h). The CUDA kernel (engine_kernel.cu) and the
// host emulation (engine_emulation.h) both call it.
//
// Ring collectives use the ring in rank order (common/ring_schedule.h, the
// same arithmetic as the host ring algorithms); channel c of every rank owns
// slice c of the data and the connections of channel c. Slices, ring blocks
// and FIFO chunks are multiples of 16 bytes from the buffer's start, so
// 16-byte aligned buffers move as 16-byte vectors throughout.
//   all-reduce: rounds of n blocks of at most one slot each; per round
//     reduce-scatter (n-1 sends, the last receive finishes the block on
//     its owner, post step included) then all-gather of the finished blocks;
//     each block is reduced once, so every rank's output is bit-identical.
//   tree all-reduce (EngineAlgorithm::kTree): per slot-sized piece of the
//     channel's slice, partial sums flow up the channel's tree (tree 0 or 1
//     of the double binary tree, common/tree_schedule.h), the root finishes
//     the piece (post step included) and it flows back down; every rank
//     copies the root's result, so outputs are bit-identical too.
//   reduce-scatter / all-gather: the same, per slot-sized piece of a block.
//   broadcast: a pipeline down the chain that starts at the root.
//   reduce: a pipeline along the chain that ends at the root.
//   all-to-all and send/recv: one block per (direction, peer, channel),
//     each a plain FIFO stream; all run concurrently, so any batch finishes.
//   one rank: a local copy (with the post step), nothing when in place.
// The ring collectives run on either protocol (EngineCall::protocol): the
// same steps, each moving one Simple FIFO slot or one LL slot.
// Copy-only collectives run with T = uint8_t (a byte path): the runner
// scales their counts to bytes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/ring_schedule.h"
#include "common/tree_schedule.h"
#include "kernels/cuda/engine/engine_layout.h"
#include "kernels/cuda/engine/engine_protocol.h"

namespace loom::kernels::cuda::engine {

// True for the collectives that reduce (they run typed; the others move bytes).
LOOM_HOST_DEVICE constexpr bool engineReduces(EngineOp op) {
  return op == EngineOp::kAllReduce || op == EngineOp::kReduceScatter || op == EngineOp::kReduce;
}

// Whether a one-rank call must touch the data (always out of place; in place only with a post step that changes
// values).
LOOM_HOST_DEVICE inline bool oneRankMoves(const EngineCall& call) {
  if (call.send != call.recv) return true;
  return engineReduces(call.op) && call.redOp != RedOp::kAvg && call.post == PostOp::kMultiplyByScalar;
}

template <class T, RedOp kOp, class Memory, class Block>
class EngineBlockRunner {
 public:
  LOOM_HOST_DEVICE EngineBlockRunner(const EngineView& view, const EngineCall& call, const Block& block)
      : view_(view), call_(call), block_(block), n_(view.nranks), rank_(view.rank),
        channels_(engineChannels(call, view.nchannels)),
        granule_(kVectorBytes / sizeof(T)),
        // Elements of T per rank block: bytes for the copy-only collectives.
        count_(call.count * dataTypeSize(call.type) / sizeof(T)),
        in_(static_cast<const unsigned char*>(call.send)),
        out_(static_cast<unsigned char*>(call.recv)),
        post_(makePostStep<T>(call, view.nranks)) {}

  LOOM_HOST_DEVICE EngineStatus run(int blockIndex) {
    if (call_.op == EngineOp::kSendRecv || call_.op == EngineOp::kAllToAll) return pointToPoint(blockIndex);
    const int channel = blockIndex;
    const ring::Span mine = channelSlice(count_, channel);
    if (n_ == 1) {
      if (oneRankMoves(call_))
        moveElements<T, kOp, Memory>(block_, at(out_, mine.offset), nullptr, at(in_, mine.offset), nullptr,
                                     mine.count, engineReduces(call_.op) ? &post_ : nullptr);
      return EngineStatus::kOk;
    }
    if (call_.op == EngineOp::kAllReduce && call_.algorithm == EngineAlgorithm::kTree) {
      if (call_.protocol == EngineProtocol::kLL) return treeAllReduce<LLChannel<Memory, Block>>(channel, mine);
      return treeAllReduce<Channel>(channel, mine);
    }
    const int next = ring::next(rank_, n_), prev = ring::prev(rank_, n_);
    const EngineSendConnection* send = &view_.send[channel][next];
    const EngineRecvConnection* recv = &view_.recv[channel][prev];
    if (call_.protocol == EngineProtocol::kLL) {
      LLChannel<Memory, Block> ch(view_, call_, block_, send, recv);
      return ringCollective(ch, mine);
    }
    BlockChannel<Memory, Block> ch(view_, call_, block_, send, recv);
    return ringCollective(ch, mine);
  }

 private:
  using Channel = BlockChannel<Memory, Block>;

  // A ring collective on either protocol's channel (each moves slotElems
  // elements per step).
  template <class Ch>
  LOOM_HOST_DEVICE EngineStatus ringCollective(Ch& ch, ring::Span mine) {
    const size_t chunk = ch.slotElems(sizeof(T));
    switch (call_.op) {
      case EngineOp::kAllReduce: allReduce(ch, mine, chunk); break;
      case EngineOp::kReduceScatter: reduceScatter(ch, mine, chunk); break;
      case EngineOp::kAllGather: allGather(ch, mine, chunk); break;
      case EngineOp::kBroadcast: broadcast(ch, mine, chunk); break;
      case EngineOp::kReduce: reduce(ch, mine, chunk); break;
      default: break;
    }
    ch.finish();
    return ch.status();
  }

  LOOM_HOST_DEVICE static const unsigned char* at(const unsigned char* base, size_t elem) {
    return base ? base + elem * sizeof(T) : nullptr;
  }
  LOOM_HOST_DEVICE static unsigned char* at(unsigned char* base, size_t elem) {
    return base ? base + elem * sizeof(T) : nullptr;
  }

  LOOM_HOST_DEVICE ring::Span channelSlice(size_t total, int channel) const {
    return ring::slice(0, ring::sliceElems(total, channels_, granule_, 0), total, channel, channels_);
  }

  // Steps of the ring; each returns false when a wait failed.
  template <class Ch>
  LOOM_HOST_DEVICE bool sendStep(Ch& ch, const unsigned char* src, unsigned char* alsoTo, size_t len) {
    return ch.template transfer<T, kOp>(false, true, src, alsoTo, len, nullptr);
  }
  template <class Ch>
  LOOM_HOST_DEVICE bool recvReduceSend(Ch& ch, const unsigned char* local, size_t len) {
    return ch.template transfer<T, kOp>(true, true, local, nullptr, len, nullptr);
  }
  // Finishes a reduction into `dst`, and sends the result on when `forward`.
  template <class Ch>
  LOOM_HOST_DEVICE bool recvReduceFinal(Ch& ch, const unsigned char* local, unsigned char* dst, size_t len,
                                        bool forward) {
    return ch.template transfer<T, kOp>(true, forward, local, dst, len, &post_);
  }
  // Receives into `dst`, and sends it on when `forward`.
  template <class Ch>
  LOOM_HOST_DEVICE bool recvCopy(Ch& ch, unsigned char* dst, size_t len, bool forward) {
    return ch.template transfer<T, kOp>(true, forward, nullptr, dst, len, nullptr);
  }

  template <class Ch>
  LOOM_HOST_DEVICE void allReduce(Ch& ch, ring::Span mine, size_t chunk) {
    const int n = n_, r = rank_;
    const size_t end = mine.offset + mine.count;
    for (size_t base = mine.offset; base < end; base += chunk * static_cast<size_t>(n)) {
      const size_t blockElems = ring::sliceElems(end - base, n, granule_, chunk);
      auto block = [&](int index) { return ring::slice(base, blockElems, end, index, n); };
      ring::Span b = block(ring::reduceScatterBlock(r, 0, n));
      if (!sendStep(ch, at(in_, b.offset), nullptr, b.count)) return;
      for (int k = 1; k <= n - 2; ++k) {
        b = block(ring::reduceScatterBlock(r, k, n));
        if (!recvReduceSend(ch, at(in_, b.offset), b.count)) return;
      }
      b = block(ring::reduceScatterBlock(r, n - 1, n));
      if (!recvReduceFinal(ch, at(in_, b.offset), at(out_, b.offset), b.count, true)) return;
      for (int m = 1; m <= n - 2; ++m) {
        b = block(ring::allGatherBlock(r, m, n));
        if (!recvCopy(ch, at(out_, b.offset), b.count, true)) return;
      }
      b = block(ring::allGatherBlock(r, n - 1, n));
      if (!recvCopy(ch, at(out_, b.offset), b.count, false)) return;
    }
  }

  // The tree all-reduce of this channel's slice. One channel object owns
  // each connection, so each connection's step counters live in one place:
  //   up:     send to the parent, receive from the last child;
  //   across: send to the second child, receive from the first (two children);
  //   down:   send to the first child, receive from the parent.
  // Per piece a rank waits only on its children (going up) and its parent
  // (going down), the same piece everywhere, so the waits follow the tree's
  // edges in one direction at a time and cannot form a cycle; one FIFO slot
  // per connection suffices, as a piece's slot is consumed before the next
  // piece's is written.
  template <class Ch>
  LOOM_HOST_DEVICE EngineStatus treeAllReduce(int channel, ring::Span mine) {
    const tree::Links t = tree::linksOf(n_, rank_, channel % 2);
    const bool root = t.parent < 0, twoChildren = t.nchildren == 2;
    const int first = t.children[0], last = t.children[t.nchildren > 0 ? t.nchildren - 1 : 0];
    auto sendTo = [&](int peer) { return peer < 0 ? nullptr : &view_.send[channel][peer]; };
    auto recvFrom = [&](int peer) { return peer < 0 ? nullptr : &view_.recv[channel][peer]; };
    Ch up(view_, call_, block_, sendTo(t.parent), recvFrom(last));
    Ch across(view_, call_, block_, twoChildren ? sendTo(t.children[1]) : nullptr,
              twoChildren ? recvFrom(first) : nullptr);
    Ch down(view_, call_, block_, sendTo(first), recvFrom(t.parent));
    const size_t chunk = up.slotElems(sizeof(T));
    const size_t end = mine.offset + mine.count;
    for (size_t base = mine.offset; base < end; base += chunk) {
      const size_t len = end - base < chunk ? end - base : chunk;
      const unsigned char* in = at(in_, base);
      unsigned char* out = at(out_, base);
      // Up: a node with two children folds the first one's partial sum into
      // its output, then the last one's on the way to its parent.
      const unsigned char* partial = in;
      if (twoChildren) {
        if (!across.template transfer<T, kOp>(true, false, in, out, len, nullptr)) break;
        partial = out;
      }
      bool ok;
      if (t.nchildren == 0) ok = sendStep(up, in, nullptr, len);
      else if (!root) ok = recvReduceSend(up, partial, len);
      else ok = recvReduceFinal(up, partial, out, len, false);
      if (!ok) break;
      // Down: the root's result, forwarded to the first child on receipt.
      if (root) ok = sendStep(down, out, nullptr, len);
      else ok = recvCopy(down, out, len, t.nchildren > 0);
      if (!ok || (twoChildren && !sendStep(across, out, nullptr, len))) break;
    }
    up.finish();
    across.finish();
    down.finish();
    if (up.status() != EngineStatus::kOk) return up.status();
    if (across.status() != EngineStatus::kOk) return across.status();
    return down.status();
  }

  // Block j of the input (reduce-scatter) or output (all-gather) at element `base` of the rank block.
  LOOM_HOST_DEVICE size_t rankBlock(int j, size_t base) const { return static_cast<size_t>(j) * count_ + base; }

  template <class Ch>
  LOOM_HOST_DEVICE void reduceScatter(Ch& ch, ring::Span mine, size_t chunk) {
    const int n = n_, r = rank_;
    for (size_t base = mine.offset; base < mine.offset + mine.count; base += chunk) {
      const size_t len = mine.offset + mine.count - base < chunk ? mine.offset + mine.count - base : chunk;
      if (!sendStep(ch, at(in_, rankBlock(ring::reduceScatterBlock(r, 0, n), base)), nullptr, len)) return;
      for (int k = 1; k <= n - 2; ++k)
        if (!recvReduceSend(ch, at(in_, rankBlock(ring::reduceScatterBlock(r, k, n), base)), len)) return;
      if (!recvReduceFinal(ch, at(in_, rankBlock(ring::reduceScatterBlock(r, n - 1, n), base)), at(out_, base), len,
                           false))
        return;
    }
  }

  template <class Ch>
  LOOM_HOST_DEVICE void allGather(Ch& ch, ring::Span mine, size_t chunk) {
    const int n = n_, r = rank_;
    for (size_t base = mine.offset; base < mine.offset + mine.count; base += chunk) {
      const size_t len = mine.offset + mine.count - base < chunk ? mine.offset + mine.count - base : chunk;
      unsigned char* own = at(out_, rankBlock(r, base));
      const unsigned char* src = at(in_, base);
      if (!sendStep(ch, src, src == own ? nullptr : own, len)) return;
      for (int m = 1; m <= n - 2; ++m)
        if (!recvCopy(ch, at(out_, rankBlock(ring::allGatherBlock(r, m, n), base)), len, true)) return;
      if (!recvCopy(ch, at(out_, rankBlock(ring::allGatherBlock(r, n - 1, n), base)), len, false)) return;
    }
  }

  template <class Ch>
  LOOM_HOST_DEVICE void broadcast(Ch& ch, ring::Span mine, size_t chunk) {
    const int p = ring::chainFromRoot(rank_, call_.root, n_);
    for (size_t base = mine.offset; base < mine.offset + mine.count; base += chunk) {
      const size_t len = mine.offset + mine.count - base < chunk ? mine.offset + mine.count - base : chunk;
      bool ok;
      if (p == 0) {
        const unsigned char* src = at(in_, base);
        unsigned char* dst = at(out_, base);
        ok = sendStep(ch, src, src == dst ? nullptr : dst, len);
      } else {
        ok = recvCopy(ch, at(out_, base), len, p < n_ - 1);
      }
      if (!ok) return;
    }
  }

  template <class Ch>
  LOOM_HOST_DEVICE void reduce(Ch& ch, ring::Span mine, size_t chunk) {
    const int p = ring::chainToRoot(rank_, call_.root, n_);
    for (size_t base = mine.offset; base < mine.offset + mine.count; base += chunk) {
      const size_t len = mine.offset + mine.count - base < chunk ? mine.offset + mine.count - base : chunk;
      bool ok;
      if (p == 0) ok = sendStep(ch, at(in_, base), nullptr, len);
      else if (p < n_ - 1) ok = recvReduceSend(ch, at(in_, base), len);
      else ok = recvReduceFinal(ch, at(in_, base), at(out_, base), len, false);
      if (!ok) return;
    }
  }

  // kSendRecv / kAllToAll: block b is (direction, transfer, channel); T is uint8_t.
  LOOM_HOST_DEVICE EngineStatus pointToPoint(int blockIndex) {
    const int channel = blockIndex % channels_;
    const int index = blockIndex / channels_;
    const bool allToAll = call_.op == EngineOp::kAllToAll;
    const int nsends = allToAll ? n_ : call_.nsends;
    const bool sending = index < nsends;
    const int transfer = sending ? index : index - nsends;
    int peer;
    size_t bytes;
    const unsigned char* src = nullptr;
    unsigned char* dst = nullptr;
    if (allToAll) {
      peer = transfer;
      bytes = count_;  // per peer, in bytes (T is uint8_t)
      if (sending) src = at(in_, static_cast<size_t>(peer) * bytes);
      else dst = at(out_, static_cast<size_t>(peer) * bytes);
    } else if (sending) {
      peer = call_.sendPeer[transfer];
      bytes = call_.sendBytes[transfer] / sizeof(T);
      src = static_cast<const unsigned char*>(call_.sendBuf[transfer]);
    } else {
      peer = call_.recvPeer[transfer];
      bytes = call_.recvBytes[transfer] / sizeof(T);
      dst = static_cast<unsigned char*>(call_.recvBuf[transfer]);
    }
    const ring::Span mine = channelSlice(bytes, channel);
    Channel ch(view_, call_, block_, sending ? &view_.send[channel][peer] : nullptr,
               sending ? nullptr : &view_.recv[channel][peer]);
    const size_t chunk = ch.slotElems(sizeof(T));
    for (size_t base = mine.offset; base < mine.offset + mine.count; base += chunk) {
      const size_t len = mine.offset + mine.count - base < chunk ? mine.offset + mine.count - base : chunk;
      const bool ok = sending ? sendStep(ch, at(src, base), nullptr, len) : recvCopy(ch, at(dst, base), len, false);
      if (!ok) break;
    }
    ch.finish();
    return ch.status();
  }

  const EngineView& view_;
  const EngineCall& call_;
  const Block& block_;
  int n_, rank_, channels_;
  size_t granule_, count_;
  const unsigned char* in_;
  unsigned char* out_;
  PostStep<T> post_;
};

// What block `blockIndex` (0 .. engineBlocks - 1) of this rank's kernel does
// for `call`; kOk, or why it stopped. T and kOp as engineDispatch picks.
template <class T, RedOp kOp, class Memory, class Block>
LOOM_HOST_DEVICE inline EngineStatus runEngineBlock(const EngineView& view, const EngineCall& call, int blockIndex,
                                                    const Block& block) {
  EngineBlockRunner<T, kOp, Memory, Block> runner(view, call, block);
  const EngineStatus status = runner.run(blockIndex);
  Memory::flushAtExit();
  return status;
}

// Calls f.template operator()<T, kOp>() for the instantiation a call runs:
// the element type and reduction for the reducing collectives (kAvg reduces
// as kSum; a one-rank call without a post step only copies), bytes for the
// copy-only ones.
// Whether a call runs typed (T and kOp from its type and reduction) or as
// bytes (uint8_t, kSum).
LOOM_HOST_DEVICE inline bool engineRunsTyped(const EngineCall& call, int nranks) {
  return engineReduces(call.op) && (nranks > 1 || call.redOp == RedOp::kAvg || call.post != PostOp::kNone);
}

template <class F>
inline void engineDispatch(const EngineCall& call, int nranks, F&& f) {
  if (!engineRunsTyped(call, nranks)) {
    f.template operator()<uint8_t, RedOp::kSum>();
    return;
  }
  dispatchReduceCopy(call.type, call.redOp, 2, f);
}

}  // namespace loom::kernels::cuda::engine
