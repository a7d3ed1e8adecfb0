// Which backend serves each pair of ranks.
//
// Preference, fixed by name: shm (same host), ib (verbs), ucx, tcp. A backend
// serves a pair when it is the first in that order that BOTH ranks are
// willing to use for it. A rank is willing to use backend B for a peer unless
//   - B is not built into this Loom, or B's canConnect() says it cannot
//     physically reach the peer (another host for shm, no device for ib);
//   - LOOM_<B>_DISABLE=1 (LOOM_SHM_DISABLE, LOOM_IB_DISABLE, ...);
//   - LOOM_TRANSPORT names another backend.
//
// Symmetry: both ranks of a pair must pick the same backend, or each would
// wait for a connection the other never makes. Each rank judges every peer
// with localVerdicts() (its own environment, build and devices), and the
// communicator all-gathers these verdicts, so every rank holds the same
// verdict matrix. choosePair() depends only on the two verdicts of a pair,
// combined symmetrically (a backend qualifies only if neither side rejects
// it), in a preference order that is the same on every rank. So rank a, rank b
// and every third rank compute the same answer for {a, b}, even when the
// ranks' environments or devices differ (then the pair falls back to a
// backend both accept, or fails on every rank with the same message).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/status.h"
#include "transports/transport.h"

namespace loom::transport_policy {

// Canonical backend names in order of preference; slot i of a verdict byte.
inline constexpr const char* kPreference[] = {"shm", "ib", "ucx", "tcp"};
inline constexpr int kNumSlots = 4;

// Why one side rejects a backend for one peer (2 bits per slot in a Verdicts byte).
enum class Verdict : uint8_t {
  kWilling = 0,
  kUnreachable = 1,  // not built in, or canConnect() says no (other host, no device)
  kDisabled = 2,     // LOOM_<NAME>_DISABLE=1
  kNotChosen = 3,    // LOOM_TRANSPORT names another backend
};

// One rank's verdicts on one peer, one per slot (kPreference order).
using Verdicts = uint8_t;
inline Verdict verdictOf(Verdicts v, int slot) { return static_cast<Verdict>((v >> (2 * slot)) & 3u); }

// Slot of a canonical name, or -1.
int slotOf(const char* name);

// How `self` judges each backend for `peer`. `backends` are the ones built in
// (the registry); canonical slots without one are kUnreachable.
Verdicts localVerdicts(const transport::PeerInfo& self, const transport::PeerInfo& peer, const Config& config,
                       const std::vector<const transport::TransportFactory*>& backends);

// The slot serving the pair whose sides judged `aOnB` (rank a about b) and
// `bOnA`: the first slot both accept, or -1. Symmetric in its arguments.
int choosePair(Verdicts aOnB, Verdicts bOnA);

// Why no backend serves the pair: code kInvalidUsage when a setting
// (LOOM_TRANSPORT, LOOM_*_DISABLE) excluded a backend, else kSystemError; the
// message names both ranks, their hosts and each backend's reason. A side's
// Config, where known (the caller's own side), lets the message quote its
// LOOM_TRANSPORT value; pass null for a remote side. `backends` as above.
Status explainRejection(const transport::PeerInfo& a, Verdicts aOnB, const Config* aConfig,
                        const transport::PeerInfo& b, Verdicts bOnA, const Config* bConfig,
                        const std::vector<const transport::TransportFactory*>& backends);

// The whole policy for one pair when both ranks share `config` and the
// backends: the chosen slot, or the error explainRejection() gives.
Result<int> choose(const transport::PeerInfo& a, const transport::PeerInfo& b, const Config& config,
                   const std::vector<const transport::TransportFactory*>& backends);

}  // namespace loom::transport_policy
