#include "algorithms/patterns/host_layout.h"

#include <algorithm>

namespace loom::algo {

HostLayout HostLayout::fromHostKeys(const std::vector<uint64_t>& hostKeys, int rank) {
  HostLayout layout;
  layout.rank = rank;
  layout.nranks = static_cast<int>(hostKeys.size());
  std::vector<uint64_t> keyOfHost;  // host index -> key (few hosts: a linear search is fine)
  for (int r = 0; r < layout.nranks; ++r) {
    const uint64_t key = hostKeys[static_cast<size_t>(r)];
    auto it = std::find(keyOfHost.begin(), keyOfHost.end(), key);
    const int h = static_cast<int>(it - keyOfHost.begin());
    if (it == keyOfHost.end()) {
      keyOfHost.push_back(key);
      layout.ranksOn.emplace_back();
    }
    layout.hostOf.push_back(h);
    layout.localRankOf.push_back(static_cast<int>(layout.ranksOn[static_cast<size_t>(h)].size()));
    layout.ranksOn[static_cast<size_t>(h)].push_back(r);
  }
  layout.ringPosition.assign(hostKeys.size(), 0);
  for (const auto& ranks : layout.ranksOn)
    for (int r : ranks) {
      layout.ringPosition[static_cast<size_t>(r)] = static_cast<int>(layout.ringOrder.size());
      layout.ringOrder.push_back(r);
    }
  for (const auto& ranks : layout.ranksOn)
    layout.sameRanksPerHost = layout.sameRanksPerHost && ranks.size() == layout.ranksOn[0].size();
  if (layout.sameRanksPerHost && layout.nranks > 0)
    for (const auto& ranks : layout.ranksOn) layout.rail.push_back(ranks[static_cast<size_t>(layout.localRank())]);
  return layout;
}

int HostLayout::maxRanksPerHost() const {
  size_t most = 0;
  for (const auto& ranks : ranksOn) most = std::max(most, ranks.size());
  return static_cast<int>(most);
}

bool HostLayout::ringIsIdentity() const {
  for (int p = 0; p < nranks; ++p)
    if (ringOrder[static_cast<size_t>(p)] != p) return false;
  return true;
}

}  // namespace loom::algo
