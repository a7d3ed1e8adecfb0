#include "src/tuner/cost_model.h"

namespace loom::tuner {
namespace {

using algo::CollType;

algo::Cost costOf(const algo::AlgorithmInfo& algorithm, const algo::CostQuery& query) {
  if (query.nranks <= 1) return {};
  return algorithm.cost(query);
}

}  // namespace

double collectiveBytes(const algo::CollArgs& args, int nranks) {
  const double bytes = static_cast<double>(args.count) * static_cast<double>(dataTypeSize(args.dtype));
  const bool perRank = args.type == CollType::kReduceScatter || args.type == CollType::kAllGather;
  return perRank ? bytes * nranks : bytes;
}

double predictMicros(const algo::CostShape& shape, const CostParams& p) {
  return shape.steps * p.alphaMicros + shape.wireBytes * p.betaMicrosPerByte +
         shape.reducedBytes * p.gammaMicrosPerByte;
}

double predictMicros(const algo::AlgorithmInfo& algorithm, const algo::CostQuery& query, const CostParams& host,
                     const CostParams& network) {
  const CostParams between{network.alphaMicros, network.betaMicrosPerByte, host.gammaMicrosPerByte};
  const algo::Cost cost = costOf(algorithm, query);
  double micros = 0;
  for (int i = 0; i < cost.count; ++i) {
    const auto& part = cost.parts[i];
    bool crossesHosts = false;
    switch (part.links) {
      case algo::CostLinks::kSchedule: crossesHosts = query.nHosts >= 2; break;
      case algo::CostLinks::kWithinHost: crossesHosts = false; break;
      case algo::CostLinks::kBetweenHosts: crossesHosts = true; break;
    }
    micros += predictMicros(part.shape, crossesHosts ? between : host);
  }
  return micros;
}

algo::CostShape oneHostShape(const algo::AlgorithmInfo& algorithm, int nranks, double bytes, double chunkBytes) {
  const algo::Cost cost = costOf(algorithm, {nranks, 1, nranks, bytes, chunkBytes});
  algo::CostShape sum;
  for (int i = 0; i < cost.count; ++i) {
    sum.steps += cost.parts[i].shape.steps;
    sum.wireBytes += cost.parts[i].shape.wireBytes;
    sum.reducedBytes += cost.parts[i].shape.reducedBytes;
  }
  return sum;
}

}  // namespace loom::tuner
