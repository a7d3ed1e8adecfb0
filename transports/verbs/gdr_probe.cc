#include "transports/verbs/gdr_probe.h"

#include <sys/stat.h>

namespace loom::transport::verbs {
namespace {

bool exists(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

PeerMemFacts readPeerMemFacts(const std::string& sysRoot) {
  PeerMemFacts f;
  f.nvMemVersion = exists(sysRoot + "/kernel/mm/memory_peers/nv_mem/version");
  f.nvidiaPeermem = exists(sysRoot + "/module/nvidia_peermem");
  f.legacyNvPeerMem = exists(sysRoot + "/module/nv_peer_mem");
  return f;
}

std::string peerMemoryReason(const PeerMemFacts& f) {
  if (f.nvMemVersion || f.nvidiaPeermem || f.legacyNvPeerMem) return "";
  return "the kernel cannot register GPU memory with the RDMA NIC (nvidia-peermem not loaded: no "
         "/sys/kernel/mm/memory_peers/nv_mem, no /sys/module/nvidia_peermem; `modprobe nvidia-peermem` loads it)";
}

}  // namespace loom::transport::verbs
