// The LOOM_DEBUG=INFO topology log: the first communicator of a process that
// logs at INFO (subsystem INIT) detects the machine and prints it, once per
// process however many communicators follow.
#pragma once

#include "common/log.h"

namespace loom::topology {

// Cheap when INFO/INIT is off (nothing is detected); thread safe.
void logTopologyOnce(const Logger& log);

}  // namespace loom::topology
