#include "comm/transport_registry.h"

#include "transports/shm/shm_transport.h"
#include "transports/tcp/tcp_transport.h"

namespace loom {

const std::vector<const transport::TransportFactory*>& transportRegistry() {
  // TCP accepts only peers on other hosts unless LOOM_TRANSPORT=tcp forces it
  // for every peer, so listing it first lets that override win while same-host
  // peers otherwise stay on shared memory (the fastest path on one host).
  // UCX and verbs join this list in a later issue.
  static const std::vector<const transport::TransportFactory*> registry = {
      &transport::tcpTransportFactory(),
      &transport::shmTransportFactory(),
  };
  return registry;
}

}  // namespace loom
