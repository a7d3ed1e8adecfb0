#include "tests/unit/transports/verbs/verbs_test_util.h"

#include <chrono>
#include <cstdio>
#include <thread>

#include "tests/unit/transports/shm/shm_test_util.h"
#include "tests/support/local_bootstrap.h"
#include "tests/support/rank_threads.h"
#include "transports/verbs/verbs_transport.h"

namespace loom::testing::verbs {

Config verbsConfig(size_t chunkBytes, int slots) {
  Config c;
  c.chunkBytes = chunkBytes;
  c.fifoSlots = slots;
  c.timeoutSeconds = 20;
  return c;
}

std::string VerbsWorld::firstError() const {
  for (size_t r = 0; r < statuses.size(); ++r)
    if (!statuses[r].isOk()) return "rank " + std::to_string(r) + ": " + statuses[r].message();
  return "";
}

VerbsWorld connectVerbsWorld(int nranks, const Config& config) {
  VerbsWorld world;
  world.fabric = transport::verbs::emulated::Fabric::create();
  world.transports.resize(static_cast<size_t>(nranks));
  world.statuses.resize(static_cast<size_t>(nranks));
  world.peers.resize(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) {
    auto& p = world.peers[static_cast<size_t>(r)];
    p.rank = r;
    p.hostHash = 1000 + static_cast<uint64_t>(r);  // every rank its own host
    std::snprintf(p.hostName, sizeof p.hostName, "host%d", r);
  }
  auto group = LocalBootstrapGroup::create(nranks);
  runRankThreads(nranks, [&](int rank) {
    LocalBootstrap boot(group, rank);
    transport::SetupContext ctx;
    ctx.rank = rank;
    ctx.nranks = nranks;
    ctx.peers = &world.peers;
    ctx.jobTag = shm::uniqueJobTag();
    ctx.config = &config;
    ctx.bootstrap = &boot;
    ctx.wait = shm::waitFor(20);
    auto t = transport::createVerbsTransport(world.fabric->provider(rank));
    Status s = t->connect(ctx, shm::allPeersOf(rank, nranks));
    world.statuses[static_cast<size_t>(rank)] = s;
    if (s.isOk()) world.transports[static_cast<size_t>(rank)] = std::move(t);
  });
  return world;
}

std::vector<std::string> exchangeAll(VerbsWorld& world, uint64_t chunks,
                                     const std::function<size_t(int, int, uint64_t)>& bytesOf, double seconds) {
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
          auto& conn = t.sendTo(peer, transport::Protocol::kSimple);
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
          auto& conn = t.recvFrom(peer, transport::Protocol::kSimple);
          if (conn.tryAcquire(&data, &n)) {
            size_t want = bytesOf(peer, rank, r);
            std::string bad = n != want ? "chunk " + std::to_string(r) + " from rank " + std::to_string(peer) +
                                              " has " + std::to_string(n) + " bytes, expected " + std::to_string(want)
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

}  // namespace loom::testing::verbs
