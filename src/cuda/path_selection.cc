#include "cuda/path_selection.h"

namespace loom::cuda {

const char* dataPathName(DataPath path) {
  switch (path) {
    case DataPath::kHost: return "host";
    case DataPath::kStaged: return "staged";
    case DataPath::kDirectP2P: return "direct-p2p";
  }
  return "?";
}

bool directEligible(const DirectFacts& f) {
  return f.enabled && f.kernelsBuilt && f.devicesUsable && f.singleHost && f.nranks >= 2 &&
         f.nranks <= f.maxSources && f.type == algo::CollType::kAllReduce && f.bytes > 0;
}

DataPath choosePath(bool eligible, bool allReady, bool localNeedsStaging) {
  if (eligible && allReady) return DataPath::kDirectP2P;
  return localNeedsStaging ? DataPath::kStaged : DataPath::kHost;
}

}  // namespace loom::cuda
