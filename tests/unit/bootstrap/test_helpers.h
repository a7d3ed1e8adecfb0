// Helpers shared by the bootstrap tests: loggers, data patterns, a rank body
// that exercises allGather/barrier and checks every slot, and a fork-based
// process launcher.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "common/log.h"
#include "common/wait.h"

namespace loom::bootstrap::testing {

// Logs nothing (tests that provoke warnings would otherwise clutter output).
Logger quietLogger();

// WARN lines go to a temporary file that text() reads back. The file is never
// closed: a detached root thread may still hold a copy of the logger.
struct CapturedLog {
  std::FILE* file = nullptr;
  Logger logger;
  std::string text() const;
};
CapturedLog captureLog();

// The byte rank `rank` contributes at `index` of its slot; `salt` separates
// calls and communicators so that misrouted data cannot pass the check.
uint8_t pattern(int rank, size_t index, int salt);

// Connects as `rank`, checks rank()/nranks(), runs allGathers of several
// sizes (one larger than a socket buffer) and barriers, verifying every slot
// against pattern(). Returns "" on success, else what went wrong.
std::string runRank(const UniqueId& id, int rank, int nranks, int salt, double waitSeconds);

// Forks one child per rank running body(rank) and _exit()ing with its
// result; returns each child's exit status (128 + signal if killed, -1 if it
// had to be killed at the timeout).
std::vector<int> runRankProcesses(int nranks, const std::function<int(int)>& body, double timeoutSeconds);

double secondsSince(Clock::time_point start);

}  // namespace loom::bootstrap::testing
