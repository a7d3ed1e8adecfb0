// LOOM_DUMP_ON_SIGNAL: a signal (e.g. SIGUSR1) makes every communicator of the
// process that asked for it dump its flight recorder.
//
// The signal handler only writes one byte (the signal number) to a pipe,
// which is async-signal-safe; a dumper thread reads the pipe and calls the
// registered dump functions outside signal context. The handler is installed
// while at least one communicator is registered for its signal; the previous
// disposition is restored (and the thread joined) when the last one leaves,
// so no thread outlives the communicators.
#pragma once

#include <functional>
#include <string>

namespace loom {

// "SIGUSR1", "USR1" or a number; 0 when `text` names no catchable signal.
int parseSignal(const std::string& text);

// Calls dump(signo) on the dumper thread whenever `signo` arrives, until
// removeSignalDump(token). Returns a token, or -1 (with *error) if the
// handler or the thread could not be set up. removeSignalDump waits for a
// dump in progress, so `dump` may use its owner until then.
int addSignalDump(int signo, std::function<void(int)> dump, std::string* error);
void removeSignalDump(int token);

}  // namespace loom
