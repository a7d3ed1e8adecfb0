#include "tools/loomrun/job_environment.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

#include "common/config.h"
#include "common/format.h"

namespace loom::launcher {
namespace {

// Every variable loomrun defines; inherited copies are dropped first.
constexpr std::string_view kRankVariables[] = {
    "RANK",          "WORLD_SIZE",      "LOCAL_RANK",           "LOCAL_WORLD_SIZE",
    "GROUP_RANK",    "GROUP_WORLD_SIZE", "ROLE_RANK",           "ROLE_WORLD_SIZE",
    "ROLE_NAME",     "MASTER_ADDR",     "MASTER_PORT",          kSecretVariable,
    "TORCHELASTIC_RESTART_COUNT",       "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID",
    kRestartCountVariable,             "LOOM_LOCAL_CORES",
};

bool isRankVariable(std::string_view entry) {
  size_t eq = entry.find('=');
  std::string_view name = entry.substr(0, eq);
  for (std::string_view v : kRankVariables) {
    if (name == v) return true;
  }
  return false;
}

Result<std::string> resolveSecret(const LaunchOptions& opts) {
  const char* inherited = readKnob(kSecretVariable);
  if (inherited != nullptr && *inherited != '\0') {
    LOOM_ENFORCE(isValidSecret(inherited), Code::kInvalidUsage,
                 "%s in the environment must be %zu hex digits, got %zu characters",
                 kSecretVariable, kSecretHexDigits, std::strlen(inherited));
    return std::string(inherited);
  }
  const std::string nnodes = opts.elastic ? strprintf("%d:%d", opts.minNodes, opts.nodes)
                                          : std::to_string(opts.nodes);
  LOOM_ENFORCE(opts.nodes == 1, Code::kInvalidUsage,
               "%s is not set: with --nnodes %s every node must run loomrun with the same "
               "%s (32 hex digits, e.g. from `openssl rand -hex 16`) in its environment",
               kSecretVariable, nnodes.c_str(), kSecretVariable);
  return randomSecretHex();
}

}  // namespace

bool isValidSecret(std::string_view text) {
  if (text.size() != kSecretHexDigits) return false;
  for (char c : text) {
    bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    if (!hex) return false;
  }
  return true;
}

Result<std::string> randomSecretHex() {
  unsigned char bytes[kSecretHexDigits / 2];
  size_t filled = 0;
  while (filled < sizeof(bytes)) {
    ssize_t n = getrandom(bytes + filled, sizeof(bytes) - filled, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return makeSystemError(errno, "getrandom for %s failed", kSecretVariable);
    filled += static_cast<size_t>(n);
  }
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char b : bytes) {
    hex += kDigits[b >> 4];
    hex += kDigits[b & 0xf];
  }
  return hex;
}

Result<int> findFreePort(const std::string& addr) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* list = nullptr;
  int rc = getaddrinfo(addr.c_str(), "0", &hints, &list);
  LOOM_ENFORCE(rc == 0, Code::kInvalidUsage, "cannot resolve --master-addr '%s': %s",
               addr.c_str(), gai_strerror(rc));
  int lastErrno = 0;
  int port = 0;
  for (addrinfo* ai = list; ai != nullptr && port == 0; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      lastErrno = errno;
      continue;
    }
    sockaddr_storage bound{};
    socklen_t len = sizeof(bound);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) == 0) {
      port = bound.ss_family == AF_INET6
                 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                 : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    } else {
      lastErrno = errno;
    }
    close(fd);
  }
  freeaddrinfo(list);
  if (port == 0) {
    return makeSystemError(lastErrno,
                           "cannot bind a port on --master-addr '%s' to pick MASTER_PORT "
                           "(is it an address of this machine? otherwise pass --master-port)",
                           addr.c_str());
  }
  return port;
}

Result<JobSettings> resolveJobSettings(const LaunchOptions& opts) {
  JobSettings job;
  job.masterAddr = opts.masterAddr;
  if (opts.masterPort) {
    job.masterPort = *opts.masterPort;
  } else {
    Result<int> port = findFreePort(opts.masterAddr);
    if (!port.isOk()) return port.status();
    job.masterPort = port.value();
  }
  Result<std::string> secret = resolveSecret(opts);
  if (!secret.isOk()) return secret.status();
  job.secret = std::move(secret).value();
  const char* runId = std::getenv("TORCHELASTIC_RUN_ID");
  if (opts.runId) {
    job.runId = *opts.runId;
  } else {
    job.runId = (runId != nullptr && *runId != '\0') ? runId : "none";
  }
  return job;
}

std::vector<std::string> rankEnvironment(const char* const* baseEnv, const LaunchOptions& opts,
                                         const JobSettings& job, int localRank) {
  std::vector<std::string> env;
  for (const char* const* e = baseEnv; e != nullptr && *e != nullptr; ++e) {
    if (!isRankVariable(*e)) env.emplace_back(*e);
  }
  int rank = opts.nodeRank * opts.localRanks + localRank;
  auto set = [&env](std::string_view name, const std::string& value) {
    env.push_back(std::string(name) + "=" + value);
  };
  set("RANK", std::to_string(rank));
  set("WORLD_SIZE", std::to_string(opts.worldSize()));
  set("LOCAL_RANK", std::to_string(localRank));
  set("LOCAL_WORLD_SIZE", std::to_string(opts.localRanks));
  set("GROUP_RANK", std::to_string(opts.nodeRank));
  set("GROUP_WORLD_SIZE", std::to_string(opts.nodes));
  set("ROLE_RANK", std::to_string(rank));
  set("ROLE_WORLD_SIZE", std::to_string(opts.worldSize()));
  set("ROLE_NAME", "default");
  set("MASTER_ADDR", job.masterAddr);
  set("MASTER_PORT", std::to_string(job.masterPort));
  set(kSecretVariable, job.secret);
  set("TORCHELASTIC_RESTART_COUNT", std::to_string(job.restartCount));
  set("TORCHELASTIC_MAX_RESTARTS", std::to_string(opts.maxRestarts));
  set(kRestartCountVariable, std::to_string(job.restartCount));
  set("TORCHELASTIC_RUN_ID", job.runId);
  if (!job.rankCpus.empty()) {
    // A bound rank sees only its own CPUs in its affinity mask; tell it how
    // many the host's ranks share, so its waits know whether peers can run
    // at the same time (Communicator::adaptWaitsToHost).
    std::set<int> used;
    for (const auto& cpus : job.rankCpus) used.insert(cpus.begin(), cpus.end());
    set("LOOM_LOCAL_CORES", std::to_string(used.size()));
  }
  return env;
}

}  // namespace loom::launcher
