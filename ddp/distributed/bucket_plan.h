// How DDP groups gradients into buckets: walk the parameters in reverse
// registration order (the order backward produces their gradients) and fill
// buckets up to a byte cap, never splitting a parameter. The first bucket
// gets a smaller cap (PyTorch's 1 MiB "first bucket") so that communication
// starts early in backward.
//
// Optionally the last bucket gets a small cap too. Its all-reduce can only
// start once backward has produced its final gradient, so it runs entirely
// after backward: the step waits for all of it. With one 25 MiB cap, a
// model whose first layers are large merges the gradient produced last
// with ones produced much earlier (for an MLP, the input layer's weight
// with the layer above it), and all of them wait for the last one. A last
// cap closes the tail early: the last bucket holds only the
// first-registered parameters that fit it (at least parameter 0), and the
// others are planned as before.
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
// gradient; the first two must be positive (std::invalid_argument
// otherwise). lastBucketCapBytes 0 plans no separate last bucket (PyTorch's
// plan); otherwise the last bucket is capped by it, unless every parameter
// would fit it (a model that small gets the plan without a last cap: one
// bucket more would only add a call).
std::vector<BucketRange> planBuckets(const ParameterStore& store, size_t firstBucketCapBytes,
                                     size_t bucketCapBytes, size_t lastBucketCapBytes = 0);

}  // namespace loom::ddp
