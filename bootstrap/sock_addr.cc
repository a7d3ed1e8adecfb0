#include "bootstrap/sock_addr.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>

#include <cerrno>
#include <cstring>

namespace loom::bootstrap {

Result<SockAddr> SockAddr::fromNumeric(const std::string& host, uint16_t port) {
  if (host.empty()) return makeError(Code::kInvalidArgument, "empty host address");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  // Numeric only: never block on a resolver.
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  std::string service = std::to_string(port);
  int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  if (rc != 0 || found == nullptr) {
    return makeError(Code::kInvalidArgument, "'%s' is not a numeric IPv4 or IPv6 address (%s)",
                     host.c_str(), gai_strerror(rc));
  }
  Result<SockAddr> out = fromRaw(found->ai_addr, found->ai_addrlen);
  freeaddrinfo(found);
  return out;
}

Result<SockAddr> SockAddr::fromRaw(const sockaddr* addr, socklen_t length) {
  SockAddr out;
  if (addr == nullptr) return makeError(Code::kInvalidArgument, "null socket address");
  if (addr->sa_family == AF_INET && length >= static_cast<socklen_t>(sizeof(sockaddr_in))) {
    std::memcpy(&out.storage_, addr, sizeof(sockaddr_in));
    out.length_ = sizeof(sockaddr_in);
    return out;
  }
  if (addr->sa_family == AF_INET6 && length >= static_cast<socklen_t>(sizeof(sockaddr_in6))) {
    std::memcpy(&out.storage_, addr, sizeof(sockaddr_in6));
    out.length_ = sizeof(sockaddr_in6);
    return out;
  }
  return makeError(Code::kInvalidArgument, "unsupported address family %d (need IPv4 or IPv6)",
                   static_cast<int>(addr->sa_family));
}

uint16_t SockAddr::port() const {
  if (family() == AF_INET) return ntohs(v4().sin_port);
  if (family() == AF_INET6) return ntohs(v6().sin6_port);
  return 0;
}

void SockAddr::setPort(uint16_t port) {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&storage_)->sin_port = htons(port);
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&storage_)->sin6_port = htons(port);
}

std::string SockAddr::host() const {
  if (!valid()) return "<no address>";
  char buf[NI_MAXHOST] = {0};
  if (getnameinfo(raw(), length_, buf, sizeof(buf), nullptr, 0, NI_NUMERICHOST) != 0) {
    return "<unprintable address>";
  }
  return buf;
}

std::string SockAddr::toString() const {
  std::string h = host();
  if (family() == AF_INET6) return "[" + h + "]:" + std::to_string(port());
  return h + ":" + std::to_string(port());
}

Result<SockAddr> localAddressOf(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    return makeSystemError(errno, "getsockname");
  }
  return SockAddr::fromRaw(reinterpret_cast<sockaddr*>(&ss), len);
}

Result<SockAddr> peerAddressOf(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    return makeSystemError(errno, "getpeername");
  }
  return SockAddr::fromRaw(reinterpret_cast<sockaddr*>(&ss), len);
}

std::string peerText(int fd) {
  Result<SockAddr> peer = peerAddressOf(fd);
  return peer.isOk() ? peer.value().toString() : std::string("<unknown peer>");
}

std::string defaultHostAddress() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "127.0.0.1";
  std::string chosen = "127.0.0.1";
  for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || it->ifa_addr->sa_family != AF_INET) continue;
    if (!(it->ifa_flags & IFF_UP) || (it->ifa_flags & IFF_LOOPBACK)) continue;
    char buf[INET_ADDRSTRLEN] = {0};
    const auto* in = reinterpret_cast<const sockaddr_in*>(it->ifa_addr);
    if (inet_ntop(AF_INET, &in->sin_addr, buf, sizeof(buf)) != nullptr) {
      chosen = buf;
      break;
    }
  }
  freeifaddrs(list);
  return chosen;
}

}  // namespace loom::bootstrap
