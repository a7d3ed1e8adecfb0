// The real verbs backend: verbs_api.h over libibverbs. Built only when the
// rdma-core headers exist (LOOM_HAVE_VERBS).
#pragma once

#include <memory>

#include "transports/verbs/verbs_api.h"

namespace loom::transport::verbs {

// Opens the first device that has an active port (port 1 first). On RoCE
// ports the GID index is the first RoCE v2 entry with an IPv4-mapped address
// (the routable one), else 0.
std::shared_ptr<Provider> ibvProvider();

}  // namespace loom::transport::verbs
