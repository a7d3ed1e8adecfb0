// Placement of a Simple FIFO's chunks (transports/shm/chunk_ring.h): packed
// one after the other, wrapping where a whole chunk no longer fits, never over
// a chunk still held, and placed alike by the sender and the receiver.
#include <gtest/gtest.h>

#include <deque>
#include <random>
#include <set>
#include <vector>

#include "transports/shm/chunk_ring.h"

namespace loom::testing::shm {
namespace {

using transport::shm::ChunkRing;

constexpr uint64_t kKiB = 1024;

TEST(ChunkRing, PacksChunksSmallerThanASlotOverTheWholeMemory) {
  // The default FIFO: 4 slots of 256 KiB. Messages of 64 KiB take 13 places
  // (the 14th would leave less than a chunk before the end), not 4.
  const ChunkRing ring{.ringBytes = 4 * 256 * kKiB, .chunkBytes = 256 * kKiB, .align = 4 * kKiB};
  std::vector<uint64_t> places;
  uint64_t end = 0;
  for (int k = 0; k < 14; ++k) {
    const uint64_t at = ring.placeAfter(end);
    places.push_back(at);
    end = ring.endOf(at, 64 * kKiB);
  }
  for (int k = 0; k < 13; ++k) EXPECT_EQ(places[k], k * 64 * kKiB) << "chunk " << k;
  EXPECT_EQ(places[13], 0u);
}

TEST(ChunkRing, FullChunksKeepOnePerSlot) {
  const ChunkRing ring{.ringBytes = 4 * 256 * kKiB, .chunkBytes = 256 * kKiB, .align = 4 * kKiB};
  uint64_t end = 0;
  for (int k = 0; k < 9; ++k) {
    const uint64_t at = ring.placeAfter(end);
    EXPECT_EQ(at, (k % 4) * 256 * kKiB) << "chunk " << k;
    end = ring.endOf(at, 256 * kKiB);
  }
}

TEST(ChunkRing, AnEmptyChunkTakesOneAlignmentUnit) {
  const ChunkRing ring{.ringBytes = 4 * 4 * kKiB, .chunkBytes = 4 * kKiB, .align = 4 * kKiB};
  EXPECT_EQ(ring.endOf(0, 0), 4 * kKiB);
  EXPECT_EQ(ring.endOf(8 * kKiB, 1), 12 * kKiB);
  EXPECT_EQ(ring.endOf(8 * kKiB, 4 * kKiB), 12 * kKiB);
}

TEST(ChunkRing, RoomOnlyWhereNoHeldChunkLies) {
  const ChunkRing ring{.ringBytes = 100, .chunkBytes = 30, .align = 10};
  // Held [20, 60): the next place, 60, has its 30 bytes before the end.
  EXPECT_TRUE(ring.roomAfter(20, 60));
  // Held [20, 80): 80 + 30 passes the end, and wrapping to 0 would reach 30 > 20.
  EXPECT_FALSE(ring.roomAfter(20, 80));
  // Held [40, 80): wrapping to 0 leaves [0, 30) clear of 40.
  EXPECT_TRUE(ring.roomAfter(40, 80));
  // Held [70, 100) and [0, 20): 20 + 30 <= 70.
  EXPECT_TRUE(ring.roomAfter(70, 20));
  // Held [40, 100) and [0, 20): 20 + 30 > 40.
  EXPECT_FALSE(ring.roomAfter(40, 20));
  // Held everything: the newest chunk ends where the oldest starts.
  EXPECT_FALSE(ring.roomAfter(30, 30));
}

// A sender and a receiver driven at random, against a byte map of what is
// held: no chunk is ever placed over a held one, the receiver finds every
// chunk where the sender put it, and a sender told "no room" has at most
// slots - 1 chunks held or a place that would overlap.
TEST(ChunkRing, RandomTrafficNeverOverlapsAndBothEndsAgree) {
  for (const uint64_t align : {64u, 4096u}) {
    const uint64_t chunk = 4 * align, slots = 4;
    const ChunkRing ring{.ringBytes = slots * chunk, .chunkBytes = chunk, .align = align};
    std::mt19937_64 rng(align);
    struct Held {
      uint64_t at, bytes;
    };
    std::deque<Held> held;
    std::vector<int> owner(ring.ringBytes, 0);
    uint64_t sendEnd = 0, recvEnd = 0;
    int sent = 0;
    for (int step = 0; step < 20000; ++step) {
      const bool send = held.empty() || (held.size() < slots && rng() % 2 == 0);
      if (send) {
        const bool room = held.empty() || ring.roomAfter(held.front().at, sendEnd);
        if (!room) continue;
        const uint64_t at = ring.placeAfter(sendEnd);
        ASSERT_LE(at + chunk, ring.ringBytes);
        ASSERT_EQ(at % align, 0u);
        // Acquire promises a whole chunk of room, whatever is then committed.
        for (uint64_t b = at; b < at + chunk; ++b) ASSERT_EQ(owner[b], 0) << "byte " << b << " at step " << step;
        const uint64_t bytes = rng() % 3 == 0 ? chunk : rng() % (chunk + 1);
        for (uint64_t b = at; b < at + std::max<uint64_t>(bytes, 1); ++b) owner[b] = 1;
        held.push_back({at, bytes});
        sendEnd = ring.endOf(at, bytes);
        ++sent;
      } else {
        const Held oldest = held.front();
        held.pop_front();
        EXPECT_EQ(ring.placeAfter(recvEnd), oldest.at) << "step " << step;
        for (uint64_t b = oldest.at; b < oldest.at + std::max<uint64_t>(oldest.bytes, 1); ++b) owner[b] = 0;
        recvEnd = ring.endOf(oldest.at, oldest.bytes);
      }
    }
    EXPECT_GT(sent, 5000) << "align " << align;
  }
}

}  // namespace
}  // namespace loom::testing::shm
