// The one "world" of the transport tests: N ranks, each a thread of this
// process, connected over one backend (shared memory, TCP, UCX or the verbs
// transport on the emulated fabric), plus the same backends with ranks as
// forked processes, and a traffic driver that works on any of them. The
// backend-specific tests and the conformance suite (conformance/) use it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "common/config.h"
#include "common/status.h"
#include "transports/transport.h"

namespace loom::transport::verbs::emulated { class Fabric; }

namespace loom::testing::transports {

enum class Backend { kShm, kTcp, kUcx, kVerbs };
const char* backendName(Backend backend);
// Whether this test binary was built with `backend` (UCX only where UCX was
// found; verbs only with the emulated fabric).
bool backendBuilt(Backend backend);

// Small, quick settings per backend (shared memory: shm_test_util.h's
// smallConfig); callers adjust fields.
// Loopback only, so tests never depend on the machine's other interfaces.
Config tcpConfig(size_t chunkBytes, int slots, int sockets);
Config ucxConfig(size_t chunkBytes, int slots);
// LOOM_TRANSPORT unset (per-peer choice).
Config verbsConfig(size_t chunkBytes, int slots);
// The backend's settings above (TCP with 2 sockets per peer).
Config backendConfig(Backend backend, size_t chunkBytes, int slots);

// UCX transport sets: "tcp" (UCX_TLS=tcp, UCX_NET_DEVICES=lo) and "sm"
// (UCX_TLS=posix,sysv,cma; shared memory). Sets the UCX_* variables of this
// process; UCX reads them when a context is created.
void useUcxTransports(const std::string& which);

// Rank r is "host<r>" (TCP, UCX, verbs; verbs also gives each rank its own
// host hash and emulated device r); shared-memory ranks share one host.
struct World {
  Backend backend = Backend::kShm;
  std::shared_ptr<transport::verbs::emulated::Fabric> fabric;  // kVerbs only
  std::vector<transport::PeerInfo> peers;
  std::vector<Config> configs;  // per rank; outlive the transports
  std::vector<std::unique_ptr<transport::Transport>> transports;  // null where connect() failed
  std::vector<Status> statuses;  // each rank's connect()
  bool allOk() const;
  std::string firstError() const;  // "" when every rank connected
};

// Every rank connects its transport to peersOf(rank) (default: every other
// rank), one thread per rank, with `config` or configOf(rank); `jobTag` names
// the communicator (shared-memory segments are named after it).
World connectWorld(Backend backend, int nranks, const std::string& jobTag, const Config& config,
                   const std::function<std::vector<int>(int)>& peersOf = nullptr,
                   const std::function<Config(int)>& configOf = nullptr);

// In a forked rank (shm_fork_harness.h's runForkedRanks): `backend`'s
// transport connected with every other rank, with the ranks' real pids in
// `peers` (host "forkhost<r>" for TCP and UCX). Not kVerbs: the emulated
// fabric lives in one process. Returns "" and the transport, or what failed.
std::string connectForkedRank(Backend backend, bootstrap::Bootstrap& boot, int rank, int nranks,
                              const std::string& jobTag, const Config& config,
                              std::vector<transport::PeerInfo>& peers, std::unique_ptr<transport::Transport>* out);

// Sends `chunks` patterned chunks (shm_test_util.h) from every rank to every
// other rank over `proto` and receives and checks them, each rank driving all
// its connections from one thread with tryAcquire (so no direction can stall
// another). bytesOf(src, dst, chunk) gives each chunk's size. Returns per
// rank "" or the first problem.
std::vector<std::string> exchangeAll(World& world, uint64_t chunks,
                                     const std::function<size_t(int, int, uint64_t)>& bytesOf, double seconds,
                                     transport::Protocol proto = transport::Protocol::kSimple);

}  // namespace loom::testing::transports
