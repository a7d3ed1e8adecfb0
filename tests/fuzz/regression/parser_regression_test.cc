// Regression tests for the parser bugs review and the fuzzers
// (tests/fuzz) found; each case failed before its fix.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "algorithms/p2p_header.h"
#include "bootstrap/wire.h"
#include "common/config.h"
#include "transports/shm/shm_header_check.h"
#include "src/tuner/tuning_table.h"

namespace loom {
namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Config: sizes whose K/M/G product wraps past 2^64 into the valid range,
// and negative numbers strtoull would turn into huge ones.
TEST(ParserHardening, ChunkSizeThatWrapsOrIsNegativeKeepsTheDefault) {
  for (const char* value : {"17592186044417M", "-17592186044415M", "-1", " 262144", "18446744073709551615"}) {
    ::setenv("LOOM_CHUNK_SIZE", value, 1);
    std::vector<std::string> warnings;
    Config c = Config::fromEnv(&warnings);
    ::unsetenv("LOOM_CHUNK_SIZE");
    EXPECT_EQ(c.chunkBytes, Config{}.chunkBytes) << value;
    ASSERT_EQ(warnings.size(), 1u) << value;
    EXPECT_TRUE(contains(warnings[0], "ignoring LOOM_CHUNK_SIZE=")) << warnings[0];
  }
  ::setenv("LOOM_CHUNK_SIZE", "1M", 1);
  Config ok = Config::fromEnv();
  ::unsetenv("LOOM_CHUNK_SIZE");
  EXPECT_EQ(ok.chunkBytes, size_t{1} << 20);
}

// Tuning file: a NUL (or other control byte) in an algorithm name was
// accepted, and toText() then printed a different, shorter name.
TEST(ParserHardening, TuningFileRejectsControlBytesInAlgorithmNames) {
  constexpr char kWithNul[] = "allreduce ri\0ng simple 4 1 1\n";
  const std::string text(kWithNul, sizeof(kWithNul) - 1);
  Result<tuner::TuningTable> t = tuner::TuningTable::parse(text, "t.txt");
  ASSERT_FALSE(t.isOk());
  EXPECT_TRUE(contains(t.status().message(), "t.txt:1: algorithm name in field 2 has a non-printable byte 0x00"))
      << t.status().message();
  Result<tuner::TuningTable> good = tuner::TuningTable::parse("allreduce ring simple 4 1 1\n", "t.txt");
  ASSERT_TRUE(good.isOk());
  EXPECT_EQ(good.value().toText(), "allreduce ring simple 4 1 1\n");
}

// Shared-memory header: an entry offset near 2^64 made offset + fifoBytes
// wrap and pass the bounds check; a huge fifoCount could wrap the geometry.
TEST(ParserHardening, ShmHeaderOffsetsAndCountsCannotWrap) {
  using namespace transport::shm;
  const SegmentGeometry g = SegmentGeometry::compute(1, 4, 4096);
  SegmentHeader h = makeSegmentHeader(g, 0, 1);
  PeerSegmentExpectation expect{0, 1, 2, 4, 4096, g.totalBytes, "/dev/shm/test"};
  Result<SegmentGeometry> checked = checkSegmentHeader(h, expect);
  ASSERT_TRUE(checked.isOk()) << checked.status().message();

  FifoEntry wrapping{1, 0, ~uint64_t{0} - kPageBytes + 1};  // page aligned, + fifoBytes wraps to a small number
  Result<uint64_t> offset = findFifoOffset(&wrapping, 1, g, expect);
  ASSERT_FALSE(offset.isOk());
  EXPECT_TRUE(contains(offset.status().message(), "places the FIFO for rank 1 outside the segment"));
  FifoEntry good{1, 0, g.headerBytes};
  ASSERT_TRUE(findFifoOffset(&good, 1, g, expect).isOk());

  h.fifoCount = 0xFFFFFFFFu;
  Result<SegmentGeometry> huge = checkSegmentHeader(h, expect);
  ASSERT_FALSE(huge.isOk());
  EXPECT_TRUE(contains(huge.status().message(), "claims 4294967295 FIFOs; a job of 2 ranks has 1 to 2"))
      << huge.status().message();
}

// Wire: an IPv4 address ignored the 12 bytes after it and the scope, so a
// flipped byte there went unnoticed; error texts from the wire went to the
// log with control characters.
TEST(ParserHardening, WireAddressesAreStrictAndErrorTextsAreSanitized) {
  using namespace bootstrap;
  Hello hello{randomSecret(), 1, 2, SockAddr::fromNumeric("10.0.0.1", 5000).value()};
  std::vector<uint8_t> bytes = encodeHello(hello);
  ASSERT_TRUE(decodeHello(bytes).isOk());
  std::vector<uint8_t> padded = bytes;
  padded[16 + 4 + 4 + 3 + 4] = 1;  // first padding byte after the IPv4 address
  Result<Hello> bad = decodeHello(padded);
  ASSERT_FALSE(bad.isOk());
  EXPECT_TRUE(contains(bad.status().message(), "IPv4 address with nonzero padding byte 4")) << bad.status().message();
  std::vector<uint8_t> scoped = bytes;
  scoped[kHelloBytes - 1] = 1;  // scope, meaningless for IPv4
  EXPECT_FALSE(decodeHello(scoped).isOk());

  Result<RemoteError> e = decodeRemoteError(encodeRemoteError({Code::kRemoteError, "line\nfake LOOM WARN\x1b[31m"}));
  ASSERT_TRUE(e.isOk());
  EXPECT_EQ(e.value().text, "line?fake LOOM WARN?[31m");
}

TEST(ParserHardening, P2PHeaderNamesBothRanksAndTheSizes) {
  std::byte chunk[16] = {};
  algo::encodeP2PHeader(100, chunk);
  EXPECT_TRUE(algo::checkP2PHeader(chunk, sizeof chunk, 100, 3, 5).isOk());
  Status wrongSize = algo::checkP2PHeader(chunk, sizeof chunk, 64, 3, 5);
  EXPECT_EQ(wrongSize.code(), Code::kRemoteError);
  EXPECT_TRUE(contains(wrongSize.message(), "rank 3: recv of 64 bytes from peer 5 is matched by a send of 100 bytes"))
      << wrongSize.message();
  Status shortChunk = algo::checkP2PHeader(chunk, 7, 100, 3, 5);
  EXPECT_TRUE(contains(shortChunk.message(), "got a 7-byte chunk where a message starts")) << shortChunk.message();
  chunk[7] = std::byte{0};  // the tag's top byte
  EXPECT_TRUE(contains(algo::checkP2PHeader(chunk, sizeof chunk, 100, 3, 5).message(), "does not start a message"));
}

}  // namespace
}  // namespace loom
