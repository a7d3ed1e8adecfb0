// The two ends of one shared-memory LL ("low latency") FIFO: NCCL's LL
// protocol over host memory, behind the same acquire/commit/release contract
// as the Simple FIFO (shm_connection.h), so every algorithm runs over it.
//
// Wire format. An LL slot is an array of 8-byte lines, each written with one
// 64-bit store and read with one 64-bit load, so a line is never seen torn:
//   bits  0..31  payload (4 bytes of the chunk, in memory order) or, in the
//                header line, the chunk's byte count
//   bits 32..63  flag: the chunk's sequence number modulo the flag period
//                (2^32 - 1), plus 1 (llFlagFor): never 0
// A chunk of n bytes is the header line followed by ceil(n / 4) data lines
// (the last one zero-padded). Because every line carries its chunk's flag,
// the receiver polls the lines themselves: no head counter, no fence, and a
// line from an older chunk in a reused slot (an older flag), or zeroed memory
// (flag 0), is never taken for new data.
//
// Flags repeat every period P chunks, so a line left untouched for P chunks
// (small chunks keep reusing a slot's first lines only) would carry a valid
// flag again. The sender therefore rewrites every line of a slot (padding
// with zero payload) whenever the slot's last full write would otherwise be
// P chunks old by the time the slot is read next: every line a receiver can
// see was written less than P chunks before it is read, so flags of distinct
// chunks never collide. With P = 2^32 - 1 that is one full-slot write per
// slot every ~4 billion chunks.
//
// Protocol (single producer, single consumer, no locks):
//   sender   acquire: wait until head - tail < slots (reads tail only when it
//                     believes the FIFO is full); hand out a private staging
//                     buffer
//            commit:  store the header line and the data lines (relaxed),
//                     then committed.notify() so a sleeping receiver wakes
//   receiver acquire: poll the slot's header line and then each data line
//                     until all carry the expected flag, unpacking each into
//                     a private staging buffer as it arrives; hand it out
//            release: tail.store(tail + 1, release); released.notify()
// Ordering: the receiver's loads of a slot precede its release store of tail;
// the sender's acquire load of tail precedes its stores into the slot, so a
// slot is never overwritten while it is still being read.
//
// Ownership and threading as for the Simple FIFO: a connection points into a
// mapping owned by its ShmTransport; one thread drives a connection at a time.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "transports/shm/shm_layout.h"
#include "transports/transport.h"

namespace loom::transport::shm {

// Where one LL FIFO lives in the caller's address space.
struct LLFifoView {
  LLFifoControl* control = nullptr;
  std::byte* slots = nullptr;  // slot i at slots + i * slotStride, 8-byte aligned
  uint32_t slotCount = 0;
  uint64_t slotStride = 0;
  uint64_t chunkBytes = 0;  // payload bytes per slot: a multiple of 4, below 2^32
  // Flags cycle through 1 .. flagPeriod. Always kLLFlagPeriod in a segment;
  // tests shrink it (it must exceed slotCount) to exercise wrap-around.
  uint32_t flagPeriod = kLLFlagPeriod;
};

// The flag of chunk number `seq`: 1 .. period, never 0 (zeroed memory).
inline uint32_t llFlagFor(uint64_t seq, uint32_t period) { return static_cast<uint32_t>(seq % period) + 1; }
inline uint32_t llNextFlag(uint32_t flag, uint32_t period) { return flag == period ? 1 : flag + 1; }
inline uint64_t llLine(uint32_t payload, uint32_t flag) { return static_cast<uint64_t>(flag) << 32 | payload; }
inline uint32_t llLineFlag(uint64_t line) { return static_cast<uint32_t>(line >> 32); }
inline uint32_t llLinePayload(uint64_t line) { return static_cast<uint32_t>(line); }
// Data lines of a chunk of `bytes` bytes (the header line not counted).
inline uint64_t llDataLines(uint64_t bytes) { return (bytes + kLLPayloadPerLine - 1) / kLLPayloadPerLine; }

class ShmLLSendConnection final : public SendConnection {
 public:
  ShmLLSendConnection(const LLFifoView& fifo, int selfRank, int peerRank);

  size_t chunkBytes() const override { return fifo_.chunkBytes; }
  // The slot handed out is a private staging buffer; commit() packs it into lines.
  Status acquire(std::byte** slot, const WaitContext& wait) override;
  bool tryAcquire(std::byte** slot) override;
  // A commit without a pending acquire, or of more than chunkBytes(), is a
  // caller bug: nothing is published and the next acquire() reports it.
  void commit(size_t bytes) override;

 private:
  bool hasRoom() const { return head_ - tailSeen_ < fifo_.slotCount; }

  LLFifoView fifo_;
  int selfRank_;
  int peerRank_;
  uint64_t head_ = 0;      // chunks committed (exists only here: LL has no shared head)
  uint64_t tailSeen_ = 0;  // last control->tail observed
  uint32_t slotIndex_ = 0; // head_ % slotCount
  uint32_t flag_ = 0;      // llFlagFor(head_)
  std::vector<uint64_t> fullWriteSeq_;  // per slot: the chunk that last wrote all its lines
  std::vector<uint32_t> staging_;  // chunkBytes, word aligned for packing
  bool acquired_ = false;
  Status misuse_;
};

class ShmLLRecvConnection final : public RecvConnection {
 public:
  ShmLLRecvConnection(const LLFifoView& fifo, int selfRank, int peerRank);

  size_t chunkBytes() const override { return fifo_.chunkBytes; }
  // Returns the chunk unpacked into a private buffer, valid until release().
  Status acquire(const std::byte** data, size_t* bytes, const WaitContext& wait) override;
  // Never waits; lines that have arrived are unpacked and kept, so a chunk
  // that arrives piecemeal is completed by later calls.
  bool tryAcquire(const std::byte** data, size_t* bytes) override;
  // A release without a pending acquire is a caller bug: nothing is released
  // and the next acquire() reports it.
  void release() override;

 private:
  enum class Progress { kIncomplete, kComplete, kMalformed };
  // Takes in whatever lines of the chunk at tail_ have arrived.
  Progress poll();
  std::string describeProgress() const;

  LLFifoView fifo_;
  int selfRank_;
  int peerRank_;
  uint64_t tail_ = 0;      // chunks released (our copy of control->tail)
  uint32_t slotIndex_ = 0; // tail_ % slotCount
  uint32_t flag_ = 0;      // llFlagFor(tail_): the flag the chunk at tail_ carries
  // Progress on the chunk at tail_.
  bool headerSeen_ = false;
  uint64_t bytes_ = 0;       // from its header line
  uint64_t linesNeeded_ = 0; // llDataLines(bytes_)
  uint64_t linesDone_ = 0;   // data lines unpacked so far
  uint64_t badBytes_ = 0;    // a header's count over chunkBytes (kMalformed)
  std::vector<uint32_t> staging_;
  bool acquired_ = false;
  Status misuse_;
};

}  // namespace loom::transport::shm
