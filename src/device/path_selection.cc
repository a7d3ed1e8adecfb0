#include "src/device/path_selection.h"

namespace loom::cuda {

const char* dataPathName(DataPath path) {
  switch (path) {
    case DataPath::kHost: return "host";
    case DataPath::kStaged: return "staged";
    case DataPath::kDirectP2P: return "direct-p2p";
    case DataPath::kDirectGdr: return "direct-gdr";
    case DataPath::kEngine: return "engine";
    case DataPath::kEngineAcrossHosts: return "engine within hosts, staged across";
  }
  return "?";
}

bool directEligible(const DirectFacts& f) {
  return f.enabled && f.kernelsBuilt && f.devicesUsable && f.singleHost && f.nranks >= 2 &&
         f.nranks <= f.maxSources && f.type == algo::CollType::kAllReduce && f.bytes > 0;
}

DataPath choosePath(bool eligible, bool allReady, bool localNeedsStaging, DataPath direct) {
  if (eligible && allReady) return direct;
  return localNeedsStaging ? DataPath::kStaged : DataPath::kHost;
}

bool gdrEligible(const GdrFacts& f) {
  if (!f.agreed || !f.kernelsBuilt || f.singleHost || f.nranks < 2 || f.nranks > f.maxSources) return false;
  if (f.type != algo::CollType::kAllReduce || f.bytes == 0) return false;
  return f.bytes / static_cast<size_t>(f.nranks) < f.maxSliceBytes;
}

}  // namespace loom::cuda
