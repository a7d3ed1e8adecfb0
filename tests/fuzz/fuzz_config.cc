// Environment knobs (Config::fromEnv, LogSettings, and the LOOM_ALGO /
// LOOM_PROTO filters the tuner builds from them). Input: the first byte picks
// a variable, the rest is its value. Properties: every knob ends in its
// documented range (a bad value keeps the default and adds a warning), and
// the filters never crash on any spelling.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/config.h"
#include "tests/fuzz/fuzz_check.h"
#include "src/tuner/name_filter.h"
#include "src/tuner/tuning_table.h"

using namespace loom;

namespace {

// LOOM_DEBUG_FILE is left out on purpose: it opens files.
constexpr const char* kVariables[] = {
    "LOOM_TIMEOUT", "LOOM_CHUNK_SIZE", "LOOM_SHM_SLOTS", "LOOM_SPIN_US",      "LOOM_YIELD_US", "LOOM_SHM_DIR",
    "LOOM_ALGO",    "LOOM_PROTO",      "LOOM_DEBUG",     "LOOM_DEBUG_SUBSYS", "LOOM_DETERMINISTIC",
    "LOOM_CHECK",   "LOOM_FLIGHT_RECORDER_ENTRIES",
};
constexpr size_t kCount = sizeof(kVariables) / sizeof(kVariables[0]);

bool knownAlgo(int coll, const std::string& name) {
  for (const char* a : {"ring", "tree", "hd", "rd", "oneshot", "chain", "deterministic"})
    if (name == a) return coll != 1 || name == "chain" || name == "tree";
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const char* name = kVariables[data[0] % kCount];
  // Environment values end at the first NUL.
  const std::string value(reinterpret_cast<const char*>(data + 1), size - 1);
  ::setenv(name, value.c_str(), 1);
  std::vector<std::string> warnings;
  Config c = Config::fromEnv(&warnings);
  ::unsetenv(name);

  FUZZ_CHECK(c.timeoutSeconds > 0);
  FUZZ_CHECK(c.chunkBytes >= 4096 && c.chunkBytes <= (64u << 20) && c.chunkBytes % 64 == 0);
  FUZZ_CHECK(c.fifoSlots >= 2 && c.fifoSlots <= 64);
  FUZZ_CHECK(c.spinMicros >= 0 && c.spinMicros <= 10000000);
  FUZZ_CHECK(c.yieldMicros >= 0 && c.yieldMicros <= 10000000);
  FUZZ_CHECK(!c.shmDir.empty());
  FUZZ_CHECK(c.flightRecorderEntries >= 0 && c.flightRecorderEntries <= 1000000);
  for (const std::string& w : warnings) FUZZ_CHECK(w.find(name) != std::string::npos);

  std::vector<std::string> filterWarnings;
  tuner::NameFilter algo = tuner::NameFilter::parse(c.algo, "LOOM_ALGO", "algorithm", knownAlgo, &filterWarnings);
  tuner::NameFilter proto = tuner::NameFilter::parse(
      c.proto, "LOOM_PROTO", "protocol", [](int, const std::string& n) { return tuner::parseProtoName(n) >= 0; },
      &filterWarnings);
  for (int coll = 0; coll < algo::kNumCollTypes; ++coll) {
    const auto type = static_cast<algo::CollType>(coll);
    (void)algo.allows(type, "ring");
    (void)algo.names(type, "tree");
    (void)proto.allows(type, "ll");
  }
  return 0;
}
