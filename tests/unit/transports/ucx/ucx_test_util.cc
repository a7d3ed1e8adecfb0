#include "tests/unit/transports/ucx/ucx_test_util.h"

#include <cstdio>
#include <cstdlib>
#include <unistd.h>

#include "tests/unit/transports/shm/shm_test_util.h"
#include "tests/support/local_bootstrap.h"
#include "tests/support/rank_threads.h"
#include "transports/ucx/ucx_transport.h"

namespace loom::testing::ucx {

void useUcxTransports(const std::string& which) {
  if (which == "tcp") {
    ::setenv("UCX_TLS", "tcp", 1);
    ::setenv("UCX_NET_DEVICES", "lo", 1);
  } else {
    ::setenv("UCX_TLS", "posix,sysv,cma", 1);
    ::unsetenv("UCX_NET_DEVICES");
  }
}

Config ucxConfig(size_t chunkBytes, int slots) {
  Config c;
  c.chunkBytes = chunkBytes;
  c.fifoSlots = slots;
  c.transport = "ucx";
  c.timeoutSeconds = 20;
  return c;
}

namespace {

std::vector<transport::PeerInfo> namedPeers(int nranks, const char* prefix) {
  std::vector<transport::PeerInfo> peers(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) {
    peers[static_cast<size_t>(r)].rank = r;
    std::snprintf(peers[static_cast<size_t>(r)].hostName, sizeof peers[0].hostName, "%s%d", prefix, r);
  }
  return peers;
}

}  // namespace

World connectUcxWorld(int nranks, const Config& config, const std::function<Config(int)>& configOf) {
  World world;
  world.transports.resize(static_cast<size_t>(nranks));
  world.statuses.resize(static_cast<size_t>(nranks));
  const std::vector<transport::PeerInfo> peers = namedPeers(nranks, "host");
  std::vector<Config> configs(static_cast<size_t>(nranks), config);
  if (configOf)
    for (int r = 0; r < nranks; ++r) configs[static_cast<size_t>(r)] = configOf(r);
  const std::string tag = shm::uniqueJobTag();
  auto group = LocalBootstrapGroup::create(nranks);
  runRankThreads(nranks, [&](int rank) {
    LocalBootstrap boot(group, rank);
    transport::SetupContext ctx;
    ctx.rank = rank;
    ctx.nranks = nranks;
    ctx.peers = &peers;
    ctx.jobTag = tag;
    ctx.config = &configs[static_cast<size_t>(rank)];
    ctx.bootstrap = &boot;
    ctx.wait = shm::waitFor(20);
    auto t = transport::ucxTransportFactory().create();
    Status s = t->connect(ctx, shm::allPeersOf(rank, nranks));
    world.statuses[static_cast<size_t>(rank)] = s;
    if (s.isOk()) world.transports[static_cast<size_t>(rank)] = std::move(t);
  });
  return world;
}

std::string connectForked(bootstrap::Bootstrap& boot, int rank, int nranks, const Config& cfg,
                          std::vector<transport::PeerInfo>& peers, std::unique_ptr<transport::Transport>* out) {
  peers = namedPeers(nranks, "forkhost");
  // Real pids: endpoints without UCX error handling watch the peer's process.
  std::vector<int32_t> pids(static_cast<size_t>(nranks), 0);
  pids[static_cast<size_t>(rank)] = ::getpid();
  if (Status s = boot.allGather(pids.data(), sizeof(int32_t), shm::waitFor(20)); !s.isOk()) return s.message();
  for (int r = 0; r < nranks; ++r) peers[static_cast<size_t>(r)].pid = pids[static_cast<size_t>(r)];
  transport::SetupContext ctx;
  ctx.rank = rank;
  ctx.nranks = nranks;
  ctx.peers = &peers;
  ctx.jobTag = "ucxfail";
  ctx.config = &cfg;
  ctx.bootstrap = &boot;
  ctx.wait = shm::waitFor(20);
  auto t = transport::ucxTransportFactory().create();
  Status s = t->connect(ctx, shm::allPeersOf(rank, nranks));
  if (!s.isOk()) return "connect: " + s.message();
  *out = std::move(t);
  return "";
}

}  // namespace loom::testing::ucx
