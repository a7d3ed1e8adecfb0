#include "algorithms/registry.h"

#include "algorithms/recursive_doubling.h"
#include "algorithms/ring.h"

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
  };
  return algorithms;
}

}  // namespace loom::algo
