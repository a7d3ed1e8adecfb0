// How the reduce-scatter style algorithms on shared memory (windowed and
// direct all-reduce) split a vector among the ranks.
#pragma once

#include <algorithm>
#include <cstddef>

namespace loom::algo {

// Where rank q's slice of `len` elements starts (q == n: the end). Slices
// split the vector evenly, on cache-line boundaries, so that no two ranks'
// slices share a line of anybody's output; some may be empty.
inline size_t sliceBegin(size_t len, int q, int n, size_t elemSize) {
  if (q >= n) return len;
  const size_t lineElems = std::max<size_t>(1, 64 / elemSize);
  return std::min(len, len * static_cast<size_t>(q) / static_cast<size_t>(n) / lineElems * lineElems);
}

}  // namespace loom::algo
