// The cost model's predictions and the tuner's choices, with the real
// registry and the built-in tuning table, against a recorded golden file:
// every registered (collective, algorithm) x protocol for 2..16 ranks and
// 8 B..1 GiB (powers of 4), on one host and on several host layouts, plus the
// choice for every collective and size. Any change to a formula, a record or
// the table that moves a prediction by more than 1e-9 (relative) or changes
// a choice fails here.
//
// A deliberate change of the model regenerates the file:
//   LOOM_COST_GOLDEN_WRITE=tests/unit/tuner/cost_model_golden.txt \
//     build/tests/unit/tuner/tuner_test --gtest_filter='CostGolden.*'
// (that run fails on purpose, so a write can never pass for a comparison),
// and the diff of the file shows which predictions and choices moved.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "algorithms/patterns/host_layout.h"
#include "algorithms/registry.h"
#include "common/format.h"
#include "src/tuner/tuner.h"
#include "tests/unit/tuner/tuner_test_util.h"

namespace loom::tuner {
namespace {

using algo::CollType;
using transport::Protocol;

constexpr CollType kColls[] = {CollType::kAllReduce, CollType::kBroadcast, CollType::kReduce,
                               CollType::kReduceScatter, CollType::kAllGather};

std::vector<double> sizes() {
  std::vector<double> out;
  for (double b = 8; b <= 1024.0 * 1024 * 1024; b *= 4) out.push_back(b);
  return out;
}

// Host layouts of n ranks: two hosts of n/2, hosts of two ranks each, and
// one rank alone on its host beside all others (uneven), as host letters.
std::vector<std::string> layoutsOf(int n) {
  std::vector<std::string> out;
  auto blocked = [&](int hosts) {
    std::string s;
    for (int r = 0; r < n; ++r) s += static_cast<char>('A' + r / (n / hosts));
    return s;
  };
  if (n % 2 == 0) out.push_back(blocked(2));
  if (n % 2 == 0 && n / 2 != 2) out.push_back(blocked(n / 2));
  if (n == 3 || n == 5 || n == 8) out.push_back("A" + std::string(static_cast<size_t>(n - 1), 'B'));
  return out;
}

std::vector<uint64_t> keysOf(const std::string& hosts) {
  std::vector<uint64_t> keys;
  for (char c : hosts) keys.push_back(static_cast<uint64_t>(c));
  return keys;
}

struct Setup {
  Setup(int n, const std::string& hosts, bool deterministic)
      : contexts(n, hosts.empty()),
        layout(hosts.empty() ? algo::HostLayout{} : algo::HostLayout::fromHostKeys(keysOf(hosts), 0)) {
    options.table = TuningTable::builtin();
    options.deterministic = deterministic;
    if (!hosts.empty()) {
      contexts.simple.hosts = &layout;
      contexts.ll.hosts = &layout;
      contexts.simple.singleHost = contexts.ll.singleHost = layout.nHosts() == 1;
    }
    tuner = std::make_unique<Tuner>(options, n, algo::allAlgorithms(), Logger(), nullptr);
  }
  testing::Contexts contexts;
  algo::HostLayout layout;
  TunerOptions options;
  std::unique_ptr<Tuner> tuner;
};

std::string dumpModel() {
  const auto& registry = algo::allAlgorithms();
  std::string out;
  for (int n = 2; n <= 16; ++n) {
    std::vector<std::string> layouts = {""};
    for (const auto& l : layoutsOf(n)) layouts.push_back(l);
    for (const std::string& hosts : layouts) {
      const Setup s(n, hosts, false);
      const char* where = hosts.empty() ? "one-host" : hosts.c_str();
      for (size_t i = 0; i < registry.size(); ++i)
        for (const auto* ctx : {&s.contexts.simple, &s.contexts.ll}) {
          out += strprintf("predict %s %d %s %s %s :", where, n, algo::collTypeName(registry[i].type), registry[i].name,
                           transport::protocolName(ctx->proto));
          for (double bytes : sizes()) out += strprintf(" %.12g", s.tuner->predictIn(i, ctx->proto, bytes, *ctx));
          out += '\n';
        }
      for (bool deterministic : {false, true}) {
        const Setup d(n, hosts, deterministic);
        for (CollType type : kColls) {
          out += strprintf("choose %s %d %s%s :", where, n, algo::collTypeName(type),
                           deterministic ? " deterministic" : "");
          for (double bytes : sizes()) {
            // A reduce-scatter's or all-gather's count is per rank; `bytes`
            // is the whole buffer, as the predictions take it.
            const bool perRank = type == CollType::kReduceScatter || type == CollType::kAllGather;
            const auto callBytes = static_cast<size_t>(bytes) / static_cast<size_t>(perRank ? n : 1);
            out += " " + testing::nameOf(d.tuner->choose(testing::callOf(type, callBytes), d.contexts.available()));
          }
          out += '\n';
        }
      }
    }
  }
  return out;
}

std::vector<std::string> linesOf(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> fieldsOf(const std::string& line) {
  std::vector<std::string> f;
  std::istringstream in(line);
  for (std::string w; in >> w;) f.push_back(w);
  return f;
}

// Whether two lines agree: the same words, numbers after ':' of a prediction
// within 1e-9 relative.
bool sameLine(const std::string& want, const std::string& got, std::string* why) {
  const auto a = fieldsOf(want), b = fieldsOf(got);
  if (a.size() != b.size()) return *why = "different number of fields", false;
  bool numbers = false;
  for (size_t k = 0; k < a.size(); ++k) {
    if (numbers && a[0] == "predict") {
      const double x = std::strtod(a[k].c_str(), nullptr), y = std::strtod(b[k].c_str(), nullptr);
      if (std::fabs(x - y) > 1e-9 * std::max(std::fabs(x), std::fabs(y))) {
        *why = strprintf("field %zu: recorded %s, now %s", k + 1, a[k].c_str(), b[k].c_str());
        return false;
      }
    } else if (a[k] != b[k]) {
      *why = strprintf("field %zu: recorded '%s', now '%s'", k + 1, a[k].c_str(), b[k].c_str());
      return false;
    }
    numbers = numbers || a[k] == ":";
  }
  return true;
}

TEST(CostGolden, PredictionsAndChoicesMatchTheRecordedOnes) {
  const std::string now = dumpModel();
  if (const char* path = std::getenv("LOOM_COST_GOLDEN_WRITE")) {
    std::ofstream(path) << now;
    FAIL() << "wrote " << linesOf(now).size() << " lines to " << path << " (LOOM_COST_GOLDEN_WRITE); nothing compared";
  }
  std::ifstream in(LOOM_COST_GOLDEN_FILE);
  ASSERT_TRUE(in) << "cannot open " << LOOM_COST_GOLDEN_FILE;
  std::stringstream recorded;
  recorded << in.rdbuf();
  const auto want = linesOf(recorded.str()), got = linesOf(now);
  ASSERT_EQ(want.size(), got.size()) << "the recorded and computed dumps differ in length";
  int mismatches = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    std::string why;
    if (sameLine(want[i], got[i], &why)) continue;
    if (++mismatches <= 10) ADD_FAILURE() << "line " << i + 1 << ": " << why << "\n  recorded: " << want[i]
                                          << "\n  now:      " << got[i];
  }
  EXPECT_EQ(mismatches, 0) << "lines that differ from " << LOOM_COST_GOLDEN_FILE;
  // Guards the comparison itself: the dump covers every record, and it has
  // numbers to compare.
  EXPECT_GT(want.size(), 15u * 2 * algo::allAlgorithms().size());
}

TEST(CostGolden, ComparisonCatchesASmallChange) {
  const std::string line = "predict one-host 4 allreduce ring Simple : 1 2.5 1000";
  std::string why;
  EXPECT_TRUE(sameLine(line, "predict one-host 4 allreduce ring Simple : 1 2.5000000000001 1000", &why));
  EXPECT_FALSE(sameLine(line, "predict one-host 4 allreduce ring Simple : 1 2.5000001 1000", &why));
  EXPECT_FALSE(sameLine("choose one-host 2 allreduce : ring/Simple", "choose one-host 2 allreduce : tree/Simple", &why));
  EXPECT_FALSE(sameLine(line, "predict one-host 4 allreduce tree Simple : 1 2.5 1000", &why));
}

}  // namespace
}  // namespace loom::tuner
