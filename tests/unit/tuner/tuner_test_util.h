// The registry (algorithms/registry.cc: the same records, costs and
// applicability rules) with algorithms that do nothing, so the tuner's
// choices can be tested without moving data, plus contexts per protocol.
#pragma once

#include <vector>

#include "algorithms/algorithm.h"
#include "src/tuner/tuner.h"

namespace loom::tuner::testing {

// One-shot applies to a single host up to this size (as algorithms/one_shot).
constexpr size_t kOneShotMax = 64 * 1024;
constexpr size_t kSimpleChunk = 256 * 1024;
constexpr size_t kLLChunk = 8 * 1024;

const std::vector<algo::AlgorithmInfo>& fakeRegistry();

// Contexts for Simple and LL (both available).
struct Contexts {
  explicit Contexts(int nranks, bool singleHost = true);
  ProtoContexts available() const { return {&simple, &ll}; }
  ProtoContexts simpleOnly() const { return {&simple, nullptr}; }
  algo::AlgoContext simple, ll;
};

algo::CollArgs callOf(algo::CollType type, size_t bytes, DataType dtype = DataType::kFloat32);

// "algo/proto" of a choice.
std::string nameOf(const Choice& c);

}  // namespace loom::tuner::testing
