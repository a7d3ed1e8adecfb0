// The UCX transport's wire protocol without UCX: tag layout (kind, rank and
// sequence number never bleed into each other, sequence numbers wrap at
// 2^40) and the hello check (every field that must agree is checked and
// named in the message).
#include <gtest/gtest.h>

#include "transports/ucx/ucx_handshake.h"
#include "transports/ucx/ucx_tags.h"

namespace loom::transport::ucx {
namespace {

TEST(UcxTags, FieldsRoundTripAtTheirLimits) {
  const TagKind kinds[] = {TagKind::kData, TagKind::kCredit, TagKind::kHello, TagKind::kGoodbye};
  const int ranks[] = {0, 1, 2, 77, kMaxTagRanks - 1};
  const uint64_t seqs[] = {0, 1, 12345, kTagSeqMask - 1, kTagSeqMask};
  for (TagKind k : kinds)
    for (int r : ranks)
      for (uint64_t s : seqs) {
        uint64_t tag = makeTag(k, r, s);
        EXPECT_EQ(tagKind(tag), k);
        EXPECT_EQ(tagRank(tag), r);
        EXPECT_EQ(tagSeq(tag), s);
      }
}

TEST(UcxTags, DistinctKindsRanksAndSequencesGiveDistinctTags) {
  EXPECT_NE(makeTag(TagKind::kData, 1, 0), makeTag(TagKind::kCredit, 1, 0));
  EXPECT_NE(makeTag(TagKind::kData, 1, 5), makeTag(TagKind::kData, 2, 5));
  EXPECT_NE(makeTag(TagKind::kData, 1, 5), makeTag(TagKind::kData, 1, 6));
  // Sequence numbers wrap at 2^40 (only `slots` chunks are ever in flight).
  EXPECT_EQ(makeTag(TagKind::kData, 3, kTagSeqMask + 1), makeTag(TagKind::kData, 3, 0));
  EXPECT_EQ(makeTag(TagKind::kData, 3, (uint64_t{1} << 40) + 9), makeTag(TagKind::kData, 3, 9));
  // A sequence number never reaches the rank bits.
  EXPECT_EQ(tagRank(makeTag(TagKind::kData, 3, ~uint64_t{0})), 3);
}

constexpr uint64_t kJob = 0x1234abcd5678ef00ull;

TEST(UcxHello, MatchingHelloPasses) {
  Hello h = makeHello(/*self=*/2, /*peer=*/0, 65536, 4, kJob);
  EXPECT_EQ(checkHello(h, /*self=*/0, /*peer=*/2, 65536, 4, kJob), "");
}

TEST(UcxHello, EveryMismatchIsNamed) {
  Hello h = makeHello(2, 0, 65536, 4, kJob);
  EXPECT_NE(checkHello(h, 0, 2, 4096, 4, kJob).find("LOOM_CHUNK_SIZE"), std::string::npos);
  EXPECT_NE(checkHello(h, 0, 2, 65536, 2, kJob).find("LOOM_SHM_SLOTS"), std::string::npos);
  EXPECT_NE(checkHello(h, 0, 2, 65536, 4, kJob + 1).find("another communicator"), std::string::npos);
  std::string wrongRank = checkHello(h, 1, 2, 65536, 4, kJob);
  EXPECT_NE(wrongRank.find("from rank 2 to rank 0"), std::string::npos) << wrongRank;
  EXPECT_NE(checkHello(h, 0, 3, 65536, 4, kJob), "");
  Hello junk = h;
  junk.magic = 0xdeadbeef;
  EXPECT_NE(checkHello(junk, 0, 2, 65536, 4, kJob).find("not Loom's"), std::string::npos);
  Hello old = h;
  old.version = kHelloVersion + 1;
  EXPECT_NE(checkHello(old, 0, 2, 65536, 4, kJob), "");
}

TEST(UcxHello, JobTagHashSeparatesCommunicators) {
  EXPECT_EQ(jobTagHash("loom-abc-1"), jobTagHash("loom-abc-1"));
  EXPECT_NE(jobTagHash("loom-abc-1"), jobTagHash("loom-abc-2"));
  EXPECT_NE(jobTagHash(""), jobTagHash("a"));
}

}  // namespace
}  // namespace loom::transport::ucx
