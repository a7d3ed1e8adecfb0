#include "algorithms/registry.h"

#include "algorithms/cost_formulas.h"
#include "algorithms/deterministic.h"
#include "algorithms/direct_allreduce.h"
#include "algorithms/halving_doubling.h"
#include "algorithms/hierarchical.h"
#include "algorithms/one_shot.h"
#include "algorithms/recursive_doubling.h"
#include "algorithms/ring.h"
#include "algorithms/tree.h"
#include "algorithms/window_allreduce.h"

namespace loom::algo {
namespace {

bool fitsOneChunk(const CollArgs& args, const AlgoContext& ctx) {
  return args.count * dataTypeSize(args.dtype) <= ctx.chunkBytes;
}

}  // namespace

const std::vector<AlgorithmInfo>& allAlgorithms() {
  // Registry order breaks the tuner's ties (earlier wins).
  static const std::vector<AlgorithmInfo> algorithms = {
      {.name = "ring", .type = CollType::kAllReduce, .run = ringAllReduce, .cost = ringAllReduceCost},
      {.name = "rd", .type = CollType::kAllReduce, .run = recursiveDoublingAllReduce, .cost = recursiveDoublingCost,
       .applies = fitsOneChunk, .split = &kRecursiveDoublingSplit},
      {.name = "chain", .type = CollType::kBroadcast, .run = chainBroadcast, .cost = chainBroadcastCost},
      {.name = "chain", .type = CollType::kReduce, .run = chainReduce, .cost = chainReduceCost},
      {.name = "ring", .type = CollType::kReduceScatter, .run = ringReduceScatter, .cost = ringReduceScatterCost},
      {.name = "ring", .type = CollType::kAllGather, .run = ringAllGather, .cost = ringAllGatherCost},
      {.name = "hd", .type = CollType::kAllReduce, .run = halvingDoublingAllReduce, .cost = halvingDoublingCost},
      {.name = "oneshot", .type = CollType::kAllReduce, .run = oneShotAllReduce, .cost = oneShotCost,
       .applies = oneShotApplies, .split = &kOneShotSplit},
      {.name = "deterministic", .type = CollType::kAllReduce, .run = deterministicAllReduce,
       .cost = deterministicAllReduceCost, .deterministic = true},
      {.name = "deterministic", .type = CollType::kReduce, .run = deterministicReduce,
       .cost = deterministicAllReduceCost, .deterministic = true},
      {.name = "deterministic", .type = CollType::kReduceScatter, .run = deterministicReduceScatter,
       .cost = deterministicReduceScatterCost, .deterministic = true},
      {.name = "tree", .type = CollType::kAllReduce, .run = treeAllReduce, .cost = doubleBinaryTreeCost},
      {.name = "window", .type = CollType::kAllReduce, .run = windowAllReduce, .cost = windowAllReduceCost,
       .applies = windowAllReduceApplies, .protocols = protocolBit(transport::Protocol::kSimple)},
      {.name = "direct", .type = CollType::kAllReduce, .run = directAllReduce, .cost = directAllReduceCost,
       .applies = directAllReduceApplies, .protocols = protocolBit(transport::Protocol::kSimple)},
      {.name = "tree", .type = CollType::kBroadcast, .run = treeBroadcast, .cost = treeBroadcastCost},
      {.name = "tree", .type = CollType::kReduce, .run = treeReduce, .cost = treeReduceCost},
      // Two-level all-reduce across hosts (two or more hosts, equal ranks per host).
      {.name = "hier", .type = CollType::kAllReduce, .run = hierarchicalAllReduce, .cost = hierarchicalAllReduceCost,
       .applies = hierarchicalApplies},
  };
  return algorithms;
}

}  // namespace loom::algo
