#include "algorithms/p2p_header.h"

#include <cstring>

#include "common/format.h"

namespace loom::algo {
namespace {

constexpr uint64_t kTag = 0x4C50;  // "LP"
constexpr int kSizeBits = 48;

}  // namespace

void encodeP2PHeader(size_t bytes, std::byte out[kP2PHeaderBytes]) {
  const uint64_t header = (kTag << kSizeBits) | (static_cast<uint64_t>(bytes) & kMaxP2PMessageBytes);
  std::memcpy(out, &header, sizeof header);
}

Status checkP2PHeader(const std::byte* chunk, size_t chunkBytes, size_t expectedBytes, int rank, int peer) {
  LOOM_ENFORCE(chunkBytes >= kP2PHeaderBytes, Code::kRemoteError,
               "rank %d: recv from peer %d got a %zu-byte chunk where a message starts (ranks out of step?)", rank,
               peer, chunkBytes);
  uint64_t header = 0;
  std::memcpy(&header, chunk, sizeof header);
  LOOM_ENFORCE((header >> kSizeBits) == kTag, Code::kRemoteError,
               "rank %d: recv from peer %d got a chunk that does not start a message (ranks out of step, or a "
               "collective on one side met a send/recv on the other)",
               rank, peer);
  const uint64_t sent = header & kMaxP2PMessageBytes;
  LOOM_ENFORCE(sent == expectedBytes, Code::kRemoteError,
               "rank %d: recv of %zu bytes from peer %d is matched by a send of %llu bytes on rank %d "
               "(count x datatype size must agree)",
               rank, expectedBytes, peer, static_cast<unsigned long long>(sent), peer);
  return Status::ok();
}

}  // namespace loom::algo
