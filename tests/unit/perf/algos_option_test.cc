// --algos and --reps (options.h) and the comparison table (algo_table.h).
#include <gtest/gtest.h>

#include <algorithm>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "perf/harness/algo_table.h"
#include "perf/harness/perf_options.h"

namespace loom::perf {
namespace {

ParseOutcome parse(std::vector<std::string> args, PerfOptions* o) {
  args.insert(args.begin(), "tool");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return parseOptions(static_cast<int>(args.size()), argv.data(), o, /*quiet=*/true);
}

TEST(AlgosOption, AbsentMeansTheNormalSweep) {
  PerfOptions o;
  ASSERT_EQ(parse({"-b", "8", "-e", "1M", "-f", "4"}, &o), ParseOutcome::kRun);
  EXPECT_TRUE(o.algos.empty());
  EXPECT_EQ(o.algoReps, 5);
}

TEST(AlgosOption, ParsesTheListInOrderLowerCased) {
  PerfOptions o;
  ASSERT_EQ(parse({"--algos", "ring,TREE,hd,rd,OneShot,auto", "--reps", "7", "-n", "3"}, &o), ParseOutcome::kRun);
  EXPECT_EQ(o.algos, (std::vector<std::string>{"ring", "tree", "hd", "rd", "oneshot", "auto"}));
  EXPECT_EQ(o.algoReps, 7);
  EXPECT_EQ(o.iters, 3);
  PerfOptions protos;
  ASSERT_EQ(parse({"--algos", "ring/LL,ring/simple,ring,auto"}, &protos), ParseOutcome::kRun);
  EXPECT_EQ(protos.algos, (std::vector<std::string>{"ring/ll", "ring/simple", "ring", "auto"}));
  PerfOptions one;
  ASSERT_EQ(parse({"--algos=auto"}, &one), ParseOutcome::kRun);
  EXPECT_EQ(one.algos, std::vector<std::string>{"auto"});
}

TEST(AlgosOption, RejectsBadLists) {
  const std::vector<std::vector<std::string>> bad = {
      {"--algos", ""},          {"--algos", "ring,"},       {"--algos", ",ring"},   {"--algos", "ring,,tree"},
      {"--algos", "ring,ring"}, {"--algos", "Ring,ring"},   {"--algos", "bogus"},   {"--algos", "ring tree"},
      {"--algos"},              {"--reps", "0"},            {"--reps", "x"},        {"--reps"},
      {"--algos", "ring/"},     {"--algos", "ring/ll128"},  {"--algos", "auto/ll"}, {"--algos", "/ll"},
      {"--algos", "ring/ll,RING/LL"}};
  for (const auto& args : bad) {
    PerfOptions o;
    EXPECT_EQ(parse(args, &o), ParseOutcome::kError) << args[0] << " " << (args.size() > 1 ? args[1] : "");
  }
  std::vector<std::string> algos{"kept"};
  std::string why;
  EXPECT_FALSE(parseAlgoList("ring,nosuch", &algos, &why));
  EXPECT_NE(why.find("nosuch"), std::string::npos) << why;
  EXPECT_EQ(algos, std::vector<std::string>{"kept"});  // untouched on error
}

TEST(AlgoTable, RanForcedReadsTheAlgorithmBeforeTheProtocol) {
  EXPECT_TRUE(ranForced("ring", "ring/Simple"));
  EXPECT_TRUE(ranForced("ring", "ring/LL|ring/Simple"));
  EXPECT_FALSE(ranForced("rd", "ring/Simple"));
  EXPECT_FALSE(ranForced("rd", "rd/LL|ring/Simple"));  // one round fell back: not comparable
  EXPECT_FALSE(ranForced("tree", "treex/LL"));
  EXPECT_FALSE(ranForced("ring", ""));
  EXPECT_TRUE(ranForced("auto", "oneshot/LL"));
  EXPECT_TRUE(ranForced("ring/ll", "ring/LL"));
  EXPECT_FALSE(ranForced("ring/ll", "ring/Simple"));
  EXPECT_TRUE(ranForced("rd/simple", "rd/Simple|rd/Simple"));
}

TEST(AlgoTable, SummaryPicksTheFastestForcedThatRan) {
  const std::vector<std::string> names{"ring", "rd", "oneshot", "auto"};
  // oneshot is fastest on paper but fell back to ring: it must not count.
  const AlgoRow row{1 << 20, {{100, "ring/Simple"}, {80, "rd/Simple"}, {50, "ring/Simple"}, {88, "rd/Simple"}}};
  const AlgoRowSummary s = summarizeAlgoRow(names, row);
  EXPECT_EQ(s.best, 1);
  EXPECT_EQ(s.autoIndex, 3);
  EXPECT_DOUBLE_EQ(s.autoOverBest, 88.0 / 80.0);
  const AlgoRowSummary none = summarizeAlgoRow({"ring", "auto"}, AlgoRow{8, {{-1, ""}, {3, "rd/LL"}}});
  EXPECT_EQ(none.best, -1);
  EXPECT_LT(none.autoOverBest, 0);
}

std::string printed(const std::vector<std::string>& names, const std::vector<AlgoRow>& rows) {
  char* text = nullptr;
  size_t size = 0;
  FILE* f = open_memstream(&text, &size);
  printAlgoTable(f, names, rows);
  std::fclose(f);
  std::string s(text, size);
  std::free(text);
  return s;
}

TEST(AlgoTable, PrintsOneRowPerSizeWithNaWorstRatioAndWhatRan) {
  const std::vector<std::string> names{"ring", "oneshot", "auto"};
  const std::vector<AlgoRow> rows{{8, {{2.0, "ring/LL"}, {1.0, "oneshot/LL"}, {1.1, "oneshot/LL"}}},
                                  {1 << 20, {{500.0, "ring/Simple"}, {520.0, "ring/Simple"}, {600.0, "ring/Simple"}}}};
  const std::string out = printed(names, rows);
  std::istringstream in(out);
  std::string line;
  std::vector<std::vector<std::string>> data;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::vector<std::string> f;
    for (std::string w; fields >> w;) f.push_back(w);
    data.push_back(f);
  }
  ASSERT_EQ(data.size(), 2u) << out;
  // size, ring, oneshot, auto, auto ran, best, best is, auto/best, paired (no rounds here: "-")
  EXPECT_EQ(data[0], (std::vector<std::string>{"8", "2.00", "1.00", "1.10", "oneshot/LL", "1.00", "oneshot/LL",
                                               "1.100", "-"}));
  EXPECT_EQ(data[1], (std::vector<std::string>{"1048576", "500.00", "n/a", "600.00", "ring/Simple", "500.00",
                                               "ring/Simple", "1.200", "-"}));
  EXPECT_NE(out.find("# worst auto/best: 1.200 at 1048576 B"), std::string::npos) << out;
  EXPECT_NE(out.find("# auto ran the best's algorithm/protocol at 2 of 2 sizes"), std::string::npos) << out;
  EXPECT_NE(out.find("# n/a: oneshot did not run at 1048576 B (Loom ran ring/Simple"), std::string::npos) << out;
  EXPECT_NE(out.find("1048576: ring=ring/Simple oneshot=ring/Simple auto=ring/Simple"), std::string::npos) << out;
}

TEST(AlgoTable, PairedRatioIsTheMedianOfPerRoundRatiosAgainstTheForcedAutoLosesToMost) {
  // Round 2 was slow for everybody (the machine's state): the ratio of
  // medians blames auto for it, the paired ratio does not.
  const std::vector<std::string> names{"ring", "rd", "auto"};
  AlgoRow row{4096, {{0, "ring/Simple", {10, 10, 30, 10, 11}},
                     {0, "rd/Simple", {20, 21, 60, 19, 20}},
                     {0, "ring/Simple", {10.5, 10.2, 31, 10.3, 11}}}};
  for (AlgoCell& c : row.cells) {
    std::vector<double> v = c.roundsUs;
    std::sort(v.begin(), v.end());
    c.medianUs = v[v.size() / 2];
  }
  const AlgoRowSummary s = summarizeAlgoRow(names, row);
  EXPECT_EQ(s.best, 0);
  EXPECT_EQ(s.pairedAgainst, 0);  // against ring (auto/ring > auto/rd in every round)
  // Per-round auto/ring: 1.05, 1.02, 1.0333, 1.03, 1.0 -> median 1.03.
  EXPECT_NEAR(s.pairedAutoOverBest, 1.03, 1e-9);
  EXPECT_DOUBLE_EQ(pairedMedianRatio({1, -1, 3}, {1, 1, 1}), 2.0);  // untimed rounds skipped
  EXPECT_LT(pairedMedianRatio({-1}, {1}), 0);
  const std::string out = printed(names, {row});
  EXPECT_NE(out.find("# worst paired: 1.030 at 4096 B (auto ran ring/Simple, against ring)"), std::string::npos)
      << out;
}

TEST(AlgoTable, WithoutAutoThereIsNoRatio) {
  const std::string out = printed({"ring", "tree"}, {{64, {{3.0, "ring/LL"}, {2.5, "tree/LL"}}}});
  EXPECT_EQ(out.find("auto/best"), std::string::npos) << out;
  EXPECT_NE(out.find("tree/LL"), std::string::npos) << out;
}

}  // namespace
}  // namespace loom::perf
