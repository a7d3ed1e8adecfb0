#include "ddp/data/distributed_sampler.h"

#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>

namespace loom::ddp {
namespace {

// A uniform draw from [0, bound) by rejection: the modulo alone would favour
// small values when 2^64 is not a multiple of bound.
uint64_t uniformBelow(std::mt19937_64& rng, uint64_t bound) {
  uint64_t threshold = (0 - bound) % bound;  // 2^64 mod bound
  while (true) {
    uint64_t r = rng();
    if (r >= threshold) return r % bound;
  }
}

}  // namespace

DistributedSampler::DistributedSampler(const SamplerOptions& options) : options_(options) {
  if (options.numReplicas < 1) {
    throw std::invalid_argument("DistributedSampler: numReplicas must be >= 1, got " +
                                std::to_string(options.numReplicas));
  }
  if (options.rank < 0 || options.rank >= options.numReplicas) {
    throw std::invalid_argument("DistributedSampler: rank " + std::to_string(options.rank) +
                                " is outside [0, " + std::to_string(options.numReplicas) + ")");
  }
  size_t n = static_cast<size_t>(options.numReplicas);
  numSamples_ = options.dropLast ? options.datasetSize / n : (options.datasetSize + n - 1) / n;
}

std::vector<size_t> DistributedSampler::globalIndices() const {
  size_t size = options_.datasetSize;
  std::vector<size_t> order(size);
  std::iota(order.begin(), order.end(), size_t{0});
  if (options_.shuffle && size > 1) {
    std::mt19937_64 rng(options_.seed + epoch_);
    for (size_t i = size - 1; i > 0; --i) std::swap(order[i], order[uniformBelow(rng, i + 1)]);
  }
  size_t total = totalSize();
  if (total <= size) {
    order.resize(total);  // dropLast (or an exact fit)
  } else {
    order.reserve(total);
    for (size_t i = size; i < total; ++i) order.push_back(order[i % size]);
  }
  return order;
}

std::vector<size_t> DistributedSampler::indices() const {
  std::vector<size_t> all = globalIndices();
  std::vector<size_t> mine;
  mine.reserve(numSamples_);
  for (size_t i = static_cast<size_t>(options_.rank); i < all.size();
       i += static_cast<size_t>(options_.numReplicas)) {
    mine.push_back(all[i]);
  }
  return mine;
}

}  // namespace loom::ddp
