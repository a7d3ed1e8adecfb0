// The byte layout of a shared-memory segment, shared by every process that
// maps it. Each rank owns one segment holding, per inbound peer, one Simple
// FIFO followed by one LL FIFO (together "the FIFO region" of that peer):
//
//   offset 0            SegmentHeader + FifoEntry[fifoCount]   (headerBytes, page multiple)
//   entry.offset        FifoControl (one page): head line, tail line, byte counts
//   entry.offset + 4K   slot memory: slots x slotStride bytes, where chunks
//                       are packed one after another (chunk_ring.h)
//   entry.offset + llOffset          LLFifoControl (one page): signal line, tail line
//   entry.offset + llOffset + 4K     LL slot 0 | ... | LL slot (llSlots-1)  (llSlotStride apart)
//   bulletinOffset      BulletinControl (one page): the owner's signal line
//   bulletinOffset + 4K bulletin buffer 0 | ... | buffer 7  (bulletinStride apart)
//   windowOffset        WindowControl (one page): the owner's phase line
//   windowOffset + 4K   the shared window (windowBytes), plain data
//
// The bulletin (shm_bulletin.h) is the one part the owner writes and its
// peers read: the owner's message of round k, in LL lines (a header line
// with the byte count, then one line per 4 payload bytes), in buffer k mod 8.
// The window (shm_windows.h) is the same kind: written by its owner, read by
// its peers, as plain bytes whose phases its control page counts. Pages of a
// segment are allocated on first touch, so a window that no collective uses
// costs no memory.
//
// An LL slot is an array of 8-byte lines (see shm_ll_connection.h): one
// header line, then one line per 4 payload bytes.
//
// Everything here is plain data plus lock-free atomics, so it works between
// processes as well as between threads (the segment is mapped once per user,
// at different virtual addresses). The owner fills the header before the
// first bootstrap exchange of connect(); peers only read it after that
// exchange, so the header needs no atomics of its own.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "common/wait.h"

