#include "src/topology/binding_plan.h"

#include <algorithm>
#include <cctype>

namespace loom::topology {
namespace {

std::vector<RankBinding> planCores(const Topology& topo, int localRanks) {
  std::vector<const Core*> order;
  for (const Core& c : topo.cores) order.push_back(&c);
  std::stable_sort(order.begin(), order.end(), [](const Core* a, const Core* b) {
    return a->numaNode != b->numaNode ? a->numaNode < b->numaNode : a->cpus.front() < b->cpus.front();
  });
  std::vector<RankBinding> plan(static_cast<size_t>(localRanks));
  const long cores = static_cast<long>(order.size());
  if (cores == 0) return plan;
  for (long i = 0; i < localRanks; ++i) {
    long index = localRanks <= cores ? i * cores / localRanks : i % cores;
    const Core& core = *order[static_cast<size_t>(index)];
    plan[static_cast<size_t>(i)] = RankBinding{core.cpus, core.numaNode};
  }
  return plan;
}

std::vector<RankBinding> planNumaNodes(const Topology& topo, int localRanks) {
  std::vector<const NumaNode*> nodes;
  for (const NumaNode& n : topo.numaNodes)
    if (!n.cpus.empty()) nodes.push_back(&n);  // memory-only nodes cannot run a rank
  std::vector<RankBinding> plan(static_cast<size_t>(localRanks));
  const long count = static_cast<long>(nodes.size());
  if (count == 0) return plan;
  for (long i = 0; i < localRanks; ++i) {
    const NumaNode& node = *nodes[static_cast<size_t>(i * count / localRanks)];
    plan[static_cast<size_t>(i)] = RankBinding{node.cpus, node.osIndex};
  }
  return plan;
}

}  // namespace

std::optional<BindMode> parseBindMode(std::string_view text) {
  std::string lower;
  for (char c : text) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "none") return BindMode::kNone;
  if (lower == "core") return BindMode::kCore;
  if (lower == "numa") return BindMode::kNuma;
  return std::nullopt;
}

const char* bindModeName(BindMode mode) {
  switch (mode) {
    case BindMode::kCore: return "core";
    case BindMode::kNuma: return "numa";
    case BindMode::kNone: break;
  }
  return "none";
}

std::vector<RankBinding> planBinding(const Topology& topo, BindMode mode, int localRanks) {
  if (localRanks <= 0) return {};
  switch (mode) {
    case BindMode::kCore: return planCores(topo, localRanks);
    case BindMode::kNuma: return planNumaNodes(topo, localRanks);
    case BindMode::kNone: break;
  }
  return std::vector<RankBinding>(static_cast<size_t>(localRanks));
}

}  // namespace loom::topology
