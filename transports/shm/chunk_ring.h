// Where the chunks of one Simple FIFO lie in its slot memory.
//
// Chunks are packed: each starts at the first aligned offset after the one
// before it, and wraps to the start of the memory where a whole chunk would
// no longer fit (acquire() hands out room for chunkBytes before the size is
// known). The slot count still bounds how many chunks are in flight.
//
// Why not one chunk per slot: a sender writing lines its receiver read a
// moment ago must first take them back from the receiver's cache. With a
// slot per chunk, a message smaller than a chunk reuses the same few lines
// on every call: 4 slots of 256 KiB cycle over 256 KiB of 64 KiB messages,
// which stay in the receiver's L2. On a 2-core EPYC VM a 64 KiB one-shot
// all-reduce at 2 ranks spent about 7 of its 10 us in those writes (a
// two-thread copy-in-and-add loop: 7.4 us copying into lines the peer had
// read, 1.7 us once they cycled over 2 MiB). Packed, the same megabyte
// cycles over 13 positions of 64 KiB, whose lines have left the receiver's
// private caches before they are written again.
//
// Sender and receiver place every chunk by the same rule from the sizes of
// the chunks before it (the receiver reads each size anyway), so no offset
// crosses between the processes.
#pragma once

#include <algorithm>
#include <cstdint>

namespace loom::transport::shm {

struct ChunkRing {
  uint64_t ringBytes = 0;   // slot count x slot stride
  uint64_t chunkBytes = 0;  // the most one chunk holds
  uint64_t align = 1;       // where chunks may start (the slot stride's alignment)

  // Where the next chunk goes when the previous one ended at `end`.
  uint64_t placeAfter(uint64_t end) const { return end + chunkBytes > ringBytes ? 0 : end; }
  // The aligned end of a chunk of `bytes` placed at `at`. An empty chunk
  // still takes one alignment unit, so no two chunks in flight start at the
  // same place (the room check tells full from empty by position).
  uint64_t endOf(uint64_t at, uint64_t bytes) const {
    const uint64_t end = at + std::max<uint64_t>(bytes, 1);
    return (end + align - 1) / align * align;
  }
  // Whether a chunk placed after `end` leaves alone every chunk still held,
  // which lie from `oldest` (the oldest one's start) forward to `end`,
  // wrapping past the end of the memory when oldest >= end.
  bool roomAfter(uint64_t oldest, uint64_t end) const {
    const uint64_t at = placeAfter(end);
    if (oldest < end) return at >= end || at + chunkBytes <= oldest;  // held: [oldest, end)
    return at >= end && at + chunkBytes <= oldest;  // held: [oldest, ring) and [0, end)
  }
};

}  // namespace loom::transport::shm
