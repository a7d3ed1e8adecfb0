// Bootstrap::connect: one rank's side of the rendezvous with the root.
//
//   1. connect to the root (retrying: it may not listen yet)
//   2. listen on the interface that reached the root, port 0
//   3. send Hello{secret, rank, nranks, listen address}
//   4. receive the address table, or the root's error (missing ranks, a
//      rejected hello), which is returned verbatim
//   5. form the ring (socket_bootstrap.cc)
#include <memory>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/socket.h"
#include "bootstrap/socket_bootstrap.h"
#include "bootstrap/wire.h"
#include "common/format.h"

namespace loom::bootstrap {
namespace {

// Steps 3 and 4 over an open root connection. `rootSpoke` tells the caller
// that the failure is the root's own report, complete as it stands.
Result<std::vector<SockAddr>> exchangeWithRoot(const Socket& root, const std::string& rootText,
                                               const Hello& hello, const WaitContext& wait, bool& rootSpoke) {
  rootSpoke = false;
  LOOM_TRY(sendFrame(root.fd(), MsgType::kHello, encodeHello(hello), wait, "the hello to the root at " + rootText));
  Result<Frame> frame = recvFrame(root.fd(), wait, "the address table from the root at " + rootText);
  if (!frame.isOk()) return frame.status();
  if (frame.value().type == MsgType::kError) {
    Result<RemoteError> error = decodeRemoteError(frame.value().payload);
    if (!error.isOk()) return error.status().withContext("from the root at " + rootText + ": ");
    rootSpoke = true;
    return Status(error.value().code, error.value().text);
  }
  if (frame.value().type != MsgType::kAddressTable) {
    return makeError(Code::kRemoteError, "the root at %s sent message type %u instead of the address table",
                     rootText.c_str(), static_cast<unsigned>(frame.value().type));
  }
  return decodeAddressTable(frame.value().payload, hello.nranks);
}

}  // namespace

Result<std::unique_ptr<Bootstrap>> Bootstrap::connect(const UniqueId& id, int rank, int nranks,
                                                      const WaitContext& wait, const Logger& log) {
  LOOM_ENFORCE(nranks >= 1 && nranks <= kMaxRanks, Code::kInvalidArgument,
               "bootstrap: nranks %d out of range [1, %d]", nranks, kMaxRanks);
  LOOM_ENFORCE(rank >= 0 && rank < nranks, Code::kInvalidArgument, "bootstrap: rank %d out of range [0, %d)",
               rank, nranks);
  LOOM_ENFORCE(id.rootPort != 0, Code::kInvalidArgument,
               "bootstrap: the unique id's root port is 0 (was it made by loomGetUniqueId?)");
  Result<SockAddr> rootAddr = SockAddr::fromNumeric(id.rootHost, id.rootPort);
  if (!rootAddr.isOk()) return rootAddr.status().withContext("bootstrap: the unique id's root host: ");
  const std::string rootText = rootAddr.value().toString();
  const std::string prefix = strprintf("bootstrap: rank %d of %d: ", rank, nranks);

  Result<Socket> root = connectWithRetry(rootAddr.value(), wait, "the root at " + rootText);
  if (!root.isOk()) return root.status().withContext(prefix);
  // Listen where the root was reached from: that interface routes to the
  // root's network, which is where the other ranks are.
  Result<SockAddr> local = localAddressOf(root.value().fd());
  if (!local.isOk()) return local.status().withContext(prefix);
  SockAddr listenAt = local.value();
  listenAt.setPort(0);
  Result<Socket> listener = listenOn(listenAt, /*reuseAddr=*/false);
  if (!listener.isOk()) return listener.status().withContext(prefix);
  Result<SockAddr> listening = localAddressOf(listener.value().fd());
  if (!listening.isOk()) return listening.status().withContext(prefix);

  Hello hello{id.secret, rank, nranks, listening.value()};
  bool rootSpoke = false;
  Result<std::vector<SockAddr>> table = exchangeWithRoot(root.value(), rootText, hello, wait, rootSpoke);
  if (!table.isOk()) {
    // The root's report already names the job's missing or conflicting ranks.
    if (rootSpoke) return table.status();
    LOOM_WARN(log, kSubsysBootstrap, "%s%s", prefix.c_str(), table.status().message().c_str());
    return table.status().withContext(prefix);
  }
  root.value().close();
  LOOM_INFO(log, kSubsysBootstrap, "%sgot the address table from the root at %s; listening on %s", prefix.c_str(),
            rootText.c_str(), listening.value().toString().c_str());
  RingIdentity self{id.secret, rank, nranks};
  return SocketBootstrap::formRing(self, std::move(listener.value()), table.value(), wait, log);
}

}  // namespace loom::bootstrap
