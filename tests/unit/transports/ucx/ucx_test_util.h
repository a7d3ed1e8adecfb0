// Helpers for the UCX transport tests: UCX's own settings for the two
// transport sets the tests cover, and a world of UCX transports whose ranks
// are threads of this process (LocalBootstrap) or forked processes.
// Traffic is driven by the TCP tests' exchangeAll (tcp_test_util.h), which
// works on any Transport.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "common/config.h"
#include "common/status.h"
#include "tests/unit/transports/tcp/tcp_test_util.h"
#include "transports/transport.h"

namespace loom::testing::ucx {

// UCX transport sets under test: "tcp" (UCX_TLS=tcp, UCX_NET_DEVICES=lo) and
// "sm" (UCX_TLS=posix,sysv,cma; shared memory). Sets the UCX_* variables of
// this process; UCX reads them when a context is created.
void useUcxTransports(const std::string& which);

Config ucxConfig(size_t chunkBytes, int slots);

// The container is transport-neutral; here it holds UCX transports.
using World = tcp::TcpWorld;
// Connects `nranks` UCX transports (every rank with every other), one thread
// each; configOf(rank) may give ranks different settings.
World connectUcxWorld(int nranks, const Config& config, const std::function<Config(int)>& configOf = nullptr);

// In a forked rank: a UCX transport connected with every other rank.
std::string connectForked(bootstrap::Bootstrap& boot, int rank, int nranks, const Config& cfg,
                          std::vector<transport::PeerInfo>& peers, std::unique_ptr<transport::Transport>* out);

}  // namespace loom::testing::ucx
