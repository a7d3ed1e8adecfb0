// The LL connection pair on a FIFO in private memory, where a test can read
// the lines the sender wrote and forge lines the way a sender in the middle
// of a commit leaves them: wire format, piecewise arrival, stale lines of
// reused slots, flag wrap-around, malformed headers, bad geometry.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <vector>

#include "tests/support/rank_threads.h"
#include "transports/shm/shm_ll_connection.h"
#include "tests/unit/transports/shm/shm_test_util.h"

namespace loom::testing::shm {
namespace {

using transport::shm::kLLFlagPeriod;
using transport::shm::LLFifoControl;
using transport::shm::LLFifoView;
using transport::shm::llFlagFor;
using transport::shm::llLine;
using transport::shm::ShmLLRecvConnection;
using transport::shm::ShmLLSendConnection;

bool contains(const Status& s, const std::string& text) { return s.message().find(text) != std::string::npos; }

// One LL FIFO in this process's heap, zeroed like a fresh segment.
class LocalLLFifo {
 public:
  LocalLLFifo(uint32_t slots, uint64_t chunkBytes, uint32_t period = kLLFlagPeriod)
      : control_(std::make_unique<LLFifoControl>()), lines_(slots * linesPerSlot(chunkBytes), 0) {
    view_.control = control_.get();
    view_.slots = reinterpret_cast<std::byte*>(lines_.data());
    view_.slotCount = slots;
    view_.slotStride = linesPerSlot(chunkBytes) * sizeof(uint64_t);
    view_.chunkBytes = chunkBytes;
    view_.flagPeriod = period;
  }
  static uint64_t linesPerSlot(uint64_t chunkBytes) { return 1 + chunkBytes / 4; }

  const LLFifoView& view() const { return view_; }
  uint64_t line(uint32_t slot, uint64_t i) const {
    return std::atomic_ref<uint64_t>(lines_[slot * linesPerSlot(view_.chunkBytes) + i]).load();
  }
  void forge(uint32_t slot, uint64_t i, uint64_t value) {
    std::atomic_ref<uint64_t>(lines_[slot * linesPerSlot(view_.chunkBytes) + i]).store(value);
  }

