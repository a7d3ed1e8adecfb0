// Which algorithm runs a call: those LOOM_ALGO allows and that can run it,
// then a size rule. The cost-model tuner of a later issue replaces the rule.
#pragma once

#include <string>
#include <vector>

#include "algorithms/algorithm.h"

namespace loom {

class AlgorithmSelector {
 public:
  // `allowed` is LOOM_ALGO: a comma list of algorithm names, empty for all.
  // Unknown names are reported in `warnings`.
  AlgorithmSelector(const std::string& allowed, std::vector<std::string>* warnings);

  const algo::AlgorithmInfo& select(const algo::CollArgs& args, const algo::AlgoContext& ctx) const;

  // All-reduces up to this size use recursive doubling: measured here, its
  // log2(n) steps beat the ring's 2(n-1) below ~32 KiB on 2-8 ranks.
  static constexpr size_t kSmallAllReduceBytes = 32 * 1024;

 private:
  bool allowed(const char* name) const;
  std::vector<std::string> allowed_;
};

}  // namespace loom
