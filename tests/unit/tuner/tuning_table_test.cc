// The tuning-table text format: parsing, errors, lookup precedence, round trip.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "src/tuner/tuning_table.h"

namespace loom::tuner {
namespace {

using algo::CollType;
using transport::Protocol;

TEST(TuningTable, ParsesEntriesCommentsWildcardsAndCase) {
  auto t = TuningTable::parse(
      "# a comment\n"
      "\n"
      "  AllReduce  Ring  SIMPLE  4  2.5  8   # trailing comment\n"
      "all_reduce * ll * 1 2 16\n"
      "* * * * 9 1\n",
      "t.txt");
  ASSERT_TRUE(t.isOk()) << t.status().message();
  ASSERT_EQ(t.value().entries().size(), 3u);
  const auto& e = t.value().entries()[0];
  EXPECT_EQ(e.key.coll, static_cast<int>(CollType::kAllReduce));
  EXPECT_EQ(e.key.algo, "ring");
  EXPECT_EQ(e.key.proto, static_cast<int>(Protocol::kSimple));
  EXPECT_EQ(e.key.nranks, 4);
  EXPECT_EQ(e.alphaMicros, 2.5);
  EXPECT_EQ(e.bandwidthGBps, 8);
  EXPECT_EQ(e.reduceGBps, 0);
  EXPECT_EQ(t.value().entries()[2].key.specificity(), 0);
}

TEST(TuningTable, MostSpecificEntryWinsAndLaterWinsTies) {
  auto t = TuningTable::parse(
      "* * * * 9 1 4\n"
      "allreduce * simple * 5 2\n"
      "allreduce ring simple 4 3 4\n"
      "allreduce ring simple 4 2 5\n",  // same key, later: wins
      "t");
  ASSERT_TRUE(t.isOk()) << t.status().message();
  const auto& table = t.value();
  CostParams exact = table.params(CollType::kAllReduce, "ring", Protocol::kSimple, 4);
  EXPECT_EQ(exact.alphaMicros, 2);
  EXPECT_DOUBLE_EQ(exact.betaMicrosPerByte, 1e-3 / 5);
  // reduce_GBps only on the catch-all: taken from there.
  EXPECT_DOUBLE_EQ(exact.gammaMicrosPerByte, 1e-3 / 4);
  CostParams other = table.params(CollType::kAllReduce, "tree", Protocol::kSimple, 8);
  EXPECT_EQ(other.alphaMicros, 5);
  CostParams ll = table.params(CollType::kBroadcast, "chain", Protocol::kLL, 2);
  EXPECT_EQ(ll.alphaMicros, 9);
}

TEST(TuningTable, AppendedTableOverridesOnTies) {
  auto base = TuningTable::parse("* * simple * 3 6\n", "base");
  auto file = TuningTable::parse("* * simple * 1 6\n", "file");
  ASSERT_TRUE(base.isOk() && file.isOk());
  TuningTable t = base.value();
  t.append(file.value());
  EXPECT_EQ(t.params(CollType::kAllReduce, "ring", Protocol::kSimple, 2).alphaMicros, 1);
}

TEST(TuningTable, MalformedLinesNameFileLineAndProblem) {
  struct Case {
    const char* line;
    const char* expect;
  } cases[] = {
      {"allreduce ring simple 2 3", "got 5 fields"},
      {"allreduce ring simple 2 3 4 5 6", "got 8 fields"},
      {"allreduce ring simple 2 x 4", "alpha_us 'x'"},
      {"allreduce ring simple 2 -1 4", "alpha_us '-1'"},
      {"allreduce ring simple 2 1 0", "bandwidth_GBps '0'"},
      {"allreduce ring simple 2 1 4 nan", "reduce_GBps 'nan'"},
      {"allreduse ring simple 2 1 4", "unknown collective 'allreduse'"},
      {"allreduce ring ll128 2 1 4", "unknown protocol 'll128'"},
      {"allreduce ring simple 0 1 4", "nranks '0'"},
      {"allreduce ring simple 2.5 1 4", "nranks '2.5'"},
      {"point allreduce ring simple * 8 1", "exact key"},
      {"point allreduce ring simple 2 8 0", "time_us '0'"},
      {"point allreduce ring simple 2 8", "got 6 fields"},
  };
  for (const auto& c : cases) {
    auto t = TuningTable::parse(std::string("# header\n* * * * 1 1\n") + c.line + "\n", "my.tuning");
    ASSERT_FALSE(t.isOk()) << c.line;
    EXPECT_EQ(t.status().code(), Code::kInvalidArgument);
    const std::string& m = t.status().message();
    EXPECT_NE(m.find("my.tuning:3: "), std::string::npos) << m;
    EXPECT_NE(m.find(c.expect), std::string::npos) << m;
  }
}

TEST(TuningTable, ReadFileReportsMissingFileAndBadLinesByPath) {
  const std::string missing = "/nonexistent-dir/loom.tuning";
  auto none = TuningTable::readFile(missing);
  ASSERT_FALSE(none.isOk());
  EXPECT_NE(none.status().message().find(missing), std::string::npos);

  char path[] = "/tmp/loom-tuning-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  {
    std::ofstream(path) << "allreduce ring simple 2 1 2\nbroken line\n";
  }
  auto bad = TuningTable::readFile(path);
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find(std::string(path) + ":2:"), std::string::npos) << bad.status().message();
  {
    std::ofstream(path) << "allreduce ring simple 2 1 2\npoint allreduce ring simple 2 64 3.5\n";
  }
  auto good = TuningTable::readFile(path);
  ASSERT_TRUE(good.isOk()) << good.status().message();
  EXPECT_EQ(good.value().points(CollType::kAllReduce, "ring", Protocol::kSimple, 2).size(), 1u);
  std::remove(path);
}

