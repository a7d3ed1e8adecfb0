// loomrun: starts the local ranks of a Loom (or PyTorch) job. See options.h
// for the command line and supervisor.h for how the job is run and stopped.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>

#include "launcher/job_environment.h"
#include "launcher/options.h"
#include "launcher/signal_channel.h"
#include "launcher/supervisor.h"

namespace {

// A closed stdin/stdout/stderr would make the next pipe take its number, and
// the dup2 onto it in the child would then clobber the pipe itself.
void openStandardDescriptors() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (fcntl(fd, F_GETFD) < 0) open("/dev/null", O_RDWR);
  }
}

int launch(int argc, const char* const* argv) {
  using namespace loom::launcher;
  loom::Result<LaunchOptions> opts = parseOptions(argc, argv);
  if (!opts.isOk()) {
    std::fprintf(stderr, "loomrun: %s\nTry 'loomrun --help' for usage.\n",
                 opts.status().message().c_str());
    return kExitUsage;
  }
  if (opts->showHelp) {
    std::fputs(usageText().c_str(), stdout);
    return 0;
  }
  loom::Result<JobSettings> job = resolveJobSettings(opts.value());
  if (!job.isOk()) {
    std::fprintf(stderr, "loomrun: %s\n", job.status().message().c_str());
    return job.status().code() == loom::Code::kSystemError ? 1 : kExitUsage;
  }
  auto signals = SignalChannel::open();
  if (!signals.isOk()) {
    std::fprintf(stderr, "loomrun: %s\n", signals.status().message().c_str());
    return 1;
  }
  Supervisor supervisor(opts.value(), job.value(), *signals.value());
  return supervisor.run();
}

}  // namespace

int main(int argc, char** argv) {
  openStandardDescriptors();
  return launch(argc, argv);
}
