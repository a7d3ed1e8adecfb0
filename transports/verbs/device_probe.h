// Whether this process has an RDMA device, asked once and remembered, with
// one log line saying why not: INFO normally (most machines have no RDMA and
// TCP serves them), WARN when the user forced LOOM_TRANSPORT=ib.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "common/config.h"
#include "common/log.h"
#include "transports/transport.h"
#include "transports/verbs/verbs_api.h"

namespace loom::transport::verbs {

class DeviceProbe {
 public:
  explicit DeviceProbe(std::shared_ptr<Provider> provider) : provider_(std::move(provider)) {}

  bool available(const Logger& log, bool forced);
  // "" if a device exists, else why not (probes if not done yet).
  const std::string& reason();

 private:
  std::shared_ptr<Provider> provider_;
  std::once_flag once_;
  std::string reason_;
  std::atomic<bool> informed_{false};
  std::atomic<bool> warned_{false};
};

// The factory's canConnect with an explicit probe: the peer is on another
// host (any peer with LOOM_TRANSPORT=ib; none if another transport is
// forced) and `probe` finds a device.
bool canConnectWith(DeviceProbe& probe, const PeerInfo& self, const PeerInfo& peer, const Config& config);

}  // namespace loom::transport::verbs
