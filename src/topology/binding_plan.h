// Which CPUs each local rank of a job is bound to (loomrun --bind).
//
//  none  no binding: every rank keeps loomrun's affinity.
//  core  one core (all its hardware threads) per rank. Cores are ordered by
//        NUMA node, then CPU number; with k ranks on C >= k cores, rank i gets
//        core floor(i * C / k), so ranks spread evenly over the NUMA nodes and
//        cores while neighbouring ranks stay on the same node where they can;
//        with more ranks than cores, rank i gets core i mod C (ranks share
//        cores round-robin).
//  numa  all CPUs of one NUMA node per rank: rank i gets node floor(i * N / k)
//        of the N nodes that have CPUs (contiguous blocks of ranks per node,
//        as even as k allows; with k <= N one node each, spread out).
//
// Pure arithmetic on a Topology, so tests can plan for any machine.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/topology/topology.h"

namespace loom::topology {

enum class BindMode { kNone, kCore, kNuma };

// "none", "core", "numa" (case-insensitive); nullopt for anything else.
std::optional<BindMode> parseBindMode(std::string_view text);
const char* bindModeName(BindMode mode);

struct RankBinding {
  std::vector<int> cpus;  // sorted; empty: not bound
  int numaNode = -1;      // the NUMA node those CPUs belong to; -1 when unbound
};

// One entry per local rank, 0..localRanks-1. A topology without cores (or
// NUMA nodes with CPUs) yields unbound entries.
std::vector<RankBinding> planBinding(const Topology& topo, BindMode mode, int localRanks);

}  // namespace loom::topology
