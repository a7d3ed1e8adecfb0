#include "tools/loomrun/rendezvous_client.h"

#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "common/format.h"

namespace loom::launcher {
namespace {

// One attempt to connect to any address of host:port; -1 with errno set.
int connectOnce(const std::string& host, int port, int& err) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* list = nullptr;
  int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &list);
  if (rc != 0) {
    err = EHOSTUNREACH;
    return -1;
  }
  int fd = -1;
  for (addrinfo* ai = list; ai != nullptr && fd < 0; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      err = errno;
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(list);
  return fd;
}

int msUntil(std::chrono::steady_clock::time_point deadline) {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return static_cast<int>(std::clamp<long long>(left.count(), 0, 1000));
}

}  // namespace

Result<std::unique_ptr<RendezvousClient>> RendezvousClient::connect(const std::string& host, int port,
                                                                    Clock::time_point deadline) {
  int err = 0;
  while (true) {
    int fd = connectOnce(host, port, err);
    if (fd >= 0) return std::unique_ptr<RendezvousClient>(new RendezvousClient(fd));
    if (Clock::now() >= deadline) {
      return makeError(Code::kTimeout, "cannot reach the rendezvous at --rdzv-endpoint %s:%d within the join "
                       "timeout: %s", host.c_str(), port, std::strerror(err));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

std::string RendezvousClient::localAddress() const {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  char host[NI_MAXHOST] = "127.0.0.1";
  if (getsockname(fd(), reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof(host), nullptr, 0, NI_NUMERICHOST);
  }
  return host;
}

Status RendezvousClient::join(const JoinRequest& request) {
  LOOM_ENFORCE(channel_->send(formatJoin(request)), Code::kRemoteError,
               "the rendezvous host closed the connection (its loomrun ended)");
  return Status::ok();
}

bool RendezvousClient::readLines() {
  std::vector<std::string> got;
  bool open = channel_->receive(got);
  lines_.insert(lines_.end(), got.begin(), got.end());
  if (!open) lost_ = true;
  return open;
}

RoundReply RendezvousClient::awaitRound(Clock::time_point deadline, SignalChannel& signals) {
  RoundReply reply;
  while (true) {
    while (!lines_.empty()) {
      std::string line = lines_.front();
      lines_.pop_front();
      std::string kind = messageKind(line);
      if (kind == "ROUND") {
        std::optional<RoundAssignment> r = parseRound(line);
        if (!r) break;
        reply.kind = RoundReply::Kind::kRound;
        reply.round = *r;
        return reply;
      }
      if (kind == "ERROR") {
        reply.text = messageRest(line);
        return reply;
      }
      if (kind == "FINISHED") {
        reply.kind = RoundReply::Kind::kFinished;
        return reply;
      }
    }
    if (lost_) {
      reply.text = "the rendezvous host closed the connection (its loomrun ended)";
      return reply;
    }
    if (Clock::now() >= deadline) {
      reply.kind = RoundReply::Kind::kError;
      reply.text = "no rendezvous round closed within the join timeout";
      return reply;
    }
    pollfd fds[2] = {{fd(), POLLIN, 0}, {signals.fd(), POLLIN, 0}};
    if (poll(fds, 2, msUntil(deadline)) <= 0) continue;
    if (fds[1].revents != 0) {
      for (int signo : signals.drain()) {
        if (signo == SIGCHLD) continue;
        reply.kind = RoundReply::Kind::kSignal;
        reply.signo = signo;
        return reply;
      }
    }
    if (fds[0].revents != 0) readLines();
  }
}

bool RendezvousClient::restartRequested(int round, std::string& reason) {
  if (lost_) return false;
  readLines();
  bool restart = false;
  while (!lines_.empty()) {
    std::string line = lines_.front();
    lines_.pop_front();
    if (messageKind(line) != "RESTART") continue;
    std::string rest = messageRest(line);
    int r = -1;
    char why[32] = "";
    if (std::sscanf(rest.c_str(), "%d %31s", &r, why) == 2 && r == round) {
      restart = true;
      reason = why;
    }
  }
  return restart;
}

}  // namespace loom::launcher
