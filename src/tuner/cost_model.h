// The alpha-beta cost model: how long one collective call takes with a given
// algorithm and protocol.
//
//   time = steps x alpha + wireBytes x beta + reducedBytes x gamma
//
// Each algorithm's record gives its cost shape (algorithms/cost.h: steps and
// bytes as functions of the ranks, hosts, size and chunk size); CostParams
// hold alpha, beta and gamma for one (collective, algorithm, protocol,
// nranks), from the tuning table (built-in defaults or LOOM_TUNING_FILE).
// Both are pure functions, so every rank that agrees on the parameters
// predicts the same times and picks the same algorithm.
#pragma once

#include <cstddef>

#include "algorithms/algorithm.h"

namespace loom::tuner {

// `bytes` of a CostQuery: the collective's size as nccl-tests reports it, the
// whole buffer (count x nranks x element size for reduce-scatter and
// all-gather, count x element size otherwise), from a call's arguments.
double collectiveBytes(const algo::CollArgs& args, int nranks);

struct CostParams {
  double alphaMicros = 0;        // per step
  double betaMicrosPerByte = 0;  // per byte on the wire (1 / bandwidth)
  double gammaMicrosPerByte = 0; // per byte reduced
};

double predictMicros(const algo::CostShape& shape, const CostParams& params);

// `algorithm`'s cost for `query`, each part priced by the links it crosses
// (algorithms/cost.h): within a host at `host`; between hosts at `network`'s
// alpha and beta and `host`'s gamma (reductions run on the host); the
// schedule's own links like those between hosts where query.nHosts >= 2,
// else like those within. One rank moves nothing: 0.
double predictMicros(const algo::AlgorithmInfo& algorithm, const algo::CostQuery& query, const CostParams& host,
                     const CostParams& network);

// `algorithm` on `nranks` ranks of one host, its parts summed into one shape
// (what a fit of one host's alpha and beta regresses on).
algo::CostShape oneHostShape(const algo::AlgorithmInfo& algorithm, int nranks, double bytes, double chunkBytes);

}  // namespace loom::tuner
