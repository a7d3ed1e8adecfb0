// LOOM_ALGO / LOOM_PROTO syntax: lists, ^, case, per-collective segments, unknown names.
#include <gtest/gtest.h>

#include "src/tuner/name_filter.h"
#include "src/tuner/tuning_table.h"

namespace loom::tuner {
namespace {

using algo::CollType;

// ring/rd/tree for all-reduce, chain/tree for broadcast.
bool known(int coll, const std::string& name) {
  const bool ar = name == "ring" || name == "rd" || name == "tree";
  const bool bc = name == "chain" || name == "tree";
  if (coll < 0) return ar || bc;
  if (coll == static_cast<int>(CollType::kAllReduce)) return ar;
  if (coll == static_cast<int>(CollType::kBroadcast)) return bc;
  return false;
}

NameFilter parse(const std::string& spec, std::vector<std::string>* warnings = nullptr) {
  return NameFilter::parse(spec, "LOOM_ALGO", "algorithm", known, warnings);
}

TEST(NameFilter, EmptyAllowsEverything) {
  NameFilter f = parse("");
  EXPECT_TRUE(f.allows(CollType::kAllReduce, "ring"));
  EXPECT_TRUE(f.allows(CollType::kBroadcast, "chain"));
  EXPECT_FALSE(f.names(CollType::kAllReduce, "ring"));
}

TEST(NameFilter, ListAllowsOnlyItsNamesCaseInsensitively) {
  NameFilter f = parse("Ring, TREE");
  EXPECT_TRUE(f.allows(CollType::kAllReduce, "ring"));
  EXPECT_TRUE(f.allows(CollType::kAllReduce, "tree"));
  EXPECT_FALSE(f.allows(CollType::kAllReduce, "rd"));
  EXPECT_FALSE(f.allows(CollType::kBroadcast, "chain"));
  EXPECT_TRUE(f.names(CollType::kAllReduce, "ring"));
}

TEST(NameFilter, CaretExcludes) {
  NameFilter f = parse("^ring,rd");
  EXPECT_FALSE(f.allows(CollType::kAllReduce, "ring"));
  EXPECT_FALSE(f.allows(CollType::kAllReduce, "rd"));
  EXPECT_TRUE(f.allows(CollType::kAllReduce, "tree"));
  EXPECT_TRUE(f.allows(CollType::kBroadcast, "chain"));
  EXPECT_FALSE(f.names(CollType::kAllReduce, "tree"));
}

TEST(NameFilter, PerCollectiveSegmentsAndADefaultSegment) {
  NameFilter f = parse("allreduce:tree,ring; Broadcast:^tree; rd");
  EXPECT_TRUE(f.allows(CollType::kAllReduce, "tree"));
  EXPECT_FALSE(f.allows(CollType::kAllReduce, "rd"));
  EXPECT_TRUE(f.allows(CollType::kBroadcast, "chain"));
  EXPECT_FALSE(f.allows(CollType::kBroadcast, "tree"));
  // Reduce has no segment of its own, and the default one names none of its
  // algorithms (this test's reduce has none): unfiltered.
  EXPECT_TRUE(f.allows(CollType::kReduce, "chain"));

  // The default segment applies to a collective with a named algorithm.
  NameFilter g = parse("broadcast:chain;tree");
  EXPECT_TRUE(g.allows(CollType::kAllReduce, "tree"));
  EXPECT_FALSE(g.allows(CollType::kAllReduce, "rd"));
  EXPECT_FALSE(g.allows(CollType::kBroadcast, "tree"));
}

TEST(NameFilter, AListWithoutAnAlgorithmOfACollectiveLeavesItUnfiltered) {
  // LOOM_ALGO=ring: ring where there is one; broadcast keeps its own.
  NameFilter f = parse("ring");
  EXPECT_FALSE(f.allows(CollType::kAllReduce, "tree"));
  EXPECT_TRUE(f.allows(CollType::kBroadcast, "chain"));
  EXPECT_TRUE(f.allows(CollType::kBroadcast, "tree"));
  // Exclusions always apply.
  NameFilter g = parse("^chain");
  EXPECT_FALSE(g.allows(CollType::kBroadcast, "chain"));
}

TEST(NameFilter, UnknownNamesAndCollectivesWarnAndAreIgnored) {
  std::vector<std::string> warnings;
  NameFilter f = parse("ring,bogus;allreduse:rd;broadcast:ring", &warnings);
  ASSERT_EQ(warnings.size(), 3u);
  EXPECT_NE(warnings[0].find("unknown algorithm 'bogus'"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("LOOM_ALGO="), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[1].find("unknown collective 'allreduse'"), std::string::npos) << warnings[1];
  EXPECT_NE(warnings[2].find("unknown algorithm 'ring' for broadcast"), std::string::npos) << warnings[2];
  EXPECT_TRUE(f.allows(CollType::kAllReduce, "ring"));
  EXPECT_FALSE(f.allows(CollType::kAllReduce, "rd"));
  // broadcast's list was left empty by the unknown name: no filtering.
  EXPECT_TRUE(f.allows(CollType::kBroadcast, "tree"));
}

TEST(NameFilter, OnlyUnknownNamesFilterNothing) {
  std::vector<std::string> warnings;
  NameFilter f = parse("nope", &warnings);
  EXPECT_EQ(warnings.size(), 1u);
  EXPECT_TRUE(f.allows(CollType::kAllReduce, "rd"));
}

TEST(NameFilter, ProtocolNames) {
  std::vector<std::string> warnings;
  NameFilter f = NameFilter::parse("LL,ll128", "LOOM_PROTO", "protocol",
                                   [](int, const std::string& n) { return parseProtoName(n) >= 0; }, &warnings);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("unknown protocol 'll128'"), std::string::npos);
  EXPECT_TRUE(f.allows(CollType::kAllReduce, "ll"));
  EXPECT_FALSE(f.allows(CollType::kAllReduce, "simple"));
}

}  // namespace
}  // namespace loom::tuner
