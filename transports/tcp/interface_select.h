// Which local address the TCP transport listens on.
//
// LOOM_SOCKET_IFNAME uses NCCL_SOCKET_IFNAME's syntax: a comma list of
// interface-name prefixes ("eth,ib"); a leading '^' turns it into a list of
// prefixes to avoid ("^docker,lo"); a leading '=' (after any '^') makes the
// names exact ("=eth0", "^=lo"). Unset, Loom takes the first interface that
// is not docker* or lo and falls back to loopback (so one host works).
//
// Candidates are every address of an interface that is up, IPv4 first, then
// IPv6 (link-local fe80::/10 IPv6 addresses are skipped: they need a scope on
// every peer to be reachable, which a bare address table cannot carry).
#pragma once

#include <string>
#include <vector>

#include "bootstrap/sock_addr.h"
#include "common/status.h"

namespace loom::transport::tcp {

class IfnameFilter {
 public:
  static IfnameFilter parse(const std::string& spec);
  bool matches(const std::string& ifname) const;
  bool empty() const { return names_.empty(); }

 private:
  bool exclude_ = false;
  bool exact_ = false;
  std::vector<std::string> names_;
};

struct InterfaceAddress {
  std::string ifname;
  bootstrap::SockAddr addr;  // port 0
};

// Addresses of interfaces that are up, IPv4 before IPv6, getifaddrs order otherwise.
std::vector<InterfaceAddress> listInterfaceAddresses();

// The first candidate the spec accepts (see above for the empty spec).
// NotFound-style kSystemError naming the spec and the candidates otherwise.
Result<InterfaceAddress> selectListenAddress(const std::string& spec,
                                             const std::vector<InterfaceAddress>& candidates);

}  // namespace loom::transport::tcp
