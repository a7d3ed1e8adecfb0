#include "src/tuner/multi_host_cost.h"

#include <cstring>

namespace loom::tuner {

double predictAcrossHosts(algo::CollType type, const char* algorithm, int nranks, const HostShape& hosts,
                          double bytes, double chunkBytes, const CostParams& shm, const CostParams& net) {
  const CostParams network{net.alphaMicros, net.betaMicrosPerByte, shm.gammaMicrosPerByte};
  if (type == algo::CollType::kAllReduce && std::strcmp(algorithm, "hier") == 0) {
    const int local = hosts.ranksPerHost;
    const double intra =
        predictMicros(shapeOf(algo::CollType::kReduceScatter, "ring", local, bytes, chunkBytes), shm) +
        predictMicros(shapeOf(algo::CollType::kAllGather, "ring", local, bytes, chunkBytes), shm);
    const double inter =
        predictMicros(shapeOf(algo::CollType::kAllReduce, "ring", hosts.nHosts, bytes / local, chunkBytes), network);
    return intra + inter;
  }
  return predictMicros(shapeOf(type, algorithm, nranks, bytes, chunkBytes), network);
}

}  // namespace loom::tuner
