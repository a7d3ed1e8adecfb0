// loomrun's command line (parseOptions). Input: NUL-separated arguments
// (argv[0] is "loomrun"). Properties: accepted options are within their
// documented bounds and the program is never empty; rejections carry a message.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_check.h"
#include "tools/loomrun/loomrun_options.h"

using namespace loom;
using namespace loom::launcher;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args{"loomrun"};
  std::string current;
  for (size_t i = 0; i < size && args.size() < 64; ++i) {
    if (data[i] == 0) {
      args.push_back(current);
      current.clear();
    } else {
      current += static_cast<char>(data[i]);
    }
  }
  if (!current.empty() && args.size() < 64) args.push_back(current);
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  argv.push_back(nullptr);

  Result<LaunchOptions> parsed = parseOptions(static_cast<int>(args.size()), argv.data());
  if (!parsed.isOk()) {
    FUZZ_CHECK(!parsed.status().message().empty());
    return 0;
  }
  const LaunchOptions& o = parsed.value();
  // Help and --version ask for nothing else, so the rest is not checked then.
  if (o.showHelp || o.showVersion || o.envHelp != EnvHelpFormat::kNone) return 0;
  FUZZ_CHECK(o.localRanks >= 1 && o.localRanks <= kMaxLocalRanks);
  FUZZ_CHECK(o.nodes >= 1 && o.nodes <= kMaxNodes && o.nodeRank >= 0 && o.nodeRank < o.nodes);
  FUZZ_CHECK(!o.command.empty());
  FUZZ_CHECK(!o.masterAddr.empty());
  FUZZ_CHECK(!o.masterPort || (*o.masterPort >= 1 && *o.masterPort <= 65535));
  FUZZ_CHECK(o.killTimeoutSeconds >= 0 && o.killTimeoutSeconds <= 86400);
  FUZZ_CHECK(o.worldSize() >= 1);
  FUZZ_CHECK(o.maxRestarts >= 0 && o.maxRestarts <= kMaxRestarts);
  FUZZ_CHECK(!o.standalone || (o.nodes == 1 && !o.masterPort));
  FUZZ_CHECK(o.redirectsAll <= kBothStreams && o.teeAll <= kBothStreams);
  for (const auto& byRank : {o.redirectsByRank, o.teeByRank}) {
    for (const auto& [rank, streams] : byRank) {
      FUZZ_CHECK(rank >= 0 && rank < kMaxLocalRanks && streams <= kBothStreams);
    }
  }
  FUZZ_CHECK(!o.wantsLogFiles() || (o.logDir && !o.logDir->empty()));
  for (int rank : o.terminalRanks) FUZZ_CHECK(rank >= 0 && rank < kMaxLocalRanks);
  FUZZ_CHECK(!o.runId || !o.runId->empty());
  FUZZ_CHECK(o.execCommand().size() >= o.command.size());
  return 0;
}
