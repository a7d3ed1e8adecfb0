#include "tools/loomrun/elastic_agent.h"

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "tools/loomrun/job_environment.h"
#include "tools/loomrun/log_files.h"
#include "tools/loomrun/rendezvous_client.h"
#include "tools/loomrun/rendezvous_server.h"
#include "tools/loomrun/supervisor.h"

namespace loom::launcher {
namespace {

using Clock = std::chrono::steady_clock;

// The server answers a short round with ERROR at the join timeout; the
// agent's own deadline is later, for a server that cannot answer at all.
constexpr double kClientGraceSeconds = 10;

Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

std::string resolveRunId(const LaunchOptions& opts) {
  if (opts.runId) return *opts.runId;
  const char* inherited = std::getenv("TORCHELASTIC_RUN_ID");
  return inherited != nullptr && *inherited != '\0' ? inherited : "none";
}

// The host agent stays until the job is over, so that agents still running
// can report DONE or meet again; a stop signal ends the wait.
void waitForJobEnd(const RendezvousServer& server, SignalChannel& signals) {
  while (!server.finished()) {
    for (int signo : signals.drain()) {
      if (signo != SIGCHLD) return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace

int runElastic(const LaunchOptions& opts, const std::vector<std::vector<int>>& rankCpus, SignalChannel& signals) {
  RendezvousConfig config{resolveRunId(opts), opts.minNodes, opts.nodes, opts.joinTimeoutSeconds,
                          opts.lastCallSeconds};
  const std::string endpoint = opts.masterAddr + ":" + std::to_string(*opts.masterPort);
  // The secret and run id are the job's for every round; MASTER_ADDR/PORT
  // come from each round.
  Result<JobSettings> settings = resolveJobSettings(opts);
  if (!settings.isOk()) {
    std::fprintf(stderr, "loomrun: %s\n", settings.status().message().c_str());
    return settings.status().code() == Code::kSystemError ? 1 : kExitUsage;
  }
  Result<std::unique_ptr<RendezvousServer>> server = RendezvousServer::host(opts.masterAddr, *opts.masterPort, config);
  if (!server.isOk()) {
    std::fprintf(stderr, "loomrun: %s\n", server.status().message().c_str());
    return 1;
  }
  if (server.value()) {
    std::fprintf(stderr, "loomrun: hosting rendezvous '%s' at %s for --nnodes %d:%d\n", config.runId.c_str(),
                 endpoint.c_str(), opts.minNodes, opts.nodes);
  }
  Result<std::unique_ptr<RendezvousClient>> connected =
      RendezvousClient::connect(opts.masterAddr, *opts.masterPort, after(opts.joinTimeoutSeconds));
  if (!connected.isOk()) {
    std::fprintf(stderr, "loomrun: %s\n", connected.status().message().c_str());
    return 1;
  }
  RendezvousClient& client = *connected.value();
  JobSettings job = settings.value();
  job.runId = config.runId;
  job.rankCpus = rankCpus;
  if (opts.logDir && opts.wantsLogFiles()) {
    Result<std::string> dir = createRunLogDir(*opts.logDir, job.runId);
    if (!dir.isOk()) {
      std::fprintf(stderr, "loomrun: %s\n", dir.status().message().c_str());
      return 1;
    }
    job.logRunDir = dir.value();
  }
  int failures = 0;
  for (int attempt = 0;; ++attempt) {
    Result<int> port = findFreePort(client.localAddress());
    if (!port.isOk()) {
      std::fprintf(stderr, "loomrun: %s\n", port.status().message().c_str());
      return 1;
    }
    Status joined = client.join({config.runId, opts.localRanks, port.value()});
    RoundReply reply;
    if (joined.isOk()) {
      reply = client.awaitRound(after(opts.joinTimeoutSeconds + kClientGraceSeconds), signals);
    } else {
      reply.text = joined.message();
    }
    if (reply.kind == RoundReply::Kind::kError) {
      std::fprintf(stderr, "loomrun: rendezvous at %s: %s\n", endpoint.c_str(),
                   reply.text.c_str());
      return 1;
    }
    if (reply.kind == RoundReply::Kind::kSignal) {
      std::fprintf(stderr, "loomrun: got signal %d while waiting for a rendezvous round\n", reply.signo);
      return 128 + reply.signo;
    }
    if (reply.kind == RoundReply::Kind::kFinished) {
      std::fprintf(stderr, "loomrun: the job finished before this node got a place in a round\n");
      return 0;
    }
    const RoundAssignment& round = reply.round;
    LaunchOptions roundOpts = opts;
    roundOpts.nodes = round.nodes;
    roundOpts.nodeRank = round.nodeRank;
    job.masterAddr = round.masterAddr;
    job.masterPort = round.masterPort;
    job.restartCount = attempt;
    const int first = round.nodeRank * opts.localRanks;
    std::fprintf(stderr, "loomrun: rendezvous round %d: node %d of %d, ranks %d..%d, WORLD_SIZE %d, MASTER_ADDR %s:%d\n",
                 round.round, round.nodeRank, round.nodes, first, first + opts.localRanks - 1,
                 roundOpts.worldSize(), round.masterAddr.c_str(), round.masterPort);
    Supervisor supervisor(roundOpts, job, signals);
    std::string reason;
    // A lost host stops the ranks too: its own ranks died with it, so the
    // job cannot go on, and no later round can be agreed.
    supervisor.watchControl(client.fd(), [&] {
      if (client.restartRequested(round.round, reason)) return Supervisor::ControlEvent::kStop;
      if (!client.lost()) return Supervisor::ControlEvent::kNone;
      reason = "lost";
      return Supervisor::ControlEvent::kStop;
    });
    int status = supervisor.run();
    if (supervisor.stoppedForRendezvous() && reason == "lost") {
      std::fprintf(stderr, "loomrun: lost the rendezvous host at %s (its loomrun ended); stopped the local ranks\n",
                   endpoint.c_str());
      return 1;
    }
    if (supervisor.stoppedForRendezvous()) {
      std::fprintf(stderr, "loomrun: rendezvous round %d ended (a node %s); stopped the local ranks\n",
                   round.round, reason == "join" ? "joined" : reason == "leave" ? "left" : "had a rank fail");
      if (reason != "join") ++failures;
    } else if (status == 0) {
      client.sendDone();
      if (server.value()) waitForJobEnd(*server.value(), signals);
      return 0;
    } else if (!supervisor.restartable()) {
      return status;
    } else {
      ++failures;
    }
    if (failures > opts.maxRestarts) {
      std::fprintf(stderr, "loomrun: round %d ended; no restarts left (--max-restarts %d)\n", round.round,
                   opts.maxRestarts);
      return status != 0 ? status : 1;
    }
    std::fprintf(stderr, "loomrun: joining the next rendezvous round (restarts used: %d of %d)\n", failures,
                 opts.maxRestarts);
  }
}

}  // namespace loom::launcher
