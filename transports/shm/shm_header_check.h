// Validation of a peer's segment header before any size or offset in it is
// used. The header lives in a file any local process of the same user can
// write, so every field is checked against what this rank expects and
// against the file's real size, with arithmetic that cannot wrap: a bad
// offset would otherwise map past the end of the file and fault (SIGBUS) on
// first use. Pure functions, so the fuzz target (tests/fuzz) calls them on
// arbitrary bytes.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "transports/shm/shm_layout.h"

namespace loom::transport::shm {

// What the connecting rank knows about the segment it is about to map.
struct PeerSegmentExpectation {
  int peerRank = 0;          // the segment's owner
  int selfRank = 0;          // the rank looking for its FIFO in it
  int nranks = 0;            // world size: a segment holds at most one FIFO per rank
  uint32_t slots = 0;        // this rank's LOOM_SHM_SLOTS
  uint64_t chunkBytes = 0;   // this rank's LOOM_CHUNK_SIZE
  uint64_t fileBytes = 0;    // the segment file's size (fstat)
  std::string path;          // for messages
};

// Checks magic, version, owner, the geometry knobs against this rank's and
// every derived size against the recomputed geometry and the file size.
// Returns the geometry the header describes.
Result<SegmentGeometry> checkSegmentHeader(const SegmentHeader& header, const PeerSegmentExpectation& expect);

// Finds the FIFO the peer keeps for expect.selfRank among `count` entries
// (the header's fifoCount, already checked) and checks that it lies inside
// the segment, page aligned. Returns its offset.
Result<uint64_t> findFifoOffset(const FifoEntry* entries, uint32_t count, const SegmentGeometry& geometry,
                                const PeerSegmentExpectation& expect);

}  // namespace loom::transport::shm
