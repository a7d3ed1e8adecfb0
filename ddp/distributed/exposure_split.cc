#include "ddp/distributed/exposure_split.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace loom::ddp {

ExposureSplit splitExposure(std::span<const double> exposed, size_t ranks, size_t steps) {
  if (ranks == 0) throw std::invalid_argument("splitExposure: ranks is 0");
  if (exposed.size() != ranks * steps) {
    throw std::invalid_argument("splitExposure: exposed has " + std::to_string(exposed.size()) + " values, not ranks (" +
                                std::to_string(ranks) + ") x steps (" + std::to_string(steps) + ")");
  }
  ExposureSplit split;
  for (size_t s = 0; s < steps; ++s) {
    double least = exposed[s];
    for (size_t r = 1; r < ranks; ++r) least = std::min(least, exposed[r * steps + s]);
    split.lastRankExposedSeconds += least;
    for (size_t r = 0; r < ranks; ++r) {
      split.exposedSeconds += exposed[r * steps + s];
      split.waitingSeconds += exposed[r * steps + s] - least;
    }
  }
  return split;
}

}  // namespace loom::ddp
