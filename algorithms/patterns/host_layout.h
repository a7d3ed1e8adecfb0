// Which ranks share a host, seen from one rank: computed once by the
// communicator from its peer table's host keys (equal => same host) and read
// by algorithms through AlgoContext::hosts. Pure rank arithmetic: it knows
// keys, not where they come from (transport::PeerInfo::hostHash).
//
// Hosts are numbered in the order of their first rank, and a host's ranks
// are kept in rank order, so every rank derives the same layout from the same
// table. The ring order lists host 0's ranks, then host 1's, ...: a ring in
// that order crosses between hosts exactly nHosts times (once per host
// boundary) whatever the rank numbering; for the usual launcher layout (ranks
// grouped by host) it is the identity.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace loom::algo {

struct HostLayout {
  // `hostKeys[r]` identifies rank r's host (equal keys: same host).
  static HostLayout fromHostKeys(const std::vector<uint64_t>& hostKeys, int rank);

  int rank = 0;
  int nranks = 1;
  std::vector<int> hostOf;               // rank -> host index
  std::vector<int> localRankOf;          // rank -> its index among its host's ranks
  std::vector<std::vector<int>> ranksOn; // host index -> its ranks, ascending
  std::vector<int> ringOrder;            // ring position -> rank (each host's ranks consecutive)
  std::vector<int> ringPosition;         // rank -> ring position (inverse of ringOrder)
  // This rank's "rail": the rank with its local index on every host, in host
  // order (only when uniform(); empty otherwise). Rails carry the inter-host
  // phase of the hierarchical all-reduce, one flow per local rank.
  std::vector<int> rail;
  bool sameRanksPerHost = true;          // every host has ranksOn[0].size() ranks

  int nHosts() const { return static_cast<int>(ranksOn.size()); }
  int host() const { return hostOf[static_cast<size_t>(rank)]; }
  int localRank() const { return localRankOf[static_cast<size_t>(rank)]; }
  const std::vector<int>& localRanks() const { return ranksOn[static_cast<size_t>(host())]; }
  bool uniform() const { return sameRanksPerHost; }
  // Largest number of ranks on one host.
  int maxRanksPerHost() const;
  bool ringIsIdentity() const;
};

}  // namespace loom::algo
