// The root's event loop, run on its own detached thread by startRoot().
//
// One thread serves every connection with poll(): connections are admitted
// only after presenting the job secret in a Hello within the hello timeout;
// strangers are logged (LOOM_WARN, with their address and what was wrong; the
// first 32, then only counted), told why in one Error frame sent without
// waiting, and closed. At most 256 connections may await their hello; beyond
// that the oldest is evicted, so a flood of idle connections cannot lock the
// real ranks out. Nothing a stranger sends can block the thread. When all
// nranks ranks are present each gets the address table; when the deadline
// passes first each present rank gets an error naming the missing ranks.
// Either way the thread then closes everything and exits.
#pragma once

#include <string>

#include "bootstrap/bootstrap.h"
#include "bootstrap/socket.h"
#include "common/log.h"
#include "common/wait.h"

namespace loom::bootstrap {

// Everything the root thread uses, owned by it.
struct RootSettings {
  Socket listener;
  std::string addressText;  // "10.0.0.1:29500", for messages
  Secret secret{};
  Deadline deadline;
  double timeoutSeconds = 0;  // what `deadline` was set from, for messages
  double helloTimeoutSeconds = 0;
  Logger log;
};

// Runs the rendezvous to completion or timeout; never throws.
void runRoot(RootSettings settings);

}  // namespace loom::bootstrap
