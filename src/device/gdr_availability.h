// Whether a communicator uses GPUDirect RDMA (LOOM_NET_GDR=1), decided once,
// when it is created. What makes GDR possible differs from host to host (a
// CUDA device, an RDMA device with an active port, nvidia-peermem), so each
// rank states its own reason (pure: gdrLocalReason) and the ranks agree in
// one bootstrap all-gather: GDR only if every rank can. That outcome is the
// shared fact path selection needs (GdrFacts::agreed). Ranks without a CUDA
// device join the agreement too (saying no), or the others would wait for them.
#pragma once

#include <string>

#include "bootstrap/bootstrap.h"
#include "common/log.h"
#include "common/status.h"
#include "common/wait.h"
#include "transports/rdma_memory.h"

namespace loom::cuda {

struct GdrLocalFacts {
  bool cudaUsable = false;    // this process sees a CUDA device
  bool kernelsBuilt = false;  // the CUDA reduce-copy kernels are compiled in
  std::string transport;      // LOOM_TRANSPORT (empty: per-peer choice)
  bool ibDisabled = false;    // LOOM_IB_DISABLE=1
  std::string rdmaReason;     // RdmaNetwork::probe(): "" if an RDMA device with an active port exists
  std::string peerMemReason;  // RdmaNetwork::probeDeviceMemory(): "" if GPU memory can be registered
};

// "" when this rank can use GDR, else why not (a phrase for a log line).
// The probes' reasons are only consulted when the cheaper facts allow GDR.
std::string gdrLocalReason(const GdrLocalFacts& facts);

// This rank's facts, probing `network` (the verbs transport's, over libibverbs).
GdrLocalFacts probeGdrLocalFacts(const std::string& transport, bool ibDisabled, transport::RdmaNetwork& network);

// Collective: true when every rank's reason was "". Logs this rank's reason
// (WARN, once per process), or which ranks cannot (INFO).
Result<bool> agreeOnGdr(bootstrap::Bootstrap& bootstrap, const std::string& localReason, const WaitContext& wait,
                        const Logger& log);

}  // namespace loom::cuda
