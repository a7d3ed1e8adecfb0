// The header page of a peer's shared-memory segment (checkSegmentHeader and
// findFifoOffset), which any local process of the user could have written.
//
// Input: 8 bytes choose this rank's view (world size, own rank, slots, chunk
// size, the file's size), then the SegmentHeader's bytes, then the FIFO
// entry table. Property: whatever is accepted maps inside the file: the
// FIFO's offset is page aligned, after the header and ends within both the
// geometry and the file.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "tests/fuzz/fuzz_check.h"
#include "transports/shm/shm_header_check.h"

using namespace loom;
using namespace loom::transport::shm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr size_t kViewBytes = 8;
  if (size < kViewBytes) return 0;
  // Values the real configuration can hold (Config::fromEnv bounds them).
  static constexpr uint64_t kChunks[] = {4096, 64 * 1024, 256 * 1024, 1 << 20, 64 << 20};
  PeerSegmentExpectation expect;
  expect.nranks = 2 + data[0] % 63;
  expect.selfRank = data[1] % expect.nranks;
  expect.peerRank = data[2] % expect.nranks;
  expect.slots = 2 + data[3] % 63;
  expect.chunkBytes = kChunks[data[4] % 5];
  uint32_t fileScale = 0;
  std::memcpy(&fileScale, data + 5, 3);
  expect.fileBytes = uint64_t{fileScale} << 12;
  expect.path = "/dev/shm/loom-fuzz";

  SegmentHeader header{};
  const size_t headerBytes = std::min(size - kViewBytes, sizeof(SegmentHeader));
  std::memcpy(&header, data + kViewBytes, headerBytes);
  Result<SegmentGeometry> g = checkSegmentHeader(header, expect);
  if (!g.isOk()) return 0;
  FUZZ_CHECK(header.fifoCount >= 1 && header.fifoCount <= static_cast<uint32_t>(expect.nranks));
  FUZZ_CHECK(g.value().headerBytes <= g.value().totalBytes && g.value().totalBytes <= expect.fileBytes);

  // The entry table as the real code sees it: headerBytes mapped, fifoCount entries.
  std::vector<FifoEntry> entries(header.fifoCount);
  const size_t tableAt = kViewBytes + sizeof(SegmentHeader);
  if (size > tableAt) {
    std::memcpy(entries.data(), data + tableAt, std::min(size - tableAt, entries.size() * sizeof(FifoEntry)));
  }
  Result<uint64_t> offset = findFifoOffset(entries.data(), header.fifoCount, g.value(), expect);
  if (!offset.isOk()) return 0;
  const uint64_t at = offset.value();
  FUZZ_CHECK(at % kPageBytes == 0 && at >= g.value().headerBytes);
  FUZZ_CHECK(at + g.value().fifoBytes >= at);  // no wrap
  FUZZ_CHECK(at + g.value().fifoBytes <= g.value().totalBytes && at + g.value().fifoBytes <= expect.fileBytes);
  return 0;
}
