#include "tools/loomrun/rendezvous_server.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <optional>
#include <vector>

#include "common/format.h"
#include "tools/loomrun/rendezvous_protocol.h"

namespace loom::launcher {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kTickMs = 50;  // how often round deadlines are checked

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string peerAddress(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  char host[NI_MAXHOST] = "127.0.0.1";
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof(host), nullptr, 0, NI_NUMERICHOST);
  }
  return host;
}

}  // namespace

struct RendezvousServer::State {
  enum class Place { kConnected, kWaiting, kMember, kPending, kDone };
  struct Agent {
    std::unique_ptr<LineChannel> channel;
    std::string address;
    JoinRequest join;
    Place place = Place::kConnected;
    int lastNodeRank = -1;  // in the last round it ran in; -1: none
    long joinOrder = 0;
  };

  RendezvousConfig config;
  std::vector<std::unique_ptr<Agent>> agents;
  int round = -1;  // the last round that closed
  bool roundRunning = false;
  bool over = false;
  int localRanks = 0;  // -n of the first agent; all must match
  long joins = 0;
  std::optional<Clock::time_point> waitingSince;
  std::optional<Clock::time_point> minReachedAt;
  Clock::time_point pendingSince;

  int count(Place place) const {
    int n = 0;
    for (const auto& a : agents) n += a->place == place ? 1 : 0;
    return n;
  }

  void endRound(const char* reason) {
    for (auto& a : agents) {
      if (a->place != Place::kMember) continue;
      a->place = Place::kPending;
      a->channel->send(strprintf("RESTART %d %s", round, reason));
    }
    roundRunning = false;
    pendingSince = Clock::now();
  }

  void onJoin(Agent& agent, const std::string& line) {
    std::optional<JoinRequest> join = parseJoin(line);
    std::string problem;
    if (!join) {
      problem = "malformed JOIN '" + line + "'";
    } else if (join->runId != config.runId) {
      problem = strprintf("--rdzv-id '%s' differs from the rendezvous' '%s'", join->runId.c_str(),
                          config.runId.c_str());
    } else if (localRanks != 0 && join->localRanks != localRanks) {
      problem = strprintf("-n %d differs from the other nodes' -n %d (elastic nodes must have equal ranks)",
                          join->localRanks, localRanks);
    } else if (over) {
      agent.channel->send("FINISHED");
      return;
    }
    if (!problem.empty()) {
      agent.channel->send("ERROR " + problem);
      return;
    }
    if (localRanks == 0) localRanks = join->localRanks;
    Place before = agent.place;
    agent.join = *join;
    agent.place = Place::kWaiting;
    agent.joinOrder = joins++;
    if (before == Place::kMember) {
      endRound("fail");
    } else if (before != Place::kPending && roundRunning && count(Place::kMember) < config.maxNodes) {
      endRound("join");
    }
  }

  void onDone(Agent& agent) {
    if (agent.place != Place::kMember) return;
    agent.place = Place::kDone;
    if (count(Place::kMember) > 0) return;
    over = true;
    for (auto& a : agents) {
      if (a->place == Place::kWaiting) a->channel->send("FINISHED");
    }
  }

  // The agent's connection closed; a member leaving ends the round.
  void onGone(size_t index) {
    bool wasMember = agents[index]->place == Place::kMember;
    agents.erase(agents.begin() + static_cast<long>(index));
    if (wasMember && !over) endRound("leave");
  }

  void closeRound(std::vector<Agent*> waiting) {
    std::stable_sort(waiting.begin(), waiting.end(), [](const Agent* a, const Agent* b) {
      auto key = [](const Agent* x) { return std::make_pair(x->lastNodeRank < 0 ? 1 : 0, x->lastNodeRank); };
      if (key(a) != key(b)) return key(a) < key(b);
      return a->joinOrder < b->joinOrder;
    });
    if (static_cast<int>(waiting.size()) > config.maxNodes) waiting.resize(static_cast<size_t>(config.maxNodes));
    ++round;
    RoundAssignment r;
    r.round = round;
    r.nodes = static_cast<int>(waiting.size());
    r.masterAddr = waiting[0]->address;
    r.masterPort = waiting[0]->join.masterPort;
    for (size_t i = 0; i < waiting.size(); ++i) {
      r.nodeRank = static_cast<int>(i);
      waiting[i]->place = Place::kMember;
      waiting[i]->lastNodeRank = r.nodeRank;
      waiting[i]->channel->send(formatRound(r));
    }
    roundRunning = true;
    waitingSince.reset();
    minReachedAt.reset();
  }

  void giveUp(int waitingCount) {
    std::string text = strprintf(
        "only %d of the minimum %d nodes joined rendezvous '%s' within the join timeout of %g s "
        "(--nnodes %d:%d)",
        waitingCount, config.minNodes, config.runId.c_str(), config.joinTimeoutSeconds, config.minNodes,
        config.maxNodes);
    for (auto& a : agents) {
      if (a->place == Place::kWaiting || a->place == Place::kPending) a->channel->send("ERROR " + text);
      a->place = Place::kConnected;
    }
    over = true;
  }

