#include "algorithms/registry.h"

#include "algorithms/deterministic.h"
#include "algorithms/halving_doubling.h"
#include "algorithms/hierarchical.h"
#include "algorithms/one_shot.h"
#include "algorithms/recursive_doubling.h"
#include "algorithms/ring.h"
#include "algorithms/tree.h"

namespace loom::algo {
namespace {

bool fitsOneChunk(const CollArgs& args, const AlgoContext& ctx) {
  return args.count * dataTypeSize(args.dtype) <= ctx.chunkBytes;
}

}  // namespace

const std::vector<AlgorithmInfo>& allAlgorithms() {
  static const std::vector<AlgorithmInfo> algorithms = {
      {"ring", CollType::kAllReduce, ringAllReduce},
      {"rd", CollType::kAllReduce, recursiveDoublingAllReduce, fitsOneChunk},
      {"chain", CollType::kBroadcast, chainBroadcast},
      {"chain", CollType::kReduce, chainReduce},
      {"ring", CollType::kReduceScatter, ringReduceScatter},
      {"ring", CollType::kAllGather, ringAllGather},
      {"hd", CollType::kAllReduce, halvingDoublingAllReduce},
      {"oneshot", CollType::kAllReduce, oneShotAllReduce, oneShotApplies},
      {"deterministic", CollType::kAllReduce, deterministicAllReduce},
      {"deterministic", CollType::kReduce, deterministicReduce},
      {"deterministic", CollType::kReduceScatter, deterministicReduceScatter},
      {"tree", CollType::kAllReduce, treeAllReduce},
      {"tree", CollType::kBroadcast, treeBroadcast},
      {"tree", CollType::kReduce, treeReduce},
      // Two-level all-reduce across hosts (two or more hosts, equal ranks per host).
      {"hier", CollType::kAllReduce, hierarchicalAllReduce, hierarchicalApplies},
  };
  return algorithms;
}

}  // namespace loom::algo
