#include "tests/faults/bootstrap/tcp_proxy.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "bootstrap/socket_io.h"

namespace loom::bootstrap::testing {

TcpProxy::TcpProxy(const SockAddr& target, ProxyFault fault) : target_(target), fault_(fault) {
  Result<Socket> listener = listenOn(SockAddr::fromNumeric("127.0.0.1", 0).value(), false);
  if (!listener.isOk()) throw std::runtime_error("proxy: " + listener.status().message());
  listener_ = std::move(listener.value());
  port_ = localAddressOf(listener_.fd()).value().port();
  thread_ = std::thread([this] { run(); });
}

TcpProxy::~TcpProxy() {
  stop_.store(true);
  thread_.join();
}

void TcpProxy::run() {
  // Polls in 20 ms slices so the destructor's stop flag is seen promptly.
  Socket client;
  while (!stop_.load() && !client.valid()) {
    pollfd pfd{listener_.fd(), POLLIN, 0};
    ::poll(&pfd, 1, 20);
    Result<Socket> accepted = tryAccept(listener_, nullptr);
    if (!accepted.isOk()) return;
    client = std::move(accepted.value());
  }
  listener_.close();
  if (!client.valid()) return;
  int err = 0;
  Result<Socket> server = connectOnce(target_, WaitContext{Deadline::after(5)}, &err);
  if (!server.isOk()) return;  // the client sees its connection close
  size_t toServer = 0;
  size_t toClient = 0;
  while (!stop_.load()) {
    pollfd fds[2] = {{client.fd(), POLLIN, 0}, {server.value().fd(), POLLIN, 0}};
    if (::poll(fds, 2, 20) <= 0) continue;
    if (fds[0].revents && !pump(client.fd(), server.value().fd(), ProxyFault::Direction::kToServer, toServer)) break;
    if (fds[1].revents && !pump(server.value().fd(), client.fd(), ProxyFault::Direction::kToClient, toClient)) break;
  }
  // Leaving closes both sides: each end sees end of stream.
}

bool TcpProxy::pump(int from, int to, ProxyFault::Direction direction, size_t& position) {
  std::vector<uint8_t> buf(4096);
  ssize_t n = ::recv(from, buf.data(), buf.size(), MSG_DONTWAIT);
  if (n == 0) return false;
  if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  buf.resize(static_cast<size_t>(n));
  bool closeAfter = false;
  if (fault_.direction == direction) {
    if (fault_.kind == ProxyFault::Kind::kFlipByte && fault_.offset >= position &&
        fault_.offset < position + buf.size()) {
      buf[fault_.offset - position] ^= fault_.mask;
    }
    if (fault_.kind == ProxyFault::Kind::kCloseAfter && position + buf.size() >= fault_.offset) {
      buf.resize(fault_.offset - std::min(fault_.offset, position));
      closeAfter = true;
    }
  }
  position += buf.size();
  if (!buf.empty() && !sendAll(to, buf.data(), buf.size(), WaitContext{Deadline::after(5)}, "proxy").isOk()) {
    return false;
  }
  return !closeAfter;
}

}  // namespace loom::bootstrap::testing
