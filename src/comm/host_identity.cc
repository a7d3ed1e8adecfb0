#include "src/comm/host_identity.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace loom {
namespace {

uint64_t fnv1a(const std::string& text, uint64_t hash = 1469598103934665603ull) {
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

std::string bootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

}  // namespace

transport::PeerInfo localPeerInfo(int rank, const std::string& hostId) {
  transport::PeerInfo info;
  info.rank = rank;
  info.pid = static_cast<int>(getpid());
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "unknown");
  // LOOM_HOST_ID overrides the identity: emulated hosts (network namespaces,
  // which share the kernel, its boot id and usually the host name) and
  // tests that split one machine into several "hosts" set it per rank.
  if (!hostId.empty()) {
    std::snprintf(info.hostName, sizeof(info.hostName), "%s", hostId.c_str());  // truncates long ids
    info.hostHash = fnv1a(hostId, fnv1a("LOOM_HOST_ID"));
    return info;
  }
  // Long names are cut to the field; the precision says so to the compiler.
  std::snprintf(info.hostName, sizeof(info.hostName), "%.*s", static_cast<int>(sizeof(info.hostName) - 1), host);
  info.hostHash = fnv1a(bootId(), fnv1a(host));
  return info;
}

}  // namespace loom
