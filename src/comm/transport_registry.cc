#include "comm/transport_registry.h"

#include "transports/shm/shm_transport.h"

namespace loom {

const std::vector<const transport::TransportFactory*>& transportRegistry() {
  // Network transports (TCP, UCX, verbs) join this list in a later issue;
  // shared memory stays first because it is the fastest path on one host.
  static const std::vector<const transport::TransportFactory*> registry = {
      &transport::shmTransportFactory(),
  };
  return registry;
}

}  // namespace loom
