// Input generation and result checking for the perf tools.
//
// Element `index` of rank `rank` holds inputValue(spec, rank, index): a small
// integer drawn from a hash of (seed, rank, index) within a range chosen per
// (type, op, nranks) so that the exact result of every reduction is known and
// representable:
//   sum        |v| <= m with nranks*m within the type's exact integers
//              (int8 127, uint8 255, half 2048, bfloat16 256), m <= 99;
//              unsigned types use 0 <= v <= m. Any reduction order is exact.
//              (Past nranks = limit, m is 0 and every input is 0.)
//   avg        the same bound, but v = base(index) + noise(rank, index) with
//              |noise| <= m/4, so that averages over many ranks still vary.
//   prod       v = 1 except on a window of ranks (at most the number of
//              doublings the type holds: int8 6, half 15, ...) where
//              v is in {-1, 1, 2} ({1, 2} unsigned): products are +-2^k.
//   min, max,  -100 <= v <= 100 (0..200 unsigned).
//   no op
// Integers compare exactly; floating results compare exactly too, except avg,
// which allows kAvgUlps units in the last place (the division rounds).
#pragma once

#include <cstddef>
#include <cstdint>

#include <loom/loom.h>

namespace loom::perf {

// op == loomNumOps marks a collective without reduction (broadcast, all-gather).
struct DataSpec {
  loomDataType_t type = loomFloat32;
  loomRedOp_t op = loomSum;
  int nranks = 1;
  uint64_t seed = 0;
};

inline constexpr double kAvgUlps = 2.0;

// The input of element `index` on `rank`.
int64_t inputValue(const DataSpec& spec, int rank, size_t index);

// buffer[i] = inputValue(spec, rank, firstIndex + i) for i < count.
void fillInputs(const DataSpec& spec, int rank, size_t firstIndex, void* buffer, size_t count);

// Writes a value no correct result can equal (the type's maximum for
// integers, NaN for floating types) to `count` elements.
void fillPoison(loomDataType_t type, void* buffer, size_t count);

// Elements i < count of `buffer` that differ from spec.op reduced over all
// ranks' inputValue(r, firstIndex + i) (avg: the sum divided by nranks,
// truncated for integers).
int64_t countWrongReduced(const DataSpec& spec, size_t firstIndex, const void* buffer, size_t count);

// Elements i < count of `buffer` that differ from inputValue(sourceRank, firstIndex + i).
int64_t countWrongCopied(const DataSpec& spec, int sourceRank, size_t firstIndex, const void* buffer,
                         size_t count);

}  // namespace loom::perf
