#include "src/tuner/multi_host_cost.h"

namespace loom::tuner {

double predictAcrossHosts(const algo::AlgorithmInfo& algorithm, int nranks, const HostShape& hosts, double bytes,
                          double chunkBytes, const CostParams& shm, const CostParams& net) {
  return predictMicros(algorithm, {nranks, hosts.nHosts, hosts.ranksPerHost, bytes, chunkBytes}, shm, net);
}

}  // namespace loom::tuner
