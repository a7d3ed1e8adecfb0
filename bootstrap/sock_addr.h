// SockAddr: an IPv4 or IPv6 socket address held by value, plus the lookups
// the bootstrap needs (numeric parsing, getsockname, the default interface).
//
// No DNS is ever done: every host string is a numeric address, so resolving
// cannot block and the same text means the same address on every rank.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>

#include "common/status.h"

namespace loom::bootstrap {

class SockAddr {
 public:
  SockAddr() = default;

  // Parses a numeric host ("10.0.0.1", "::1", "fe80::1%eth0"); InvalidArgument
  // naming the text when it is not one.
  static Result<SockAddr> fromNumeric(const std::string& host, uint16_t port);
  // Copies an AF_INET / AF_INET6 address; InvalidArgument for other families.
  static Result<SockAddr> fromRaw(const sockaddr* addr, socklen_t length);

  bool valid() const { return length_ > 0; }
  int family() const { return storage_.ss_family; }
  uint16_t port() const;
  void setPort(uint16_t port);
  // Numeric host without brackets ("::1"), including an IPv6 scope if any.
  std::string host() const;
  // "10.0.0.1:29500" or "[::1]:29500", for messages.
  std::string toString() const;

  const sockaddr* raw() const { return reinterpret_cast<const sockaddr*>(&storage_); }
  socklen_t length() const { return length_; }
  const sockaddr_in& v4() const { return *reinterpret_cast<const sockaddr_in*>(&storage_); }
  const sockaddr_in6& v6() const { return *reinterpret_cast<const sockaddr_in6*>(&storage_); }

 private:
  sockaddr_storage storage_{};
  socklen_t length_ = 0;
};

// getsockname / getpeername of a connected or bound socket.
Result<SockAddr> localAddressOf(int fd);
Result<SockAddr> peerAddressOf(int fd);
// Peer address for log lines; "<unknown peer>" when it cannot be read.
std::string peerText(int fd);

// The address of the first interface that is up, not loopback, and has an
// IPv4 address (getifaddrs order); "127.0.0.1" when there is none.
std::string defaultHostAddress();

}  // namespace loom::bootstrap
