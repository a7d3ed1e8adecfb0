// Helpers for the TCP transport tests: a world of TCP transports whose ranks
// are threads of this process (LocalBootstrap), and a traffic driver that
// moves patterned chunks between every pair of ranks in both directions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/status.h"
#include "transports/transport.h"

namespace loom::testing::tcp {

// Loopback only, so tests never depend on the machine's other interfaces.
Config loopbackConfig(size_t chunkBytes, int slots, int sockets);

struct TcpWorld {
  std::vector<std::unique_ptr<transport::Transport>> transports;
  std::vector<Status> statuses;
  std::string firstError() const;
};
// Connects `nranks` TCP transports (every rank with every other), one thread each.
TcpWorld connectTcpWorld(int nranks, const Config& config);

// Sends `chunks` chunks from every rank to every other rank and receives and
// checks them, each rank driving all its connections from one thread with
// tryAcquire (so no direction can stall another). bytesOf(src, dst, chunk)
// gives each chunk's size. Returns per-rank "" or the first problem.
std::vector<std::string> exchangeAll(TcpWorld& world, uint64_t chunks,
                                     const std::function<size_t(int, int, uint64_t)>& bytesOf, double seconds);

}  // namespace loom::testing::tcp
