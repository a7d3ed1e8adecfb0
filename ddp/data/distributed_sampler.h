// Which dataset items each rank trains on, with the semantics of PyTorch's
// torch.utils.data.DistributedSampler:
//  - every epoch, the index list 0..size-1 is shuffled (seeded by seed + epoch,
//    so every rank computes the same permutation without communicating) or
//    left in order;
//  - without dropLast it is padded to totalSize() by repeating its start
//    (wrapping around as often as needed), so every rank gets the same count;
//    with dropLast its tail is dropped instead;
//  - rank r takes positions r, r + numReplicas, r + 2*numReplicas, ...
// The shards of one epoch are disjoint (apart from padding) and together
// cover the dataset.
//
// The permutation is NOT torch's: torch uses its own generator
// (torch.randperm with a seeded torch.Generator); here it is std::mt19937_64
// seeded with seed + epoch driving a Fisher-Yates shuffle with unbiased
// bounded draws, which is identical on every platform and standard library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace loom::ddp {

struct SamplerOptions {
  size_t datasetSize = 0;
  int numReplicas = 1;
  int rank = 0;
  bool shuffle = true;
  uint64_t seed = 0;
  bool dropLast = false;
};

class DistributedSampler {
 public:
  // std::invalid_argument for numReplicas < 1 or rank outside [0, numReplicas).
  explicit DistributedSampler(const SamplerOptions& options);

  // Selects the epoch's shuffle; call at the start of every epoch, as in torch.
  void setEpoch(uint64_t epoch) { epoch_ = epoch; }
  uint64_t epoch() const { return epoch_; }

  // Items per rank per epoch: ceil(size / n), or floor(size / n) with dropLast
  // (torch's ceil((size - n) / n) when size % n != 0, which is the same).
  size_t numSamples() const { return numSamples_; }
  // numSamples() * numReplicas.
  size_t totalSize() const { return numSamples_ * static_cast<size_t>(options_.numReplicas); }
  const SamplerOptions& options() const { return options_; }

  // This rank's indices for the current epoch, in the order to visit them.
  std::vector<size_t> indices() const;
  // The full (shuffled, padded or cut) list before it is split among ranks.
  std::vector<size_t> globalIndices() const;

 private:
  SamplerOptions options_;
  size_t numSamples_ = 0;
  uint64_t epoch_ = 0;
};

}  // namespace loom::ddp
