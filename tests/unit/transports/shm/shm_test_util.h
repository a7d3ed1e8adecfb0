// Helpers shared by the transport tests: unique job tags, small settings,
// waits, data patterns, and leftover checks in the segment directory (the
// world of connected ranks is transport_world.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/status.h"
#include "common/wait.h"
#include "transports/transport.h"

namespace loom::testing::shm {

// A job tag unique to this process and call, so tests never share segments.
std::string uniqueJobTag();

// A config with small chunks so tests are quick; callers adjust fields.
Config smallConfig(size_t chunkBytes = 4096, int slots = 4);

// A wait that fails after `seconds` (tests never hang).
WaitContext waitFor(double seconds, const std::atomic<bool>* abort = nullptr);

// Every rank but `rank` in [0, nranks).
std::vector<int> allPeersOf(int rank, int nranks);

// Deterministic content of byte `i` of chunk `chunk` sent from `src` to `dst`.
inline uint8_t patternByte(int src, int dst, uint64_t chunk, size_t i) {
  uint64_t x = (static_cast<uint64_t>(src) << 48) ^ (static_cast<uint64_t>(dst) << 40) ^ (chunk << 20) ^ (i >> 3);
  x += 0x9e3779b97f4a7c15ull;  // splitmix64 finaliser
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  return static_cast<uint8_t>(x >> (8 * (i & 7)));
}
// A size in [0, chunkBytes] that varies with the chunk index and hits both ends.
size_t chunkSizeFor(int src, int dst, uint64_t chunk, size_t chunkBytes);

void fillPattern(std::byte* out, size_t bytes, int src, int dst, uint64_t chunk);
// Empty when `data` matches, else a description of the first mismatch.
std::string checkPattern(const std::byte* data, size_t bytes, int src, int dst, uint64_t chunk);

// Sends one chunk of `bytes` bytes with the pattern; receives one and checks it.
Status sendPatternChunk(transport::SendConnection& conn, int src, int dst, uint64_t chunk, size_t bytes,
                        const WaitContext& wait);
Status recvPatternChunk(transport::RecvConnection& conn, int src, int dst, uint64_t chunk, size_t expectBytes,
                        const WaitContext& wait);

// Names of files in `dir` that start with loom-<jobTag>- (segment leftovers).
std::vector<std::string> leftoverSegments(const std::string& jobTag, const std::string& dir = "/dev/shm");

}  // namespace loom::testing::shm
