#include "tests/unit/transports/transport_world.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "common/format.h"
#include "tests/support/local_bootstrap.h"
#include "tests/support/rank_threads.h"
#include "tests/unit/transports/shm/shm_test_util.h"
#include "transports/shm/shm_transport.h"
#if LOOM_TEST_HAVE_TCP
#include "transports/tcp/tcp_transport.h"
#endif
#if LOOM_TEST_HAVE_UCX
#include "transports/ucx/ucx_transport.h"
#endif
#if LOOM_TEST_HAVE_VERBS
#include "transports/verbs/emulated_verbs.h"
#include "transports/verbs/verbs_transport.h"
#endif

namespace loom::testing::transports {

const char* backendName(Backend backend) {
  switch (backend) {
    case Backend::kShm: return "shm";
    case Backend::kTcp: return "tcp";
    case Backend::kUcx: return "ucx";
    case Backend::kVerbs: return "verbs";
  }
  return "?";
}

bool backendBuilt(Backend backend) {
  switch (backend) {
    case Backend::kShm: return true;
    case Backend::kTcp: return LOOM_TEST_HAVE_TCP != 0;
    case Backend::kUcx: return LOOM_TEST_HAVE_UCX != 0;
    case Backend::kVerbs: return LOOM_TEST_HAVE_VERBS != 0;
  }
  return false;
}

Config tcpConfig(size_t chunkBytes, int slots, int sockets) {
  Config c;
  c.chunkBytes = chunkBytes;
  c.fifoSlots = slots;
  c.socketsPerPeer = sockets;
  c.transport = "tcp";
  c.socketIfname = "=lo";
  c.timeoutSeconds = 20;
  return c;
}

Config ucxConfig(size_t chunkBytes, int slots) {
  Config c;
  c.chunkBytes = chunkBytes;
  c.fifoSlots = slots;
  c.transport = "ucx";
  c.timeoutSeconds = 20;
  return c;
}

Config verbsConfig(size_t chunkBytes, int slots) {
  Config c;
  c.chunkBytes = chunkBytes;
  c.fifoSlots = slots;
  c.timeoutSeconds = 20;
  return c;
}

Config backendConfig(Backend backend, size_t chunkBytes, int slots) {
  switch (backend) {
    case Backend::kShm: return shm::smallConfig(chunkBytes, slots);
    case Backend::kTcp: return tcpConfig(chunkBytes, slots, 2);
    case Backend::kUcx: return ucxConfig(chunkBytes, slots);
    case Backend::kVerbs: return verbsConfig(chunkBytes, slots);
  }
  return {};
}

void useUcxTransports(const std::string& which) {
  if (which == "tcp") {
    ::setenv("UCX_TLS", "tcp", 1);
    ::setenv("UCX_NET_DEVICES", "lo", 1);
  } else {
    ::setenv("UCX_TLS", "posix,sysv,cma", 1);
    ::unsetenv("UCX_NET_DEVICES");
  }
}

bool World::allOk() const {
  for (const Status& s : statuses)
    if (!s.isOk()) return false;
  return true;
}

std::string World::firstError() const {
  for (size_t r = 0; r < statuses.size(); ++r)
    if (!statuses[r].isOk()) return strprintf("rank %zu: %s", r, statuses[r].message().c_str());
  return {};
}

namespace {

// Ranks named "<prefix><r>"; shared-memory ranks keep one (unnamed) host.
std::vector<transport::PeerInfo> peerInfos(Backend backend, int nranks, const char* prefix) {
  std::vector<transport::PeerInfo> peers(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) {
    auto& p = peers[static_cast<size_t>(r)];
    p.rank = r;
    if (backend == Backend::kShm) continue;
    std::snprintf(p.hostName, sizeof p.hostName, "%s%d", prefix, r);
    if (backend == Backend::kVerbs) p.hostHash = 1000 + static_cast<uint64_t>(r);  // every rank its own host
  }
  return peers;
}

// A new, unconnected transport of `backend` for `rank` (null if not built).
std::unique_ptr<transport::Transport> createTransport(World* world, Backend backend, int rank) {
  (void)world;
  (void)rank;
  switch (backend) {
    case Backend::kShm: return transport::shmTransportFactory().create();
    case Backend::kTcp:
#if LOOM_TEST_HAVE_TCP
      return transport::tcpTransportFactory().create();
#else
      return nullptr;
#endif
    case Backend::kUcx:
#if LOOM_TEST_HAVE_UCX
      return transport::ucxTransportFactory().create();
#else
      return nullptr;
#endif
    case Backend::kVerbs:
#if LOOM_TEST_HAVE_VERBS
      if (world) return transport::createVerbsTransport(world->fabric->provider(rank));
#endif
      return nullptr;
  }
  return nullptr;
}

}  // namespace

World connectWorld(Backend backend, int nranks, const std::string& jobTag, const Config& config,
                   const std::function<std::vector<int>(int)>& peersOf,
                   const std::function<Config(int)>& configOf) {
  World world;
  world.backend = backend;
  world.transports.resize(static_cast<size_t>(nranks));
  world.statuses.resize(static_cast<size_t>(nranks));
  world.peers = peerInfos(backend, nranks, "host");
  world.configs.assign(static_cast<size_t>(nranks), config);
  if (configOf)
    for (int r = 0; r < nranks; ++r) world.configs[static_cast<size_t>(r)] = configOf(r);
#if LOOM_TEST_HAVE_VERBS
  if (backend == Backend::kVerbs) world.fabric = transport::verbs::emulated::Fabric::create();
#endif
  if (!backendBuilt(backend)) {
    for (auto& s : world.statuses)
      s = Status(Code::kInvalidUsage, strprintf("backend %s is not built into this test", backendName(backend)));
    return world;
  }
  auto group = LocalBootstrapGroup::create(nranks);
  runRankThreads(nranks, [&](int rank) {
    LocalBootstrap boot(group, rank);
    transport::SetupContext ctx;
    ctx.rank = rank;
    ctx.nranks = nranks;
    ctx.peers = &world.peers;
    ctx.jobTag = jobTag;
    ctx.config = &world.configs[static_cast<size_t>(rank)];
    ctx.bootstrap = &boot;
    ctx.wait = shm::waitFor(20);
    auto t = createTransport(&world, backend, rank);
    Status s = t->connect(ctx, peersOf ? peersOf(rank) : shm::allPeersOf(rank, nranks));
    world.statuses[static_cast<size_t>(rank)] = s;
    if (s.isOk()) world.transports[static_cast<size_t>(rank)] = std::move(t);
  });
  return world;
}

std::string connectForkedRank(Backend backend, bootstrap::Bootstrap& boot, int rank, int nranks,
                              const std::string& jobTag, const Config& config,
                              std::vector<transport::PeerInfo>& peers, std::unique_ptr<transport::Transport>* out) {
  if (backend == Backend::kVerbs) return "the emulated verbs fabric cannot span processes";
  if (!backendBuilt(backend)) return strprintf("backend %s is not built into this test", backendName(backend));
  peers = peerInfos(backend, nranks, "forkhost");
  // Real pids: a backend may watch its peers' processes.
  std::vector<int32_t> pids(static_cast<size_t>(nranks), 0);
  pids[static_cast<size_t>(rank)] = ::getpid();
  if (Status s = boot.allGather(pids.data(), sizeof(int32_t), shm::waitFor(20)); !s.isOk()) return s.message();
  for (int r = 0; r < nranks; ++r) peers[static_cast<size_t>(r)].pid = pids[static_cast<size_t>(r)];
  transport::SetupContext ctx;
  ctx.rank = rank;
  ctx.nranks = nranks;
  ctx.peers = &peers;
  ctx.jobTag = jobTag;
  ctx.config = &config;
  ctx.bootstrap = &boot;
  ctx.wait = shm::waitFor(20);
  auto t = createTransport(nullptr, backend, rank);
  Status s = t->connect(ctx, shm::allPeersOf(rank, nranks));
  if (!s.isOk()) return "connect: " + s.message();
  *out = std::move(t);
  return "";
}

std::vector<std::string> exchangeAll(World& world, uint64_t chunks,
                                     const std::function<size_t(int, int, uint64_t)>& bytesOf, double seconds,
                                     transport::Protocol proto) {
  const int nranks = static_cast<int>(world.transports.size());
  std::vector<std::string> problems(static_cast<size_t>(nranks));
  runRankThreads(nranks, [&](int rank) {
    transport::Transport& t = *world.transports[static_cast<size_t>(rank)];
    std::vector<uint64_t> sent(static_cast<size_t>(nranks), 0), received(static_cast<size_t>(nranks), 0);
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    for (;;) {
      bool done = true, moved = false;
      for (int peer = 0; peer < nranks; ++peer) {
        if (peer == rank) continue;
        auto& s = sent[static_cast<size_t>(peer)];
        if (s < chunks) {
          std::byte* slot = nullptr;
          auto& conn = t.sendTo(peer, proto);
          if (conn.tryAcquire(&slot)) {
            size_t n = bytesOf(rank, peer, s);
            shm::fillPattern(slot, n, rank, peer, s);
            conn.commit(n);
            ++s;
            moved = true;
          }
        }
        auto& r = received[static_cast<size_t>(peer)];
        if (r < chunks) {
          const std::byte* data = nullptr;
          size_t n = 0;
          auto& conn = t.recvFrom(peer, proto);
          if (conn.tryAcquire(&data, &n)) {
            size_t want = bytesOf(peer, rank, r);
            std::string bad = n != want ? strprintf("chunk %llu from rank %d has %zu bytes, expected %zu",
                                                    static_cast<unsigned long long>(r), peer, n, want)
                                        : shm::checkPattern(data, n, peer, rank, r);
            conn.release();
            if (!bad.empty()) {
              problems[static_cast<size_t>(rank)] = bad;
              return;
            }
            ++r;
            moved = true;
          }
        }
        done = done && s == chunks && r == chunks;
      }
      if (done) return;
      if (!moved) {
        if (std::chrono::steady_clock::now() > end) {
          problems[static_cast<size_t>(rank)] = "timed out";
          return;
        }
        std::this_thread::yield();
      }
    }
  });
  return problems;
}

}  // namespace loom::testing::transports
