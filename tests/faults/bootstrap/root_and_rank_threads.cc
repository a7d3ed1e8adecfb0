#include "tests/faults/bootstrap/root_and_rank_threads.h"

#include "bootstrap/wire.h"
#include "common/format.h"
#include "tests/support/rank_threads.h"

namespace loom::bootstrap::testing {

TestRoot startTestRoot(double timeoutSeconds, double helloTimeoutSeconds) {
  TestRoot root;
  root.log = captureLog();
  RootOptions options;
  options.host = "127.0.0.1";
  options.secret = randomSecret();
  options.timeoutSeconds = timeoutSeconds;
  options.helloTimeoutSeconds = helloTimeoutSeconds;
  options.log = root.log.logger;
  Result<UniqueId> id = startRootWithOptions(options);
  if (id.isOk()) {
    root.id = id.value();
    root.address = rootAddress(root.id).toString();
  }
  return root;
}

UniqueId throughProxy(const UniqueId& id, uint16_t port) {
  UniqueId out = id;
  out.rootPort = port;
  return out;
}

SockAddr rootAddress(const UniqueId& id) { return SockAddr::fromNumeric(id.rootHost, id.rootPort).value(); }

RankOutcome connectAndGather(const UniqueId& id, int rank, int nranks, double waitSeconds) {
  RankOutcome out;
  const auto start = Clock::now();
  WaitContext wait{Deadline::after(waitSeconds)};
  auto b = Bootstrap::connect(id, rank, nranks, wait, quietLogger());
  if (!b.isOk()) {
    out.status = b.status();
  } else {
    std::vector<uint8_t> data(static_cast<size_t>(nranks) * 64, 0);
    for (size_t i = 0; i < 64; ++i) data[rank * 64 + i] = pattern(rank, i, 7);
    out.status = b.value()->allGather(data.data(), 64, wait);
    for (int r = 0; r < nranks && out.status.isOk(); ++r) {
      for (size_t i = 0; i < 64; ++i) {
        if (data[r * 64 + i] != pattern(r, i, 7)) {
          out.status = makeError(Code::kInternalError, "slot %d byte %zu is wrong", r, i);
          break;
        }
      }
    }
  }
  out.seconds = secondsSince(start);
  return out;
}

std::vector<RankOutcome> runRanks(const std::vector<UniqueId>& ids, double waitSeconds) {
  const int n = static_cast<int>(ids.size());
  std::vector<RankOutcome> out(ids.size());
  loom::testing::runRankThreads(n, [&](int r) { out[r] = connectAndGather(ids[r], r, n, waitSeconds); });
  return out;
}

Result<HandPlayedRank> rendezvousByHand(const UniqueId& id, int rank, int nranks, const WaitContext& wait) {
  HandPlayedRank out;
  Result<Socket> listener = listenOn(SockAddr::fromNumeric("127.0.0.1", 0).value(), false);
  LOOM_TRY(listener.status());
  out.listener = std::move(listener.value());
  int err = 0;
  Result<Socket> root = connectOnce(rootAddress(id), wait, &err);
  LOOM_TRY(root.status());
  Hello hello{id.secret, rank, nranks, localAddressOf(out.listener.fd()).value()};
  LOOM_TRY(sendFrame(root.value().fd(), MsgType::kHello, encodeHello(hello), wait, "hello"));
  Result<Frame> frame = recvFrame(root.value().fd(), wait, "table");
  LOOM_TRY(frame.status());
  Result<std::vector<SockAddr>> table = decodeAddressTable(frame.value().payload, nranks);
  LOOM_TRY(table.status());
  out.table = table.value();
  return out;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace loom::bootstrap::testing
