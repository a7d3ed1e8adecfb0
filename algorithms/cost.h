// An algorithm's cost shape: what one call costs one rank on its critical
// path, in the terms of the tuner's alpha-beta model (src/tuner/cost_model.h
// prices it):
//
//   time = steps x alpha + wireBytes x beta + reducedBytes x gamma
//
// steps:        sequential chunk hops (each costs a protocol's per-message
//               latency alpha);
// wireBytes:    bytes one rank sends or receives (beta: 1 / bandwidth);
// reducedBytes: bytes one rank runs through a reduction kernel (gamma).
//
// Every algorithm record (algorithm.h) names a CostFn giving its shape as a
// function of the ranks, their hosts, the size and the chunk size. The
// tuner reads nothing else about an algorithm to price it.
#pragma once

#include <cstddef>
#include <cstdlib>

namespace loom::algo {

struct CostShape {
  double steps = 0;
  double wireBytes = 0;
  double reducedBytes = 0;
};

// Which links a part of a schedule crosses, and so whose alpha and beta
// price it when the ranks span several hosts (gamma is always the host's).
enum class CostLinks {
  kSchedule,     // the algorithm's own links over all ranks: the host's
                 // parameters on one host, the network's across hosts (a
                 // flat pipelined schedule runs at the pace of its
                 // slowest link, and it has links that cross hosts)
  kWithinHost,   // only links within a host: always the host's
  kBetweenHosts  // only links between hosts: the network's
};

struct CostQuery {
  int nranks = 1;
  int nHosts = 1;        // hosts the ranks span
  int ranksPerHost = 1;  // the most ranks on one host
  double bytes = 0;      // the collective's size as nccl-tests reports it (collectiveBytes())
  double chunkBytes = 0; // the largest piece one step moves with the protocol in use
  // Every rank is a thread of one process (AlgoContext::peerCopiesInProcess):
  // copies between ranks' own buffers are memcpy rather than system calls.
  bool copiesInProcess = false;
};

// A call's cost: parts priced one by one, in order, and summed.
struct Cost {
  struct Part {
    CostLinks links = CostLinks::kSchedule;
    CostShape shape;
  };
  static constexpr int kMaxParts = 4;
  Part parts[kMaxParts];
  int count = 0;

  // A flat schedule: one part over the algorithm's own links.
  static Cost of(const CostShape& shape) { return Cost{}.add(CostLinks::kSchedule, shape); }
  Cost& add(CostLinks links, const CostShape& shape) {
    if (count == kMaxParts) std::abort();  // a cost function with more phases than a Cost holds: raise kMaxParts
    parts[count++] = {links, shape};
    return *this;
  }
};

using CostFn = Cost (*)(const CostQuery& query);

// The cost function of an algorithm record. It has no default and refuses a
// literal null, so a record that leaves out its cost shape does not compile:
// the tuner never has to guess the cost of an algorithm.
class CostOf {
 public:
  constexpr CostOf(CostFn fn) : fn_(fn) {}  // NOLINT: implicit, so records name the function alone
  CostOf(decltype(nullptr)) = delete;
  Cost operator()(const CostQuery& query) const { return fn_(query); }
  CostFn fn() const { return fn_; }

 private:
  CostFn fn_;
};

}  // namespace loom::algo
