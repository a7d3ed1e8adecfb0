// The matrix of collective calls one ctest entry runs, per collective:
//   every dtype x every op (where the collective takes one) x {out-of-place,
//   in place} x counts {0, 1, 7, 1023, chunk-1, chunk+1}
// with chunk = chunkBytes / sizeof(type) (chunkBytes is LOOM_CHUNK_SIZE,
// 256 KiB by default), root = case index % nranks, and every case whose
// index % 4 is 2 or 3 on buffers that are not 64-byte aligned (sendbuff one
// element, recvbuff three elements past a boundary). In-place Broadcast
// cases with an odd index go through loomBcast.
//
// The large count 4M+3 = 4194307 (it dominates the run time and, for
// ReduceScatter/AllGather, whose buffers hold nranks*count elements, the
// memory) runs for one rotating (dtype, op, in-place) combination per
// collective and ctest entry. With the entry index e = 5*mode + w (mode 0
// threads, 1 processes; w the position of nranks in {1, 2, 3, 4, 8}) and
// c the collective's position in {AllReduce, Broadcast, Reduce,
// ReduceScatter, AllGather}:
//   dtype   = (e + kLargeDtypeOffset[c]) % 10        (loomDataType_t order)
//   op      = (e + c) % 5                            (collectives with an op)
//   inPlace = ((e + c) / 5) % 2 with an op, (e + c) % 2 without
// so over the 10 entries each collective runs 4M+3 once in every dtype and,
// where it takes an op, in every (op, in-place) pair. The offsets {0, 4, 8,
// 7, 2} put only 1- and 2-byte types on world size 8 for ReduceScatter and
// AllGather (8 ranks x 8 x 4M elements would be 2 GiB per buffer set); at
// any other world size above 4 (forced-algorithm entries) a ReduceScatter or
// AllGather whose rotation lands on a wider type takes the narrow type
// {int8, uint8, fp16, bf16}[e % 4] instead. --large-rotation=K adds K to e,
// so that entries sharing a world size rotate through different cases.
// With --large-count=all (the ctest label integration_full, at 1-4 ranks)
// every (dtype, op, in-place) combination also runs at 4M+3.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tests/integration/collective_case.h"

namespace loom::integration {

enum class Mode { kThreads = 0, kProcesses = 1 };

constexpr size_t kLargeCount = 4 * 1024 * 1024 + 3;
// The reductions the matrix covers: those defined on every datatype. The
// bitwise ones (integer types only) have their own test (bitwise_ops_test.cc).
constexpr int kMatrixOps = loomBand;

struct MatrixOptions {
  size_t chunkBytes = 256 * 1024;  // the library's LOOM_CHUNK_SIZE
  bool largeCount = true;          // include the rotating 4M+3 case
  bool largeCountEverywhere = false;  // 4M+3 for every (dtype, op, in-place) instead of a rotating one
  int largeRotation = 0;             // added to the entry index e below, so entries of one world size differ
  size_t onlyCount = SIZE_MAX;     // run only the cases of this count (for debugging); roots and seeds unchanged
};

// Every case of `coll` for this mode and world size, in the order all ranks
// must call them.
std::vector<CaseSpec> buildCases(Coll coll, int nranks, Mode mode, const MatrixOptions& options);

}  // namespace loom::integration
