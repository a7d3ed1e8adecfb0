#include "src/comm/transport_registry.h"

#include "transports/shm/shm_transport.h"
#include "transports/tcp/tcp_transport.h"
#ifdef LOOM_HAVE_UCX
#include "transports/ucx/ucx_transport.h"
#endif
#ifdef LOOM_HAVE_VERBS
#include "transports/verbs/verbs_transport.h"
#endif

namespace loom {

const std::vector<const transport::TransportFactory*>& transportRegistry() {
  // Which backend serves a peer is the transport policy's choice
  // (comm/transport_policy.h: shm on one host, else ib, ucx, tcp; LOOM_TRANSPORT
  // and LOOM_*_DISABLE), not this list's order; a backend here is built in.
  static const std::vector<const transport::TransportFactory*> registry = {
#ifdef LOOM_HAVE_VERBS
      &transport::verbsTransportFactory(),  // "ib": InfiniBand/RoCE (transports/verbs)
#endif
#ifdef LOOM_HAVE_UCX
      &transport::ucxTransportFactory(),
#endif
      &transport::tcpTransportFactory(),
      &transport::shmTransportFactory(),
  };
  return registry;
}

}  // namespace loom
