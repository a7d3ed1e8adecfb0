// The pure rank arithmetic of ring collectives, shared by the host ring
// algorithms (algorithms/ring_*.cc, algorithms/patterns/ring_order.h) and
// the CUDA device engine (kernels/cuda/engine/), so both walk the ring the
// same way. Everything is a LOOM_HOST_DEVICE function of plain numbers.
//
// Positions 0..n-1 around a ring; position p sends to p+1 and receives from
// p-1. The data is cut into n blocks (one per position). Reduce-scatter runs
// n steps (0..n-1): at step s position p handles block ringReduceScatterBlock
// (p, s) = p-s-1: step 0 sends it, steps 1..n-2 receive it, add their own
// and send it on, step n-1 receives its own block p and finishes it.
// All-gather runs n steps: at step s position p handles block p-s: step 0
// sends its own block, steps 1..n-2 receive and forward, step n-1 receives
// block p+1. All-reduce is reduce-scatter then all-gather.
#pragma once

#include <cstddef>

#include "common/host_device.h"

namespace loom::ring {

// p modulo n in [0, n), negatives too (n >= 1).
LOOM_HOST_DEVICE constexpr int wrap(int p, int n) { return ((p % n) + n) % n; }
LOOM_HOST_DEVICE constexpr int next(int p, int n) { return wrap(p + 1, n); }
LOOM_HOST_DEVICE constexpr int prev(int p, int n) { return wrap(p - 1, n); }

// The block position p handles at reduce-scatter step s (0..n-1).
LOOM_HOST_DEVICE constexpr int reduceScatterBlock(int p, int s, int n) { return wrap(p - s - 1, n); }
// The block position p handles at all-gather step s (0..n-1).
LOOM_HOST_DEVICE constexpr int allGatherBlock(int p, int s, int n) { return wrap(p - s, n); }

// Position of `rank` on a chain that starts at `root` (root is 0) and of the
// chain that ends at it (root is n-1): broadcast and reduce pipelines.
LOOM_HOST_DEVICE constexpr int chainFromRoot(int rank, int root, int n) { return wrap(rank - root, n); }
LOOM_HOST_DEVICE constexpr int chainToRoot(int rank, int root, int n) { return wrap(rank - root - 1, n); }

// A run of elements: [offset, offset + count).
struct Span {
  size_t offset;
  size_t count;
};

LOOM_HOST_DEVICE constexpr size_t divUp(size_t a, size_t b) { return (a + b - 1) / b; }

// The size of each of `parts` slices of `total` elements: total/parts
// rounded up, then up to a multiple of `granule`, at most `maxElems`
// (0: no cap). Slices of this size, the last short or empty, cover total
// when it is no more than parts * maxElems.
LOOM_HOST_DEVICE constexpr size_t sliceElems(size_t total, int parts, size_t granule, size_t maxElems) {
  size_t size = divUp(divUp(total, static_cast<size_t>(parts)), granule) * granule;
  if (maxElems != 0 && size > maxElems) size = maxElems;
  return size;
}

// Slice `index` (taken modulo `parts`) of size `size` starting at `base`,
// clipped to `total`: empty past the end.
LOOM_HOST_DEVICE constexpr Span slice(size_t base, size_t size, size_t total, int index, int parts) {
  const size_t offset = base + static_cast<size_t>(wrap(index, parts)) * size;
  if (offset >= total) return {total, 0};
  return {offset, total - offset < size ? total - offset : size};
}

}  // namespace loom::ring
