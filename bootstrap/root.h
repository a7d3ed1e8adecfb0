// The root's knobs beyond startRoot(): tests shorten the hello timeout to
// check that silent connections are dropped without waiting seconds.
#pragma once

#include <string>

#include "bootstrap/bootstrap.h"
#include "common/log.h"

namespace loom::bootstrap {

// How long an accepted connection may take to present the job secret.
constexpr double kDefaultHelloTimeoutSeconds = 5.0;

struct RootOptions {
  std::string host;  // numeric; empty picks defaultHostAddress()
  uint16_t port = 0;  // 0 lets the kernel pick a free port
  Secret secret{};
  double timeoutSeconds = 300.0;  // whole rendezvous, counted from the start
  double helloTimeoutSeconds = kDefaultHelloTimeoutSeconds;
  Logger log;
};

// startRoot() with every option; the same contract.
Result<UniqueId> startRootWithOptions(const RootOptions& options);

}  // namespace loom::bootstrap
