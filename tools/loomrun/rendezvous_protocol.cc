#include "tools/loomrun/rendezvous_protocol.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <sstream>

#include "common/format.h"

namespace loom::launcher {

std::string formatJoin(const JoinRequest& join) {
  return strprintf("JOIN %s %d %d", join.runId.c_str(), join.localRanks, join.masterPort);
}

std::optional<JoinRequest> parseJoin(const std::string& line) {
  std::istringstream in(line);
  std::string kind;
  JoinRequest join;
  if (!(in >> kind >> join.runId >> join.localRanks >> join.masterPort) || kind != "JOIN") return std::nullopt;
  if (join.localRanks <= 0 || join.masterPort <= 0 || join.masterPort > 65535) return std::nullopt;
  return join;
}

std::string formatRound(const RoundAssignment& r) {
  return strprintf("ROUND %d %d %d %s %d", r.round, r.nodeRank, r.nodes, r.masterAddr.c_str(), r.masterPort);
}

std::optional<RoundAssignment> parseRound(const std::string& line) {
  std::istringstream in(line);
  std::string kind;
  RoundAssignment r;
  if (!(in >> kind >> r.round >> r.nodeRank >> r.nodes >> r.masterAddr >> r.masterPort) || kind != "ROUND") {
    return std::nullopt;
  }
  if (r.nodes <= 0 || r.nodeRank < 0 || r.nodeRank >= r.nodes) return std::nullopt;
  return r;
}

std::string messageKind(const std::string& line) { return line.substr(0, line.find(' ')); }

std::string messageRest(const std::string& line) {
  size_t space = line.find(' ');
  return space == std::string::npos ? std::string() : line.substr(space + 1);
}

LineChannel::~LineChannel() {
  if (fd_ >= 0) close(fd_);
}

bool LineChannel::send(const std::string& line) {
  std::string data = line + "\n";
  size_t sent = 0;
  while (sent < data.size()) {
    ssize_t n = ::send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

bool LineChannel::receive(std::vector<std::string>& lines) {
  char buf[4096];
  ssize_t n;
  do {
    n = read(fd_, buf, sizeof(buf));
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return false;
  partial_.append(buf, static_cast<size_t>(n));
  size_t start = 0;
  for (size_t nl; (nl = partial_.find('\n', start)) != std::string::npos; start = nl + 1) {
    lines.push_back(partial_.substr(start, nl - start));
  }
  partial_.erase(0, start);
  return true;
}

}  // namespace loom::launcher
