#include "comm/algorithm_selection.h"

#include <cstring>

#include "algorithms/registry.h"

namespace loom {

AlgorithmSelector::AlgorithmSelector(const std::string& allowed, std::vector<std::string>* warnings) {
  size_t pos = 0;
  while (pos < allowed.size()) {
    size_t comma = allowed.find(',', pos);
    if (comma == std::string::npos) comma = allowed.size();
    std::string name = allowed.substr(pos, comma - pos);
    pos = comma + 1;
    if (name.empty()) continue;
    bool known = false;
    for (const auto& a : algo::allAlgorithms()) known = known || name == a.name;
    if (known) allowed_.push_back(name);
    else if (warnings) warnings->push_back("LOOM_ALGO: unknown algorithm '" + name + "' ignored");
  }
}

bool AlgorithmSelector::allowed(const char* name) const {
  if (allowed_.empty()) return true;
  for (const auto& a : allowed_)
    if (a == name) return true;
  return false;
}

const algo::AlgorithmInfo& AlgorithmSelector::select(const algo::CollArgs& args,
                                                     const algo::AlgoContext& ctx) const {
  const algo::AlgorithmInfo* fallback = nullptr;
  std::vector<const algo::AlgorithmInfo*> candidates;
  for (const auto& a : algo::allAlgorithms()) {
    if (a.type != args.type || (a.applies && !a.applies(args, ctx))) continue;
    if (!fallback) fallback = &a;
    if (allowed(a.name)) candidates.push_back(&a);
  }
  // LOOM_ALGO may exclude every algorithm that can run this call; the call
  // still runs, with the first that can.
  if (candidates.empty()) return *fallback;
  if (candidates.size() == 1) return *candidates.front();
  const size_t bytes = args.count * dataTypeSize(args.dtype);
  const char* preferred = bytes <= kSmallAllReduceBytes ? "rd" : "ring";
  for (const auto* a : candidates)
    if (std::strcmp(a->name, preferred) == 0) return *a;
  return *candidates.front();
}

}  // namespace loom
