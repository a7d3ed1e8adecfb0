// Whether the kernel lets an RDMA NIC register GPU memory (GPUDirect RDMA):
// ibv_reg_mr on a cudaMalloc pointer only works when a peer-memory client
// for NVIDIA GPUs is loaded. Three signs of one, any is enough:
//   /sys/kernel/mm/memory_peers/nv_mem/version  (the peer-memory client of
//       nvidia-peermem, or of the older nv_peer_mem, registered with MOFED)
//   /sys/module/nvidia_peermem                  (the in-driver module, R470+)
//   /sys/module/nv_peer_mem                     (the legacy out-of-tree module)
// Split in two so the decision is tested without touching /sys: reading the
// facts (readPeerMemFacts, given a root directory) and judging them
// (peerMemoryReason, pure).
#pragma once

#include <string>

namespace loom::transport::verbs {

struct PeerMemFacts {
  bool nvMemVersion = false;     // <root>/kernel/mm/memory_peers/nv_mem/version exists
  bool nvidiaPeermem = false;    // <root>/module/nvidia_peermem exists
  bool legacyNvPeerMem = false;  // <root>/module/nv_peer_mem exists
};

// `sysRoot` is "/sys" outside tests.
PeerMemFacts readPeerMemFacts(const std::string& sysRoot);

// "" when GPU memory can be registered, else why not (one phrase for a log line).
std::string peerMemoryReason(const PeerMemFacts& facts);

}  // namespace loom::transport::verbs