TEST(TuningTable, TextRoundTripsExactly) {
  auto t = TuningTable::parse(
      "allreduce ring simple 4 0.1 3.3333333333333335 7\n"
      "* tree ll * 1e-3 2\n"
      "point broadcast chain ll 2 4096 12.25\n",
      "t");
  ASSERT_TRUE(t.isOk());
  const std::string text = t.value().toText();
  auto again = TuningTable::parse(text, "again");
  ASSERT_TRUE(again.isOk()) << again.status().message();
  EXPECT_EQ(again.value().toText(), text);
  EXPECT_EQ(again.value().params(CollType::kAllReduce, "ring", Protocol::kSimple, 4).betaMicrosPerByte,
            t.value().params(CollType::kAllReduce, "ring", Protocol::kSimple, 4).betaMicrosPerByte);
}

TEST(TuningTable, BuiltinDefaultsParseAndCoverEveryProtocol) {
  const TuningTable& t = TuningTable::builtin();
  for (auto proto : {Protocol::kSimple, Protocol::kLL})
    for (int n : {2, 4, 8}) {
      CostParams p = t.params(CollType::kAllReduce, "ring", proto, n);
      EXPECT_GT(p.alphaMicros, 0);
      EXPECT_GT(p.betaMicrosPerByte, 0);
    }
}

TEST(TuningTable, PointsAreSortedAndLaterDuplicatesReplace) {
  auto t = TuningTable::parse(
      "point allreduce ring simple 2 4096 9\n"
      "point allreduce ring simple 2 8 2\n"
      "point allreduce ring simple 2 4096 8\n"
      "point allreduce ring simple 4 8 5\n",
      "t");
  ASSERT_TRUE(t.isOk());
  auto pts = t.value().points(CollType::kAllReduce, "ring", Protocol::kSimple, 2);
  ASSERT_EQ(pts.size(), 2u);
  EXPECT_EQ(pts[0], std::make_pair(8.0, 2.0));
  EXPECT_EQ(pts[1], std::make_pair(4096.0, 8.0));
}

}  // namespace
}  // namespace loom::tuner
