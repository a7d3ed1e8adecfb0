// The alpha-beta cost model: how long one collective call takes with a given
// algorithm and protocol.
//
//   time = steps x alpha + wireBytes x beta + reducedBytes x gamma
//
// steps:        sequential chunk hops on the critical path (each costs a
//               protocol's per-message latency alpha);
// wireBytes:    bytes one rank sends or receives on the critical path (beta
//               is the inverse of the protocol's bandwidth);
// reducedBytes: bytes one rank runs through a reduction kernel (gamma).
//
// shapeOf() holds every algorithm's step and byte formulas; CostParams hold
// alpha, beta and gamma for one (collective, algorithm, protocol, nranks),
// from the tuning table (built-in defaults or LOOM_TUNING_FILE). Both are
// pure functions, so every rank that agrees on the parameters predicts the
// same times and picks the same algorithm.
#pragma once

#include <cstddef>

#include "algorithms/algorithm.h"

namespace loom::tuner {

struct Shape {
  double steps = 0;
  double wireBytes = 0;
  double reducedBytes = 0;
  bool known = true;  // false: no formula for this algorithm (generic ring-like guess)
};

// `bytes` is the collective's size as nccl-tests reports it: the whole
// buffer (count x nranks x element size for reduce-scatter and all-gather,
// count x element size otherwise). `chunkBytes` is the largest piece one
// step moves with the protocol in use.
Shape shapeOf(algo::CollType type, const char* algorithm, int nranks, double bytes, double chunkBytes);

// The size shapeOf() expects, from a call's arguments.
double collectiveBytes(const algo::CollArgs& args, int nranks);

struct CostParams {
  double alphaMicros = 0;        // per step
  double betaMicrosPerByte = 0;  // per byte on the wire (1 / bandwidth)
  double gammaMicrosPerByte = 0; // per byte reduced
};

double predictMicros(const Shape& shape, const CostParams& params);

// ceil(log2(n)) for n >= 1.
int ceilLog2(int n);

}  // namespace loom::tuner