  void tick() {
    if (over || roundRunning) return;
    std::vector<Agent*> waiting;
    for (auto& a : agents) {
      if (a->place == Place::kWaiting) waiting.push_back(a.get());
    }
    if (waiting.empty()) {
      waitingSince.reset();
      minReachedAt.reset();
      return;
    }
    if (!waitingSince) waitingSince = Clock::now();
    // Agents of the ended round still stopping their ranks: wait for them
    // (they are about to JOIN), but not past the join timeout.
    bool pendingExpired = secondsSince(pendingSince) >= config.joinTimeoutSeconds;
    if (pendingExpired) {
      for (auto& a : agents) {
        if (a->place == Place::kPending) a->place = Place::kConnected;
      }
    }
    const bool pending = count(Place::kPending) > 0;
    const int n = static_cast<int>(waiting.size());
    if (n >= config.minNodes) {
      if (!minReachedAt) minReachedAt = Clock::now();
      bool lastCallOver = secondsSince(*minReachedAt) >= config.lastCallSeconds;
      if (!pending && (n >= config.maxNodes || lastCallOver)) closeRound(waiting);
      return;
    }
    minReachedAt.reset();
    if (secondsSince(*waitingSince) >= config.joinTimeoutSeconds) giveUp(n);
  }
};

Result<std::unique_ptr<RendezvousServer>> RendezvousServer::host(const std::string& host, int port,
                                                                 const RendezvousConfig& config) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* list = nullptr;
  int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &list);
  LOOM_ENFORCE(rc == 0, Code::kInvalidUsage, "cannot resolve --rdzv-endpoint host '%s': %s", host.c_str(),
               gai_strerror(rc));
  int fd = -1;
  int lastErrno = 0;
  for (addrinfo* ai = list; ai != nullptr && fd < 0; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      lastErrno = errno;
      continue;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 64) != 0) {
      lastErrno = errno;
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(list);
  if (fd < 0) {
    if (lastErrno == EADDRINUSE || lastErrno == EADDRNOTAVAIL) return std::unique_ptr<RendezvousServer>();
    return makeSystemError(lastErrno, "cannot listen on --rdzv-endpoint %s:%d", host.c_str(), port);
  }
  int wake[2];
  if (pipe2(wake, O_CLOEXEC) != 0) {
    int err = errno;
    close(fd);
    return makeSystemError(err, "pipe for the rendezvous server failed");
  }
  auto state = std::make_unique<State>();
  state->config = config;
  std::unique_ptr<RendezvousServer> server(new RendezvousServer(fd, wake[0], wake[1], std::move(state)));
  server->thread_ = std::thread([s = server.get()] { s->serve(); });
  return server;
}

RendezvousServer::RendezvousServer(int listenFd, int wakeReadFd, int wakeWriteFd, std::unique_ptr<State> state)
    : listenFd_(listenFd), wakeWriteFd_(wakeWriteFd), wakeReadFd_(wakeReadFd), state_(std::move(state)) {}

RendezvousServer::~RendezvousServer() {
  // Closing the write end makes the read end readable: the thread ends.
  close(wakeWriteFd_);
  if (thread_.joinable()) thread_.join();
  close(wakeReadFd_);
  close(listenFd_);
}

void RendezvousServer::serve() {
  State& s = *state_;
  while (true) {
    std::vector<pollfd> fds{{listenFd_, POLLIN, 0}, {wakeReadFd_, POLLIN, 0}};
    for (auto& a : s.agents) fds.push_back({a->channel->fd(), POLLIN, 0});
    int ready = poll(fds.data(), fds.size(), kTickMs);
    if (ready > 0 && fds[1].revents != 0) return;
    if (ready > 0) {
      // Agents first (indices shift when one is removed, so walk backwards).
      for (size_t i = fds.size(); i-- > 2;) {
        if (fds[i].revents == 0) continue;
        State::Agent& agent = *s.agents[i - 2];
        std::vector<std::string> lines;
        bool open = agent.channel->receive(lines);
        for (const std::string& line : lines) {
          std::string kind = messageKind(line);
          if (kind == "JOIN") s.onJoin(agent, line);
          else if (kind == "DONE") s.onDone(agent);
        }
        if (!open) s.onGone(i - 2);
      }
      if (fds[0].revents != 0) {
        int c = accept4(listenFd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c >= 0) {
          auto agent = std::make_unique<State::Agent>();
          agent->channel = std::make_unique<LineChannel>(c);
          agent->address = peerAddress(c);
          s.agents.push_back(std::move(agent));
        }
      }
    }
    s.tick();
    finished_.store(s.over);
  }
}

}  // namespace loom::launcher
