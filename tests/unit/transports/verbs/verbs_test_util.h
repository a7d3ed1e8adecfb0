// Helpers for the verbs transport tests: a world of verbs transports over the
// emulated fabric (transports/verbs/emulated_verbs.h) whose ranks are threads
// of this process, each on its own emulated host, and a traffic driver.
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
#include "transports/verbs/emulated_verbs.h"

namespace loom::testing::verbs {

// Small chunks so tests are quick; LOOM_TRANSPORT unset (per-peer choice).
Config verbsConfig(size_t chunkBytes, int slots);

struct VerbsWorld {
  std::shared_ptr<transport::verbs::emulated::Fabric> fabric;
  std::vector<transport::PeerInfo> peers;  // rank r on host "host<r>"
  std::vector<std::unique_ptr<transport::Transport>> transports;
  std::vector<Status> statuses;
  std::string firstError() const;
};

// Connects `nranks` verbs transports (every rank with every other), one
// thread each; rank r opens emulated device r.
VerbsWorld connectVerbsWorld(int nranks, const Config& config);

// Moves `chunks` chunks from every rank to every other, each rank driving all
// its connections from one thread with tryAcquire; bytesOf(src, dst, chunk)
// gives each chunk's size. Returns per rank "" or the first problem.
std::vector<std::string> exchangeAll(VerbsWorld& world, uint64_t chunks,
                                     const std::function<size_t(int, int, uint64_t)>& bytesOf, double seconds);

}  // namespace loom::testing::verbs
