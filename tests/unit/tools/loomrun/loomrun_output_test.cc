// Output forwarding: no prefix by default (torchrun's), "[rank] " tags with
// --tag-output, stdout/stderr kept apart, unfinished last lines flushed, raw
// pass-through, no mixing of lines under load, and a closed stdout reaching
// the ranks.
#include <algorithm>
#include <map>

#include <gtest/gtest.h>

#include "tests/unit/tools/loomrun/process_runner.h"

namespace loom::launcher::testing {
namespace {

std::vector<std::string> sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

TEST(LoomrunOutput, TagsLinesAndKeepsStreamsApart) {
  ProcessResult r = runLoomrun(
      {"-n", "2", "--tag-output", "sh", "-c", "echo out$RANK; echo err$RANK >&2; echo more$RANK; printf tail$RANK"});
  ASSERT_TRUE(r.finished);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  std::vector<std::string> out = splitLines(r.out);
  EXPECT_EQ(sorted(out), (std::vector<std::string>{"[0] more0", "[0] out0", "[0] tail0",
                                                   "[1] more1", "[1] out1", "[1] tail1"}))
      << r.out;
  EXPECT_EQ(sorted(splitLines(r.err)), (std::vector<std::string>{"[0] err0", "[1] err1"}))
      << r.err;
  // Each rank's lines keep their order.
  for (int rank = 0; rank < 2; ++rank) {
    std::string tag = "[" + std::to_string(rank) + "] ";
    std::vector<std::string> mine;
    for (const std::string& line : out) {
      if (line.starts_with(tag)) mine.push_back(line.substr(tag.size()));
    }
    std::string id = std::to_string(rank);
    EXPECT_EQ(mine, (std::vector<std::string>{"out" + id, "more" + id, "tail" + id}));
  }
  EXPECT_EQ(r.out.back(), '\n') << "the unfinished line is flushed as a whole line";
}

TEST(LoomrunOutput, SingleRankIsUntaggedAndRawByDefault) {
  ProcessResult r = runLoomrun({"-n", "1", "sh", "-c", "printf 'a\\nb'; printf 'c\\n' >&2"});
  ASSERT_TRUE(r.finished);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(r.out, "a\nb");
  EXPECT_EQ(r.err, "c\n");
}

TEST(LoomrunOutput, TagOutputForcesTagsForOneRank) {
  ProcessResult r =
      runLoomrun({"-n", "1", "--tag-output", "sh", "-c", "printf 'a\\nb'; printf 'c\\n' >&2"});
  ASSERT_TRUE(r.finished);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(r.out, "[0] a\n[0] b\n");
  EXPECT_EQ(r.err, "[0] c\n");
}

// The default with several ranks: no prefix, as torchrun, yet a line written
// in two pieces is never cut by another rank's line.
TEST(LoomrunOutput, SeveralRanksAreUntaggedWithWholeLinesByDefault) {
  ProcessResult r = runLoomrun(
      {"-n", "3", "sh", "-c", "printf 'ab'; sleep 0.1; printf 'cd\\n'; printf \"e$RANK\" >&2"});
  ASSERT_TRUE(r.finished);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(r.out, "abcd\nabcd\nabcd\n");
  EXPECT_EQ(sorted(splitLines(r.err)), (std::vector<std::string>{"e0", "e1", "e2"})) << r.err;
  EXPECT_EQ(r.err.back(), '\n') << "an unfinished line is flushed as a whole line";
}

TEST(LoomrunOutput, NoTagOutputPassesLinesThrough) {
  ProcessResult r = runLoomrun(
      {"-n", "3", "--no-tag-output", "sh", "-c", "echo out$RANK; echo err$RANK >&2"});
  ASSERT_TRUE(r.finished);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(sorted(splitLines(r.out)), (std::vector<std::string>{"out0", "out1", "out2"}));
  EXPECT_EQ(sorted(splitLines(r.err)), (std::vector<std::string>{"err0", "err1", "err2"}));
}

TEST(LoomrunOutput, ManyLinesFromManyRanksStayWholeAndOrdered) {
  const int ranks = 3, lines = 20000;
  ProcessResult r = runLoomrun({"-n", std::to_string(ranks), "--tag-output", "sh", "-c",
                                "seq 1 " + std::to_string(lines) + "; seq 1 100 >&2"},
                               {}, Seconds(15));
  ASSERT_TRUE(r.finished);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  std::map<int, int> lastSeen;  // rank -> last number forwarded
  for (const std::string& line : splitLines(r.out)) {
    int rank = -1, value = -1;
    char close = 0;
    ASSERT_EQ(std::sscanf(line.c_str(), "[%d%c %d", &rank, &close, &value), 3) << line;
    ASSERT_EQ(close, ']') << line;
    ASSERT_EQ(line, "[" + std::to_string(rank) + "] " + std::to_string(value));
    ASSERT_EQ(value, lastSeen[rank] + 1) << "rank " << rank << " lost or reordered a line";
    lastSeen[rank] = value;
  }
  ASSERT_EQ(lastSeen.size(), static_cast<size_t>(ranks));
  for (const auto& [rank, last] : lastSeen) EXPECT_EQ(last, lines) << "rank " << rank;
  EXPECT_EQ(splitLines(r.err).size(), static_cast<size_t>(ranks * 100));
}

TEST(LoomrunOutput, VeryLongLineArrivesIntactUnderOneTag) {
  // 200000 characters without a newline exceed loomrun's line buffer, so the
  // line is forwarded in pieces; the bytes must still form one tagged line.
  ProcessResult r = runLoomrun(
      {"-n", "2", "--prefix-output", "sh", "-c", "if [ $RANK = 0 ]; then head -c 200000 /dev/zero | tr '\\0' x; echo; fi"});
  ASSERT_TRUE(r.finished);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(r.out, "[0] " + std::string(200000, 'x') + "\n");
}

TEST(LoomrunOutput, ClosedStdoutStopsWritingRanks) {
  // `yes` never stops on its own: only a broken pipe, passed on by loomrun
  // closing the rank's pipe, can end it.
  std::string cmd = "'" + std::string(LOOMRUN_PATH) + "' -n 2 yes | head -n 3";
  ChildProcess shell({"/bin/sh", "-c", cmd});
  ProcessResult r = shell.wait(Seconds(10));
  ASSERT_TRUE(r.finished) << "loomrun kept running after its stdout closed";
  EXPECT_EQ(r.exitCode, 0) << r.err;
  std::vector<std::string> out = splitLines(r.out);
  ASSERT_EQ(out.size(), 3u) << r.out;
  for (const std::string& line : out) EXPECT_EQ(line, "y");
}

}  // namespace
}  // namespace loom::launcher::testing
