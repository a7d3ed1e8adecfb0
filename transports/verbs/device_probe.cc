#include "transports/verbs/device_probe.h"

namespace loom::transport::verbs {

const std::string& DeviceProbe::reason() {
  std::call_once(once_, [this] { reason_ = provider_->probe(); });
  return reason_;
}

bool DeviceProbe::available(const Logger& log, bool forced) {
  const std::string& why = reason();
  if (why.empty()) return true;
  if (forced) {
    if (!warned_.exchange(true))
      LOOM_WARN(log, kSubsysTransport, "verbs: %s; skipping although LOOM_TRANSPORT=ib", why.c_str());
  } else if (!informed_.exchange(true)) {
    LOOM_INFO(log, kSubsysTransport, "verbs: %s; skipping", why.c_str());
  }
  return false;
}

bool canConnectWith(DeviceProbe& probe, const PeerInfo& self, const PeerInfo& peer, const Config& config) {
  const bool forced = config.transport == "ib";
  if (!config.transport.empty() && !forced) return false;
  if (!forced && self.hostHash == peer.hostHash) return false;
  return probe.available(Logger(config.log, self.rank), forced);
}

}  // namespace loom::transport::verbs
