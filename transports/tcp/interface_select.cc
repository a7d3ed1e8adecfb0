#include "transports/tcp/interface_select.h"

#include <ifaddrs.h>
#include <net/if.h>

#include <algorithm>

#include "common/format.h"

namespace loom::transport::tcp {

IfnameFilter IfnameFilter::parse(const std::string& spec) {
  IfnameFilter f;
  size_t pos = 0;
  if (pos < spec.size() && spec[pos] == '^') f.exclude_ = true, ++pos;
  if (pos < spec.size() && spec[pos] == '=') f.exact_ = true, ++pos;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    std::string name = spec.substr(pos, comma - pos);
    if (!name.empty()) f.names_.push_back(name);
    pos = comma + 1;
  }
  return f;
}

bool IfnameFilter::matches(const std::string& ifname) const {
  bool listed = std::any_of(names_.begin(), names_.end(), [&](const std::string& n) {
    return exact_ ? ifname == n : ifname.compare(0, n.size(), n) == 0;
  });
  return exclude_ ? !listed : listed;
}

std::vector<InterfaceAddress> listInterfaceAddresses() {
  std::vector<InterfaceAddress> v4, v6;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return {};
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || !(i->ifa_flags & IFF_UP)) continue;
    int family = i->ifa_addr->sa_family;
    if (family == AF_INET) {
      auto a = bootstrap::SockAddr::fromRaw(i->ifa_addr, sizeof(sockaddr_in));
      if (a.isOk()) v4.push_back({i->ifa_name, a.value()});
    } else if (family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(i->ifa_addr);
      if (IN6_IS_ADDR_LINKLOCAL(&in6->sin6_addr)) continue;
      auto a = bootstrap::SockAddr::fromRaw(i->ifa_addr, sizeof(sockaddr_in6));
      if (a.isOk()) v6.push_back({i->ifa_name, a.value()});
    }
  }
  freeifaddrs(list);
  v4.insert(v4.end(), v6.begin(), v6.end());
  for (auto& c : v4) c.addr.setPort(0);
  return v4;
}

Result<InterfaceAddress> selectListenAddress(const std::string& spec,
                                             const std::vector<InterfaceAddress>& candidates) {
  auto firstMatch = [&](const IfnameFilter& f) -> const InterfaceAddress* {
    for (const auto& c : candidates)
      if (f.matches(c.ifname)) return &c;
    return nullptr;
  };
  const InterfaceAddress* chosen = nullptr;
  if (spec.empty()) {
    chosen = firstMatch(IfnameFilter::parse("^docker,lo"));
    if (!chosen) chosen = firstMatch(IfnameFilter::parse("lo"));
  } else {
    chosen = firstMatch(IfnameFilter::parse(spec));
  }
  if (chosen) return *chosen;
  std::string seen;
  for (const auto& c : candidates) seen += (seen.empty() ? "" : ", ") + c.ifname + " " + c.addr.host();
  return makeError(Code::kSystemError, "tcp: no interface matches LOOM_SOCKET_IFNAME=\"%s\" (interfaces up: %s)",
                   spec.c_str(), seen.empty() ? "none" : seen.c_str());
}

}  // namespace loom::transport::tcp
