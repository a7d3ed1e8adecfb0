// Deterministic per-rank gradients for DDP tests, so every rank (and the
// reference computed independently in the test) can regenerate any rank's
// gradient without communication.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "ddp/parameter_store.h"

namespace loom::ddp::testing {

// A value in [-1, 1] (awayFromZero: magnitude in [0.25, 1]) from a hash of
// (rank, step, element).
float gradPattern(int rank, int step, size_t element, bool awayFromZero = false);

// A finalized store holding parameters "p0", "p1", ... of the given sizes,
// with values set to a pattern that differs per rank (so the broadcast in
// the DDP constructor is visible).
std::unique_ptr<ParameterStore> makeStore(const std::vector<size_t>& sizes, int rank);

// A stand-in for a model's backward: adds gradPattern(rank, step, .) into
// every gradient and marks the parameters ready in reverse registration
// order. stopBefore: leaves parameters [0, stopBefore) unmarked (and
// unchanged) so a test can finish the pass itself.
void fakeBackward(ParameterStore& store, int rank, int step, size_t stopBefore = 0, bool awayFromZero = false);
// The rest of a pass fakeBackward(…, stopBefore) left: parameters stopBefore-1 .. 0.
void finishFakeBackward(ParameterStore& store, int rank, int step, size_t stopBefore, bool awayFromZero = false);

// Mean over nranks of gradPattern summed over `steps` steps, for element i,
// in double: the reference for averaged gradients.
double meanPattern(int nranks, const std::vector<int>& steps, size_t element, bool awayFromZero = false);

}  // namespace loom::ddp::testing