namespace loom::transport::shm {

constexpr uint64_t kSegmentMagic = 0x4d48534d4f4f4cull;  // "LOOMSHM"
constexpr uint32_t kLayoutVersion = 5;  // 2: LL FIFOs after each Simple FIFO; 3: the bulletin; 4: the window; 5: packed chunks
constexpr size_t kPageBytes = 4096;
constexpr size_t kCacheLineBytes = 64;
// The control page holds the two cache lines below plus one byte count per slot.
constexpr int kMaxSlots = (kPageBytes - 2 * kCacheLineBytes) / sizeof(uint64_t);

// LL geometry (fixed, not a knob: the tuner sends only small messages over LL).
// 8 KiB of payload per slot is 2049 lines = 16 KiB of shared memory: a chunk's
// lines fit the receiving core's L1 while it unpacks them, and the per-chunk
// costs (one futex notify, one wait) stay small next to ~2k line stores. 8
// slots keep 64 KiB in flight, so a message up to the LL range (tens of KiB)
// is written in full without the sender ever waiting for the receiver, and a
// ring step (at most one chunk ahead of the receiver) never fills the FIFO.
// Per peer and direction that is 4 KiB + 8 x 16 KiB = 132 KiB, next to the
// Simple FIFO's megabyte.
constexpr uint32_t kLLSlots = 8;
constexpr uint64_t kLLChunkBytes = 8 * 1024;
constexpr size_t kLLLineBytes = 8;     // one 64-bit store: 4 payload bytes + 4-byte flag
constexpr size_t kLLPayloadPerLine = 4;
constexpr uint32_t kLLFlagPeriod = 0xffffffffu;  // flags 1 .. 2^32-1 (0 is zeroed memory)

// The bulletin's message capacity: what one-shot all-reduce sends over it
// (the tuner picks LL below ~1 KiB); larger messages go through the FIFOs.
// Rounds rotate over 8 buffers although 2 would be safe: a buffer rewritten
// every other round still sits in its readers' caches, and every store must
// first take each line back from them (4 KiB all-reduce, 2 ranks: 3.2 us
// with 2 buffers, 2.1 us with 8).
constexpr uint64_t kBulletinCapacityBytes = 4096;
constexpr uint32_t kBulletinBuffers = 8;

// The shared window: a windowed all-reduce moves half of it per round (two
// phase ends each; rounds alternate halves). 1 MiB rounds hold the sizes
// where the ring's 2(n-1) lockstep steps cost most next to two phase ends
// (64 KiB-1 MiB at 4 ranks) in one round.
constexpr uint64_t kWindowBytes = 2 * 1024 * 1024;

constexpr size_t roundUp(size_t value, size_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// Where the FIFO written by `senderRank` lives inside the segment.
struct FifoEntry {
  int32_t senderRank;
  uint32_t reserved;
  uint64_t offset;  // bytes from the segment start, page aligned
};

struct SegmentHeader {
  uint64_t magic;
  uint32_t version;
  int32_t ownerRank;    // the receiver of every FIFO in the segment
  uint32_t fifoCount;
  uint32_t slots;       // chunks in flight per FIFO
  uint64_t chunkBytes;  // payload bytes per slot
  uint64_t slotStride;  // distance between slots (chunkBytes rounded up)
  uint64_t fifoBytes;   // one peer's region: Simple control page + slots + LL control page + LL slots
  uint64_t headerBytes; // this header + the entry table, page multiple
  uint64_t totalBytes;  // the whole segment
  uint32_t llSlots;       // LL chunks in flight per FIFO
  uint32_t reserved;
  uint64_t llChunkBytes;  // LL payload bytes per slot (a multiple of 4)
  uint64_t llSlotStride;  // distance between LL slots
  uint64_t llOffset;      // the LL FIFO's distance from the start of a peer's region (page multiple)
  uint64_t bulletinOffset;    // from the segment start, page aligned, after the FIFO regions
  uint64_t bulletinCapacity;  // message bytes (a multiple of 4)
  uint64_t bulletinStride;    // distance between its buffers
  uint64_t bulletinBytes;     // control page + the buffers, page multiple
  uint64_t windowOffset;      // from the segment start, page aligned, after the bulletin
  uint64_t windowBytes;       // the window's data bytes (its control page comes first)

  FifoEntry* entries() { return reinterpret_cast<FifoEntry*>(this + 1); }
  const FifoEntry* entries() const { return reinterpret_cast<const FifoEntry*>(this + 1); }
};

// The synchronisation state of one FIFO. `head` counts chunks committed and
// is written only by the sender; `tail` counts chunks released and is written
// only by the receiver; both only grow, so head - tail is the number of
// chunks in flight. Each counter shares its cache line with the signal its
// writer notifies, so a commit or release dirties exactly one line, and the
// two writers never contend for a line.
struct FifoControl {
  // Sender-written line.
  alignas(kCacheLineBytes) std::atomic<uint64_t> head{0};
  WaitSignal committed;  // notified after head advances; the receiver sleeps on it
  // Receiver-written line.
  alignas(kCacheLineBytes) std::atomic<uint64_t> tail{0};
  WaitSignal released;  // notified after tail advances; the sender sleeps on it
  // Byte count of chunk k at k % slots, written by the sender before it
  // publishes head (ordered by head's release store), read by the receiver
  // after it sees head; both place the chunk from these counts (chunk_ring.h).
  alignas(kCacheLineBytes) uint64_t bytes[kMaxSlots];
};

// The synchronisation state of one LL FIFO. There is no head counter: the
// receiver polls the lines themselves, whose flags say whether they belong to
// the chunk it expects. `tail` counts chunks released, written only by the
// receiver and read by the sender only when it believes the FIFO is full.
// `committed` lets a receiver that ran out of polling patience sleep.
struct LLFifoControl {
  // Sender-written line.
  alignas(kCacheLineBytes) WaitSignal committed;  // notified after a chunk's lines are stored
  // Receiver-written line.
  alignas(kCacheLineBytes) std::atomic<uint64_t> tail{0};
  WaitSignal released;  // notified after tail advances; the sender sleeps on it
};

// The bulletin's synchronisation state: only a signal, since the lines carry
// their round's flag. Written by readers only when they go to sleep.
struct BulletinControl {
  alignas(kCacheLineBytes) WaitSignal posted;  // notified after a message's lines are stored
  // Collectives this rank has started on the communicator (Bulletin::announceStart).
  alignas(kCacheLineBytes) std::atomic<uint64_t> started{0};
};

// A window's phase count. The owner writes `phase` (after the tag of that
// phase, in tags[phase % 2]) once per phase end; readers poll it. A reader
// lags at most one phase behind the owner, which cannot end phase k+1 before
// every reader has ended phase k, so the tag of the phase a reader checks is
// never overwritten under it.
struct WindowControl {
  alignas(kCacheLineBytes) std::atomic<uint64_t> phase{0};
  std::atomic<uint64_t> tags[2] = {0, 0};
  // Notified after phase advances; written by readers only when they go to sleep.
  alignas(kCacheLineBytes) WaitSignal arrived;
  // The owner's process and where this block lies in the owner's address
  // space, written once at creation: a peer that reads ownerAddress back
  // through process_vm_readv at that address knows it may copy straight
  // from and to the owner's buffers (shm_windows.h).
  alignas(kCacheLineBytes) uint64_t ownerPid = 0;
  uint64_t ownerAddress = 0;
};

static_assert(sizeof(FifoControl) <= kPageBytes, "FIFO control block must fit one page");
static_assert(sizeof(LLFifoControl) <= kPageBytes, "LL FIFO control block must fit one page");
static_assert(sizeof(BulletinControl) <= kPageBytes, "bulletin control block must fit one page");
static_assert(sizeof(WindowControl) <= kPageBytes, "window control block must fit one page");
static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared-memory counters must be lock free");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "shared-memory signals must be lock free");

// Sizes of a segment with `fifoCount` FIFOs, computed the same way by owner and peers.
struct SegmentGeometry {
  uint32_t slots = 0;
  uint64_t chunkBytes = 0;
  uint64_t slotStride = 0;
  uint64_t llOffset = 0;  // == the Simple FIFO's bytes
  uint32_t llSlots = 0;
  uint64_t llChunkBytes = 0;
  uint64_t llSlotStride = 0;
  uint64_t fifoBytes = 0;  // Simple + LL FIFO of one peer
  uint64_t bulletinOffset = 0;
  uint64_t bulletinCapacity = 0;
  uint64_t bulletinStride = 0;
  uint64_t bulletinBytes = 0;
  uint64_t windowOffset = 0;
  uint64_t windowBytes = 0;
  uint64_t headerBytes = 0;
  uint64_t totalBytes = 0;

  // Lines in one LL slot: the header line plus one per 4 payload bytes.
  uint64_t llLinesPerSlot() const { return 1 + llChunkBytes / kLLPayloadPerLine; }

  static SegmentGeometry compute(uint32_t fifoCount, uint32_t slots, uint64_t chunkBytes,
                                 uint32_t llSlots = kLLSlots, uint64_t llChunkBytes = kLLChunkBytes) {
    SegmentGeometry g;
    g.slots = slots;
    g.chunkBytes = chunkBytes;
    // Page-aligned slots for chunk-sized payloads (whole pages per slot);
    // small test chunks only need cache-line alignment.
    g.slotStride = roundUp(chunkBytes, chunkBytes >= kPageBytes ? kPageBytes : kCacheLineBytes);
    g.llOffset = roundUp(kPageBytes + slots * g.slotStride, kPageBytes);
    g.llSlots = llSlots;
    g.llChunkBytes = llChunkBytes;
    g.llSlotStride = roundUp(g.llLinesPerSlot() * kLLLineBytes, kCacheLineBytes);
    g.fifoBytes = g.llOffset + roundUp(kPageBytes + llSlots * g.llSlotStride, kPageBytes);
    g.headerBytes = roundUp(sizeof(SegmentHeader) + fifoCount * sizeof(FifoEntry), kPageBytes);
    g.bulletinOffset = g.headerBytes + fifoCount * g.fifoBytes;
    g.bulletinCapacity = kBulletinCapacityBytes;
    g.bulletinStride = roundUp((1 + g.bulletinCapacity / kLLPayloadPerLine) * kLLLineBytes, kCacheLineBytes);
    g.bulletinBytes = roundUp(kPageBytes + kBulletinBuffers * g.bulletinStride, kPageBytes);
    g.windowOffset = g.bulletinOffset + g.bulletinBytes;
    g.windowBytes = kWindowBytes;
    g.totalBytes = g.windowOffset + kPageBytes + g.windowBytes;
    return g;
  }
};

// The header of a segment of geometry `g` owned by `ownerRank` (entries not included).
inline SegmentHeader makeSegmentHeader(const SegmentGeometry& g, int32_t ownerRank, uint32_t fifoCount) {
  SegmentHeader h{};
  h.magic = kSegmentMagic;
  h.version = kLayoutVersion;
  h.ownerRank = ownerRank;
  h.fifoCount = fifoCount;
  h.slots = g.slots;
  h.chunkBytes = g.chunkBytes;
  h.slotStride = g.slotStride;
  h.fifoBytes = g.fifoBytes;
  h.headerBytes = g.headerBytes;
  h.totalBytes = g.totalBytes;
  h.llSlots = g.llSlots;
  h.llChunkBytes = g.llChunkBytes;
  h.llSlotStride = g.llSlotStride;
  h.llOffset = g.llOffset;
  h.bulletinOffset = g.bulletinOffset;
  h.bulletinCapacity = g.bulletinCapacity;
  h.bulletinStride = g.bulletinStride;
  h.bulletinBytes = g.bulletinBytes;
  h.windowOffset = g.windowOffset;
  h.windowBytes = g.windowBytes;
  return h;
}

}  // namespace loom::transport::shm
