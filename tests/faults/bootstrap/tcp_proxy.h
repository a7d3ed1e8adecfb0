// A one-connection TCP proxy that injects one fault into the byte stream, so
// the fault tests run the real rank and root code on both ends of a damaged
// connection: flip a byte at a given position, or close both sides once a
// given number of bytes has passed in one direction.
//
// Thread safety: the proxy runs on its own thread; the owner only reads
// port() and destroys it (which stops and joins the thread, closing every
// socket).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>

#include "bootstrap/sock_addr.h"
#include "bootstrap/socket.h"

namespace loom::bootstrap::testing {

struct ProxyFault {
  enum class Direction { kToServer, kToClient };
  enum class Kind { kNone, kFlipByte, kCloseAfter };
  Direction direction = Direction::kToServer;
  Kind kind = Kind::kNone;
  size_t offset = 0;   // kFlipByte: index of the byte in that direction's stream;
                       // kCloseAfter: bytes forwarded in that direction before both sides close
  uint8_t mask = 0x01; // kFlipByte: XORed into the byte
};

class TcpProxy {
 public:
  // Listens on 127.0.0.1 (port from the kernel) and forwards the first
  // connection it accepts to `target`, applying `fault`.
  TcpProxy(const SockAddr& target, ProxyFault fault);
  ~TcpProxy();
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  uint16_t port() const { return port_; }

 private:
  void run();
  // Forwards what is readable on `from` to `to`; false when the session ends.
  bool pump(int from, int to, ProxyFault::Direction direction, size_t& position);

  SockAddr target_;
  ProxyFault fault_;
  Socket listener_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace loom::bootstrap::testing
