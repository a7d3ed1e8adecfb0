#include "bootstrap/root.h"

#include <exception>
#include <thread>

#include "bootstrap/root_server.h"
#include "bootstrap/sock_addr.h"
#include "bootstrap/socket.h"
#include "common/format.h"

namespace loom::bootstrap {

Result<UniqueId> startRootWithOptions(const RootOptions& options) {
  LOOM_ENFORCE(options.timeoutSeconds > 0, Code::kInvalidArgument,
               "bootstrap root: timeout %g s must be positive", options.timeoutSeconds);
  LOOM_ENFORCE(options.helloTimeoutSeconds > 0, Code::kInvalidArgument,
               "bootstrap root: hello timeout %g s must be positive", options.helloTimeoutSeconds);
  std::string host = options.host.empty() ? defaultHostAddress() : options.host;
  Result<SockAddr> bindAddr = SockAddr::fromNumeric(host, options.port);
  if (!bindAddr.isOk()) return bindAddr.status().withContext("bootstrap root: host: ");
  Result<Socket> listener = listenOn(bindAddr.value(), /*reuseAddr=*/true);
  if (!listener.isOk()) return listener.status().withContext("bootstrap root: ");
  Result<SockAddr> bound = localAddressOf(listener.value().fd());
  if (!bound.isOk()) return bound.status().withContext("bootstrap root: ");

  UniqueId id;
  id.rootHost = bound.value().host();
  id.rootPort = bound.value().port();
  id.secret = options.secret;

  // The thread owns everything it touches: the caller may return, destroy its
  // logger or even start another root before this one finishes.
  RootSettings settings;
  settings.listener = std::move(listener.value());
  settings.addressText = bound.value().toString();
  settings.secret = options.secret;
  settings.deadline = Deadline::after(options.timeoutSeconds);
  settings.timeoutSeconds = options.timeoutSeconds;
  settings.helloTimeoutSeconds = options.helloTimeoutSeconds;
  settings.log = options.log;
  try {
    std::thread([s = std::move(settings)]() mutable { runRoot(std::move(s)); }).detach();
  } catch (const std::exception& e) {
    return makeError(Code::kSystemError, "bootstrap root: cannot start its thread: %s", e.what());
  }
  LOOM_INFO(options.log, kSubsysBootstrap, "bootstrap root listening on %s (timeout %g s)",
            bound.value().toString().c_str(), options.timeoutSeconds);
  return id;
}

Result<UniqueId> startRoot(const std::string& host, uint16_t port, const Secret& secret,
                           double timeoutSeconds, const Logger& log) {
  RootOptions options;
  options.host = host;
  options.port = port;
  options.secret = secret;
  options.timeoutSeconds = timeoutSeconds;
  options.log = log;
  return startRootWithOptions(options);
}

}  // namespace loom::bootstrap