 private:
  std::unique_ptr<LLFifoControl> control_;
  mutable std::vector<uint64_t> lines_;
  LLFifoView view_;
};

// The 4-byte payload word of bytes [4i, 4i + 4) of a pattern chunk (zero past `bytes`).
uint32_t patternWord(int src, int dst, uint64_t chunk, size_t bytes, size_t i) {
  uint8_t b[4] = {};
  for (size_t k = 0; k < 4 && 4 * i + k < bytes; ++k) b[k] = patternByte(src, dst, chunk, 4 * i + k);
  uint32_t word;
  std::memcpy(&word, b, 4);
  return word;
}

// Writes the lines of pattern chunk `chunk` as a sender would, but only the
// header and the first `dataLines` data lines.
void forgeChunk(LocalLLFifo& fifo, uint32_t slot, uint64_t chunk, size_t bytes, size_t dataLines) {
  uint32_t flag = llFlagFor(chunk, fifo.view().flagPeriod);
  fifo.forge(slot, 0, llLine(static_cast<uint32_t>(bytes), flag));
  for (size_t i = 0; i < dataLines; ++i) fifo.forge(slot, 1 + i, llLine(patternWord(0, 1, chunk, bytes, i), flag));
}

TEST(ShmLLWire, HeaderThenDataLinesEachCarryTheChunkFlag) {
  LocalLLFifo fifo(3, 64);
  ShmLLSendConnection tx(fifo.view(), 0, 1);
  ASSERT_EQ(tx.chunkBytes(), 64u);
  for (uint64_t c = 0; c < 3; ++c) {
    size_t bytes = c == 2 ? 64 : 5 + c;  // 5 and 6 bytes end in a partial line
    ASSERT_TRUE(sendPatternChunk(tx, 0, 1, c, bytes, waitFor(1)).isOk());
    uint32_t slot = static_cast<uint32_t>(c);
    uint32_t flag = static_cast<uint32_t>(c + 1);
    EXPECT_EQ(fifo.line(slot, 0), (uint64_t{flag} << 32) | bytes) << "header of chunk " << c;
    for (size_t i = 0; i < (bytes + 3) / 4; ++i)
      EXPECT_EQ(fifo.line(slot, 1 + i), (uint64_t{flag} << 32) | patternWord(0, 1, c, bytes, i))
          << "chunk " << c << " line " << i;
    if (c < 2) {
      EXPECT_EQ(fifo.line(slot, 1 + (bytes + 3) / 4), 0u) << "line past chunk " << c << " was written";
    }
  }
}

TEST(ShmLLWire, PiecewiseArrivalIsResumedByLaterCalls) {
  constexpr size_t kBytes = 37;  // 10 data lines
  LocalLLFifo fifo(2, 64);
  ShmLLRecvConnection rx(fifo.view(), 1, 0);
  const std::byte* data = nullptr;
  size_t bytes = 0;
  EXPECT_FALSE(rx.tryAcquire(&data, &bytes));
  Status s = rx.acquire(&data, &bytes, waitFor(0.05));
  EXPECT_EQ(s.code(), Code::kTimeout);
  EXPECT_TRUE(contains(s, "chunk 0 from rank 0 to rank 1 over shm (LL) (its header line has not arrived)"))
      << s.message();
  for (size_t lines = 0; lines < 10; ++lines) {
    forgeChunk(fifo, 0, 0, kBytes, lines);
    EXPECT_FALSE(rx.tryAcquire(&data, &bytes)) << "accepted with " << lines << " of 10 data lines";
  }
  s = rx.acquire(&data, &bytes, waitFor(0.05));
  EXPECT_TRUE(contains(s, "9 of its 10 data lines have arrived")) << s.message();
  // Lines taken in so far are kept: overwriting them now (a sender never
  // would) does not change what is delivered, proving they are not re-read.
  forgeChunk(fifo, 0, 0, kBytes, 10);
  fifo.forge(0, 1, llLine(0xdeadbeef, 1));
  ASSERT_TRUE(rx.tryAcquire(&data, &bytes));
  ASSERT_EQ(bytes, kBytes);
  EXPECT_EQ(checkPattern(data, bytes, 0, 1, 0), "");
  // A second acquire before release returns the same chunk.
  const std::byte* again = nullptr;
  ASSERT_TRUE(rx.acquire(&again, &bytes, waitFor(1)).isOk());
  EXPECT_EQ(again, data);
  rx.release();
  EXPECT_FALSE(rx.tryAcquire(&data, &bytes));
}

// A slot reused by a new chunk still holds the previous chunk's lines until
// the sender overwrites them: a receiver that sees only the new header must
// not take the old data lines.
TEST(ShmLLWire, StaleLinesOfAReusedSlotAreNeverAccepted) {
  constexpr uint64_t kChunk = 64;
  LocalLLFifo fifo(2, kChunk);
  ShmLLSendConnection tx(fifo.view(), 0, 1);
  ShmLLRecvConnection rx(fifo.view(), 1, 0);
  for (uint64_t c = 0; c < 2; ++c) {
    ASSERT_TRUE(sendPatternChunk(tx, 0, 1, c, kChunk, waitFor(1)).isOk());
    ASSERT_TRUE(recvPatternChunk(rx, 0, 1, c, kChunk, waitFor(1)).isOk());
  }
  // Chunk 2 reuses slot 0: only its header has arrived.
  forgeChunk(fifo, 0, 2, kChunk, 0);
  const std::byte* data = nullptr;
  size_t bytes = 0;
  EXPECT_FALSE(rx.tryAcquire(&data, &bytes));
  EXPECT_EQ(rx.acquire(&data, &bytes, waitFor(0.02)).code(), Code::kTimeout);
  forgeChunk(fifo, 0, 2, kChunk, kChunk / 4 - 1);
  EXPECT_FALSE(rx.tryAcquire(&data, &bytes));
  // The real commit completes it.
  ASSERT_TRUE(sendPatternChunk(tx, 0, 1, 2, kChunk, waitFor(1)).isOk());
  EXPECT_TRUE(recvPatternChunk(rx, 0, 1, 2, kChunk, waitFor(1)).isOk());
  // A stale header (chunk 0's, in slot 0) is not taken for chunk 4 either.
  ASSERT_TRUE(sendPatternChunk(tx, 0, 1, 3, 3, waitFor(1)).isOk());
  ASSERT_TRUE(recvPatternChunk(rx, 0, 1, 3, 3, waitFor(1)).isOk());
  forgeChunk(fifo, 0, 0, kChunk, kChunk / 4);
  EXPECT_FALSE(rx.tryAcquire(&data, &bytes));
}

// Flags repeat every period. With period 7 and 2 slots, chunk 14 lands in
// slot 0 with chunk 0's flag; chunk 0 filled the slot and every chunk since
// was empty, so without the sender's periodic full-slot rewrite chunk 0's
// data lines would pass as chunk 14's.
TEST(ShmLLWire, FlagWrapNeverRevivesOldLines) {
  constexpr uint64_t kChunk = 64;
  constexpr uint32_t kPeriod = 7;
  LocalLLFifo fifo(2, kChunk, kPeriod);
  ShmLLSendConnection tx(fifo.view(), 0, 1);
  ShmLLRecvConnection rx(fifo.view(), 1, 0);
  ASSERT_EQ(llFlagFor(14, kPeriod), llFlagFor(0, kPeriod));
  for (uint64_t c = 0; c < 14; ++c) {
    size_t n = c == 0 ? kChunk : 0;
    ASSERT_TRUE(sendPatternChunk(tx, 0, 1, c, n, waitFor(1)).isOk());
    ASSERT_TRUE(recvPatternChunk(rx, 0, 1, c, n, waitFor(1)).isOk()) << "chunk " << c;
  }
  forgeChunk(fifo, 0, 14, kChunk, 0);
  const std::byte* data = nullptr;
  size_t bytes = 0;
  EXPECT_FALSE(rx.tryAcquire(&data, &bytes)) << "stale lines from chunk 0 were accepted for chunk 14";
  ASSERT_TRUE(sendPatternChunk(tx, 0, 1, 14, kChunk, waitFor(1)).isOk());
  EXPECT_TRUE(recvPatternChunk(rx, 0, 1, 14, kChunk, waitFor(1)).isOk());
}

// Many wraps of a short flag period with varied sizes between two threads.
TEST(ShmLLWire, ShortFlagPeriodStreamsIntactBetweenThreads) {
  constexpr uint64_t kChunk = 256;
  LocalLLFifo fifo(3, kChunk, 5);
  ShmLLSendConnection tx(fifo.view(), 0, 1);
  ShmLLRecvConnection rx(fifo.view(), 1, 0);
  std::vector<Status> results(2);
  runRankThreads(2, [&](int rank) {
    WaitContext wait = waitFor(20);
    for (uint64_t c = 0; c < 3000 && results[rank].isOk(); ++c) {
      size_t n = chunkSizeFor(0, 1, c, kChunk);
      results[rank] = rank == 0 ? sendPatternChunk(tx, 0, 1, c, n, wait) : recvPatternChunk(rx, 0, 1, c, n, wait);
    }
  });
  EXPECT_TRUE(results[0].isOk()) << results[0].message();
  EXPECT_TRUE(results[1].isOk()) << results[1].message();
}

TEST(ShmLLWire, HeaderClaimingMoreThanTheSlotIsReported) {
  LocalLLFifo fifo(2, 64);
  ShmLLRecvConnection rx(fifo.view(), 1, 0);
  fifo.forge(0, 0, llLine(68, llFlagFor(0, kLLFlagPeriod)));
  const std::byte* data = nullptr;
  size_t bytes = 0;
  EXPECT_FALSE(rx.tryAcquire(&data, &bytes));
  Status s = rx.acquire(&data, &bytes, waitFor(1));
  EXPECT_EQ(s.code(), Code::kInternalError);
  EXPECT_TRUE(contains(s, "chunk from rank 0 to rank 1 claims 68 bytes, more than the 64-byte slot")) << s.message();
}

TEST(ShmLLWire, BadGeometryFailsEveryAcquire) {
  LocalLLFifo shortPeriod(4, 64, 4);  // the period must exceed the slot count
  ShmLLSendConnection tx(shortPeriod.view(), 0, 1);
  std::byte* slot = nullptr;
  Status s = tx.acquire(&slot, waitFor(1));
  EXPECT_EQ(s.code(), Code::kInternalError);
  EXPECT_TRUE(contains(s, "bad FIFO geometry")) << s.message();
  EXPECT_FALSE(tx.tryAcquire(&slot));
  tx.commit(4);  // ignored
  LocalLLFifo fifo(2, 64);
  LLFifoView odd = fifo.view();
  odd.chunkBytes = 62;  // not a whole number of lines
  ShmLLRecvConnection rx(odd, 1, 0);
  const std::byte* data = nullptr;
  size_t bytes = 0;
  EXPECT_TRUE(contains(rx.acquire(&data, &bytes, waitFor(1)), "bad FIFO geometry"));
}

}  // namespace
}  // namespace loom::testing::shm
