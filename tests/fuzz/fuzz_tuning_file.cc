// LOOM_TUNING_FILE's text (TuningTable::parse), as perf/tune.sh writes it
// and as users edit it. Properties: a table that parses prints (toText) to
// text that parses back to the same table, and every lookup of it yields
// finite, non-negative cost parameters.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "tests/fuzz/fuzz_check.h"
#include "src/tuner/tuning_table.h"

using namespace loom;
using namespace loom::tuner;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  Result<TuningTable> table = TuningTable::parse(text, "fuzz");
  if (!table.isOk()) return 0;
  const std::string canonical = table.value().toText();
  Result<TuningTable> again = TuningTable::parse(canonical, "fuzz canonical");
  FUZZ_CHECK(again.isOk());
  FUZZ_CHECK(again.value().toText() == canonical);
  for (int coll = 0; coll < algo::kNumCollTypes; ++coll) {
    for (int proto = 0; proto < transport::kNumProtocols; ++proto) {
      for (const char* algo : {"ring", "tree", "hd"}) {
        const auto c = static_cast<algo::CollType>(coll);
        const auto p = static_cast<transport::Protocol>(proto);
        CostParams params = table.value().params(c, algo, p, 4);
        FUZZ_CHECK(std::isfinite(params.alphaMicros) && params.alphaMicros >= 0);
        FUZZ_CHECK(std::isfinite(params.betaMicrosPerByte) && params.betaMicrosPerByte >= 0);
        FUZZ_CHECK(std::isfinite(params.gammaMicrosPerByte) && params.gammaMicrosPerByte >= 0);
        for (const auto& [bytes, micros] : table.value().points(c, algo, p, 4)) {
          FUZZ_CHECK(bytes >= 0 && micros > 0);
        }
      }
    }
  }
  return 0;
}
