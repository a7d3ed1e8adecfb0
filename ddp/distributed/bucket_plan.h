// How DDP groups gradients into buckets: walk the parameters in reverse
// registration order (the order backward produces their gradients) and fill
// buckets up to a byte cap, never splitting a parameter. The first bucket
// gets a smaller cap (PyTorch's 1 MiB "first bucket") so that communication
// starts early in backward.
//
// "Cap" here is a true upper bound: a bucket is closed before a parameter
// that would push it past its cap, unless the bucket is empty (a single
// parameter larger than the cap gets a bucket of its own). PyTorch instead
// closes a bucket after it reaches the cap, so its buckets may overshoot by
// one parameter.
//
// Because the store packs parameters back to back in registration order,
// each bucket is one contiguous range of the flat gradient buffer.
#pragma once

#include <cstddef>
#include <vector>

#include "ddp/parameter_store.h"

namespace loom::ddp {

struct BucketRange {
  size_t firstParam = 0;  // lowest parameter index in the bucket
  size_t lastParam = 0;   // highest (inclusive); bucket 0 holds the last-registered parameter
  size_t offset = 0;      // first element in the flat buffers
  size_t size = 0;        // elements
};

// Buckets in launch order (bucket 0 first). Caps are in bytes of fp32
// gradient; both must be positive (std::invalid_argument otherwise).
std::vector<BucketRange> planBuckets(const ParameterStore& store, size_t firstBucketCapBytes,
                                     size_t bucketCapBytes);

}  // namespace loom::ddp
