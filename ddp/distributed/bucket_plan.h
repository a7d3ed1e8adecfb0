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
// Optionally a large parameter closes its bucket. In a layered model the
// gradient after a layer's weight comes only once backward has computed
// that layer's input gradient, about as long as computing the weight's own
// gradient. A bucket left open for that small next parameter (for an MLP,
// the bias of the layer below) would hold the weight's all-reduce back by
// that whole time, a time in which it could have run; with every large
// weight closing its bucket, it starts as soon as its gradient is final.
// The price is one call more per large parameter, each still large enough
// to run at full bandwidth.
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
// bucket more would only add a call). closeAfterBytes 0 closes buckets only
// at their caps; otherwise a parameter of at least that many bytes also
// closes its bucket (the last bucket, capped by lastBucketCapBytes, stays
// one).
std::vector<BucketRange> planBuckets(const ParameterStore& store, size_t firstBucketCapBytes,
                                     size_t bucketCapBytes, size_t lastBucketCapBytes = 0,
                                     size_t closeAfterBytes = 0);

}  // namespace loom::ddp
