// The header that opens every point-to-point message (checkP2PHeader), read
// from a chunk another rank wrote. Input: 8 bytes give the size the receive
// expects, the rest is the chunk. Property: a chunk is accepted exactly when
// it starts with the header the matching send would have written.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "algorithms/p2p_header.h"
#include "tests/fuzz/fuzz_check.h"

using namespace loom;
using namespace loom::algo;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8) return 0;
  uint64_t expected = 0;
  std::memcpy(&expected, data, 8);
  expected &= kMaxP2PMessageBytes;  // receives larger than this are refused before any chunk moves
  const auto* chunk = reinterpret_cast<const std::byte*>(data + 8);
  const size_t chunkBytes = size - 8;
  Status st = checkP2PHeader(chunk, chunkBytes, expected, 0, 1);
  std::byte header[kP2PHeaderBytes];
  encodeP2PHeader(expected, header);
  const bool matches = chunkBytes >= kP2PHeaderBytes && std::memcmp(header, chunk, kP2PHeaderBytes) == 0;
  FUZZ_CHECK(st.isOk() == matches);
  if (!st.isOk()) FUZZ_CHECK(st.code() == Code::kRemoteError && !st.message().empty());
  return 0;
}
