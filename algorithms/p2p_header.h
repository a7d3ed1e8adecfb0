// The 8-byte header that opens every point-to-point message on the wire (see
// p2p.h): a tag in the top 16 bits, which catches a chunk that does not start
// a message (ranks out of step), and the message's byte count below it. The
// receiver checks it before a single payload byte is copied; a pure function,
// so the fuzz target (tests/fuzz) feeds it arbitrary chunks.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/status.h"

namespace loom::algo {

// Bytes of the header that opens every message on the wire.
constexpr size_t kP2PHeaderBytes = 8;
// The byte count field has 48 bits.
constexpr uint64_t kMaxP2PMessageBytes = (uint64_t{1} << 48) - 1;

// Writes the header of a message of `bytes` (<= kMaxP2PMessageBytes).
void encodeP2PHeader(size_t bytes, std::byte out[kP2PHeaderBytes]);

// Checks the first `chunkBytes` bytes of a message's first chunk, received by
// `rank` from `peer`, against the size the receive expects. kRemoteError
// naming both ranks when the chunk is too short for a header, does not start
// with the tag, or announces another size.
Status checkP2PHeader(const std::byte* chunk, size_t chunkBytes, size_t expectedBytes, int rank, int peer);

}  // namespace loom::algo
