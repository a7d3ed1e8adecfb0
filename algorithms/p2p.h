// The point-to-point engine: runs a list of sends and receives as ONE fused
// operation (NCCL's grouped send/recv), driving every connection at once.
//
// Matching: the k-th send from rank A to rank B matches the k-th recv on B
// from A (call order per peer and direction). Self pairs (peer == rank) match
// the same way and are copied locally before anything else moves.
//
// Progress: one thread polls every (peer, direction) queue with tryAcquire and
// moves whatever is ready, chunk by chunk; only when nothing moved does it
// wait (spin, yield, sleep) within the WaitContext's deadline and abort flag.
// So exchanges in both directions, rings and all-to-all cannot deadlock as
// long as every rank eventually runs its matching fused operation.
//
// Wire format: the first chunk of every message starts with an 8-byte header
// (a tag and the message's byte count), so a receiver detects a send of a
// different size (error naming the peer) and a zero-byte message still
// synchronizes (a header-only chunk): the barrier relies on that.
//
// Overlap: a recv may write where a send of the same fused operation reads
// (in-place sendrecv or all-to-all): each received chunk is copied only once
// every send reading those bytes has moved them into its slots. Self copies
// are exempt (they run first, as memmove).
#pragma once

#include <cstddef>
#include <vector>

#include "algorithms/algorithm.h"
#include "algorithms/p2p_header.h"

namespace loom::algo {

struct P2POp {
  enum Kind { kSend, kRecv };
  Kind kind = kSend;
  int peer = 0;
  const void* src = nullptr;  // kSend: the bytes to send
  void* dst = nullptr;        // kRecv: where the matching send's bytes land
  size_t bytes = 0;

  static P2POp send(int peer, const void* src, size_t bytes) { return {kSend, peer, src, nullptr, bytes}; }
  static P2POp recv(int peer, void* dst, size_t bytes) { return {kRecv, peer, nullptr, dst, bytes}; }
};

// Runs every op of `ops` to completion (or the first error). Errors: a recv
// whose matching send has another size (kRemoteError, naming the peer), a
// self send without a self recv or vice versa (kInvalidUsage), a peer out of
// range (kInvalidArgument), timeouts and aborts from the waits.
Status runP2P(const std::vector<P2POp>& ops, const AlgoContext& ctx);

}  // namespace loom::algo
