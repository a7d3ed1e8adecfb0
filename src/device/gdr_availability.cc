#include "src/device/gdr_availability.h"

#include <atomic>
#include <vector>

#include "common/format.h"
#include "src/device/p2p_direct.h"
#include "src/device/runtime.h"

namespace loom::cuda {

std::string gdrLocalReason(const GdrLocalFacts& f) {
  if (!f.kernelsBuilt) return "Loom was built without the CUDA kernels";
  if (!f.cudaUsable) return "this process has no usable CUDA device";
  if (!f.transport.empty() && f.transport != "ib")
    return strprintf("LOOM_TRANSPORT=%s (verbs serves no pair)", f.transport.c_str());
  if (f.ibDisabled) return "LOOM_IB_DISABLE=1";
  if (!f.rdmaReason.empty()) return f.rdmaReason;
  return f.peerMemReason;
}

GdrLocalFacts probeGdrLocalFacts(const std::string& transport, bool ibDisabled, transport::RdmaNetwork& network) {
  GdrLocalFacts f;
  f.cudaUsable = devicesUsable();
  f.kernelsBuilt = directPathBuilt();
  f.transport = transport;
  f.ibDisabled = ibDisabled;
  if (gdrLocalReason(f).empty()) {  // probe the device only when nothing cheaper already says no
    f.rdmaReason = network.probe();
    if (f.rdmaReason.empty()) f.peerMemReason = network.probeDeviceMemory();
  }
  return f;
}

Result<bool> agreeOnGdr(bootstrap::Bootstrap& bootstrap, const std::string& localReason, const WaitContext& wait,
                        const Logger& log) {
  std::vector<uint8_t> can(static_cast<size_t>(bootstrap.nranks()), 0);
  can[static_cast<size_t>(bootstrap.rank())] = localReason.empty() ? 1 : 0;
  LOOM_TRY(bootstrap.allGather(can.data(), 1, wait)
               .withContext(strprintf("GDR on rank %d, agreeing on LOOM_NET_GDR: ", bootstrap.rank())));
  if (!localReason.empty()) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true))
      LOOM_WARN(log, kSubsysInit, "GDR: LOOM_NET_GDR=1 but %s; device buffers are staged through host memory",
                localReason.c_str());
    return false;
  }
  std::string cannot;
  for (size_t r = 0; r < can.size(); ++r)
    if (!can[r]) cannot += (cannot.empty() ? "" : ", ") + std::to_string(r);
  if (cannot.empty()) return true;
  LOOM_INFO(log, kSubsysInit, "GDR: rank(s) %s cannot use GPUDirect RDMA (their log says why); device buffers are staged",
            cannot.c_str());
  return false;
}

}  // namespace loom::cuda
