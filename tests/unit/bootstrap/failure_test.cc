// Rendezvous failures: every one must end with a clear error in bounded time.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "bootstrap/bootstrap.h"
#include "bootstrap/root.h"
#include "bootstrap/socket.h"
#include "bootstrap/socket_io.h"
#include "bootstrap/wire.h"
#include "tests/support/rank_threads.h"
#include "tests/unit/bootstrap/test_helpers.h"

namespace loom::bootstrap {
namespace {

using testing::captureLog;
using testing::quietLogger;
using testing::runRank;
using testing::secondsSince;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Connects the given ranks (threads) of an nranks job and returns each one's
// connect Status.
std::vector<Status> connectRanks(const UniqueId& id, const std::vector<int>& ranks, const std::vector<int>& sizes,
                                 double waitSeconds) {
  std::vector<Status> out(ranks.size());
  loom::testing::runRankThreads(static_cast<int>(ranks.size()), [&](int i) {
    auto b = Bootstrap::connect(id, ranks[i], sizes[i], WaitContext{Deadline::after(waitSeconds)}, quietLogger());
    out[i] = b.isOk() ? Status::ok() : b.status();
  });
  return out;
}

Socket rawConnect(const UniqueId& id) {
  int err = 0;
  Result<Socket> s = connectOnce(SockAddr::fromNumeric(id.rootHost, id.rootPort).value(),
                                 WaitContext{Deadline::after(5)}, &err);
  EXPECT_TRUE(s.isOk()) << s.status().message();
  return s.isOk() ? std::move(s.value()) : Socket();
}

// Waits for the root to close `s` (reading past the drop notice it may send
// first); returns the seconds it took, or -1.
double secondsUntilClosed(const Socket& s, double limit) {
  auto start = Clock::now();
  WaitContext wait{Deadline::after(limit)};
  for (int bytes = 0; bytes < 65536; ++bytes) {
    uint8_t byte;
    Status st = recvAll(s.fd(), &byte, 1, wait, "the root closing");
    if (!st.isOk()) return st.code() == Code::kRemoteError && contains(st.message(), "closed") ? secondsSince(start) : -1;
  }
  return -1;
}

std::string rootText(const UniqueId& id) { return id.rootHost + ":" + std::to_string(id.rootPort); }

TEST(BootstrapFailure, MissingRankIsNamedWithinTheTimeout) {
  Result<UniqueId> id = startRoot("127.0.0.1", 0, randomSecret(), 1.0, quietLogger());
  ASSERT_TRUE(id.isOk());
  auto start = Clock::now();
  std::vector<Status> results = connectRanks(id.value(), {0, 1, 3}, {4, 4, 4}, 10);
  double elapsed = secondsSince(start);
  const std::string expected = "bootstrap: rank 2 of 4 never reached the root at " + rootText(id.value()) + " within 1 s";
  for (const Status& st : results) {
    EXPECT_EQ(st.code(), Code::kTimeout);
    EXPECT_EQ(st.message(), expected);
  }
  EXPECT_LT(elapsed, 4.0);
}

TEST(BootstrapFailure, SeveralMissingRanksAreListed) {
  Result<UniqueId> id = startRoot("127.0.0.1", 0, randomSecret(), 1.0, quietLogger());
  ASSERT_TRUE(id.isOk());
  std::vector<Status> results = connectRanks(id.value(), {0, 1}, {4, 4}, 10);
  for (const Status& st : results) {
    EXPECT_EQ(st.code(), Code::kTimeout);
    EXPECT_TRUE(contains(st.message(), "ranks 2,3 of 4 never reached the root")) << st.message();
  }
}

TEST(BootstrapFailure, WrongSecretIsRefusedAndRendezvousCompletes) {
  auto log = captureLog();
  const Secret secret = randomSecret();
  Result<UniqueId> id = startRoot("127.0.0.1", 0, secret, 20, log.logger);
  ASSERT_TRUE(id.isOk());

  Socket impostor = rawConnect(id.value());
  std::string impostorAddr = localAddressOf(impostor.fd()).value().toString();
  Hello hello{randomSecret(), 0, 3, SockAddr::fromNumeric("127.0.0.1", 9).value()};
  ASSERT_TRUE(sendFrame(impostor.fd(), MsgType::kHello, encodeHello(hello), WaitContext{Deadline::after(5)}, "hello")
                  .isOk());
  EXPECT_GE(secondsUntilClosed(impostor, 5), 0) << "the root kept a connection without the secret";

  Socket oversized = rawConnect(id.value());
  uint8_t header[kFrameHeaderBytes];
  encodeHeader(MsgType::kHello, 0, header);
  header[8] = header[9] = header[10] = header[11] = 0x7F;  // length ~2 GiB
  ASSERT_TRUE(sendAll(oversized.fd(), header, sizeof(header), WaitContext{Deadline::after(5)}, "header").isOk());
  EXPECT_GE(secondsUntilClosed(oversized, 5), 0) << "the root accepted an oversized hello";

  // The impostor claimed rank 0; the real rank 0 must still get in.
  std::vector<std::string> errors(3);
  loom::testing::runRankThreads(3, [&](int r) { errors[r] = runRank(id.value(), r, 3, 5, 20); });
  for (int r = 0; r < 3; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;

  std::string text = log.text();
  EXPECT_TRUE(contains(text, "dropping connection from " + impostorAddr + ": it did not present this job's secret"))
      << text;
  EXPECT_TRUE(contains(text, "length")) << text;
}

TEST(BootstrapFailure, SilentConnectionIsDroppedAfterTheHelloTimeout) {
  auto log = captureLog();
  RootOptions options;
  options.host = "127.0.0.1";
  options.secret = randomSecret();
  options.timeoutSeconds = 20;
  options.helloTimeoutSeconds = 0.3;
  options.log = log.logger;
  Result<UniqueId> id = startRootWithOptions(options);
  ASSERT_TRUE(id.isOk());
  Socket silent = rawConnect(id.value());
  std::string silentAddr = localAddressOf(silent.fd()).value().toString();
  double closedAfter = secondsUntilClosed(silent, 5);
  EXPECT_GE(closedAfter, 0.2);
  EXPECT_LT(closedAfter, 3.0);
  EXPECT_TRUE(contains(log.text(), "dropping connection from " + silentAddr + ": no hello with the job secret"))
      << log.text();
  std::vector<std::string> errors(2);
  loom::testing::runRankThreads(2, [&](int r) { errors[r] = runRank(id.value(), r, 2, 1, 20); });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

TEST(BootstrapFailure, DuplicateRankIsRejected) {
  Result<UniqueId> id = startRoot("127.0.0.1", 0, randomSecret(), 1.0, quietLogger());
  ASSERT_TRUE(id.isOk());
  std::vector<Status> results = connectRanks(id.value(), {0, 0}, {2, 2}, 10);
  int rejected = 0;
  int timedOut = 0;
  for (const Status& st : results) {
    if (st.code() == Code::kRemoteError && contains(st.message(), "rank 0 of 2 reached the root at " +
                                                                      rootText(id.value()) + " twice")) {
      ++rejected;
    }
    if (st.code() == Code::kTimeout && contains(st.message(), "rank 1 of 2 never reached")) ++timedOut;
  }
  EXPECT_EQ(rejected, 1) << results[0].message() << " | " << results[1].message();
  EXPECT_EQ(timedOut, 1) << results[0].message() << " | " << results[1].message();
}

TEST(BootstrapFailure, NranksMismatchIsRejected) {
  Result<UniqueId> id = startRoot("127.0.0.1", 0, randomSecret(), 1.0, quietLogger());
  ASSERT_TRUE(id.isOk());
  std::vector<Status> results = connectRanks(id.value(), {0, 1}, {2, 3}, 10);
  int mismatches = 0;
  for (const Status& st : results) {
    EXPECT_FALSE(st.isOk());
    if (st.code() == Code::kRemoteError && contains(st.message(), "nranks is")) ++mismatches;
  }
  EXPECT_EQ(mismatches, 1) << results[0].message() << " | " << results[1].message();
}

TEST(BootstrapFailure, InvalidRankOrNranksIsInvalidArgument) {
  UniqueId id;
  id.rootHost = "127.0.0.1";
  id.rootPort = 9;  // never contacted: arguments are checked first
  struct Case {
    int rank, nranks;
    const char* expect;
  };
  const Case cases[] = {{-1, 4, "rank -1 out of range [0, 4)"},
                        {4, 4, "rank 4 out of range [0, 4)"},
                        {0, 0, "nranks 0 out of range"},
                        {0, -2, "nranks -2 out of range"},
                        {0, kMaxRanks + 1, "out of range"}};
  for (const Case& c : cases) {
    auto start = Clock::now();
    auto b = Bootstrap::connect(id, c.rank, c.nranks, WaitContext{Deadline::after(10)}, quietLogger());
    ASSERT_FALSE(b.isOk());
    EXPECT_EQ(b.status().code(), Code::kInvalidArgument);
    EXPECT_TRUE(contains(b.status().message(), c.expect)) << b.status().message();
    EXPECT_LT(secondsSince(start), 1.0);
  }
  UniqueId noPort = id;
  noPort.rootPort = 0;
  auto b = Bootstrap::connect(noPort, 0, 1, WaitContext{Deadline::after(10)}, quietLogger());
  EXPECT_EQ(b.status().code(), Code::kInvalidArgument);
  UniqueId badHost = id;
  badHost.rootHost = "root.example";
  b = Bootstrap::connect(badHost, 0, 1, WaitContext{Deadline::after(10)}, quietLogger());
  EXPECT_EQ(b.status().code(), Code::kInvalidArgument);
  EXPECT_TRUE(contains(b.status().message(), "root.example")) << b.status().message();
}

TEST(BootstrapFailure, StartRootRejectsBadArguments) {
  Result<UniqueId> r = startRoot("127.0.0.1", 0, randomSecret(), 0, quietLogger());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  r = startRoot("not-an-address", 0, randomSecret(), 5, quietLogger());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_TRUE(contains(r.status().message(), "not-an-address")) << r.status().message();
}

// A port nobody listens on: bound, then released.
uint16_t unusedPort() {
  Result<Socket> s = listenOn(SockAddr::fromNumeric("127.0.0.1", 0).value(), false);
  EXPECT_TRUE(s.isOk());
  return localAddressOf(s.value().fd()).value().port();
}

TEST(BootstrapFailure, RootNeverStartedTimesOutNamingTheRoot) {
  UniqueId id;
  id.rootHost = "127.0.0.1";
  id.rootPort = unusedPort();
  id.secret = randomSecret();
  auto start = Clock::now();
  auto b = Bootstrap::connect(id, 1, 2, WaitContext{Deadline::after(1.0)}, quietLogger());
  double elapsed = secondsSince(start);
  ASSERT_FALSE(b.isOk());
  EXPECT_EQ(b.status().code(), Code::kTimeout);
  EXPECT_TRUE(contains(b.status().message(), "rank 1 of 2")) << b.status().message();
  EXPECT_TRUE(contains(b.status().message(), "the root at " + rootText(id))) << b.status().message();
  EXPECT_TRUE(contains(b.status().message(), "Connection refused")) << b.status().message();
  EXPECT_GE(elapsed, 0.9);
  EXPECT_LT(elapsed, 3.0);
}

TEST(BootstrapFailure, AbortEndsTheWaitPromptly) {
  UniqueId id;
  id.rootHost = "127.0.0.1";
  id.rootPort = unusedPort();
  std::atomic<bool> abort{false};
  WaitContext wait{Deadline::after(30)};
  wait.abort = &abort;
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    abort.store(true);
  });
  auto start = Clock::now();
  auto b = Bootstrap::connect(id, 0, 2, wait, quietLogger());
  aborter.join();
  ASSERT_FALSE(b.isOk());
  EXPECT_EQ(b.status().code(), Code::kRemoteError);
  EXPECT_TRUE(contains(b.status().message(), "aborted")) << b.status().message();
  EXPECT_LT(secondsSince(start), 2.0);
}

TEST(BootstrapFailure, AllGatherArgumentsAreChecked) {
  Result<UniqueId> id = startRoot("127.0.0.1", 0, randomSecret(), 10, quietLogger());
  ASSERT_TRUE(id.isOk());
  WaitContext wait{Deadline::after(10)};
  auto b = Bootstrap::connect(id.value(), 0, 1, wait, quietLogger());
  ASSERT_TRUE(b.isOk()) << b.status().message();
  uint8_t byte = 0;
  Status st = b.value()->allGather(&byte, kMaxSlotBytes + 1, wait);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_TRUE(contains(st.message(), "exceeds the limit")) << st.message();
  st = b.value()->allGather(nullptr, 4, wait);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
}

TEST(BootstrapFailure, MismatchedAllGatherSizesAreReported) {
  Result<UniqueId> id = startRoot("127.0.0.1", 0, randomSecret(), 10, quietLogger());
  ASSERT_TRUE(id.isOk());
  std::vector<Status> results(2);
  loom::testing::runRankThreads(2, [&](int r) {
    WaitContext wait{Deadline::after(10)};
    auto b = Bootstrap::connect(id.value(), r, 2, wait, quietLogger());
    if (!b.isOk()) {
      results[r] = b.status();
      return;
    }
    const size_t bytes = r == 0 ? 8 : 16;
    std::vector<uint8_t> data(2 * bytes, 0);
    results[r] = b.value()->allGather(data.data(), bytes, wait);
  });
  EXPECT_EQ(results[0].code(), Code::kInvalidUsage);
  EXPECT_TRUE(contains(results[0].message(), "rank 1 sent 16 bytes per rank")) << results[0].message();
  EXPECT_EQ(results[1].code(), Code::kInvalidUsage);
  EXPECT_TRUE(contains(results[1].message(), "rank 0 sent 8 bytes per rank")) << results[1].message();
}

TEST(BootstrapFailure, PeerThatLeavesMidAllGatherIsReported) {
  Result<UniqueId> id = startRoot("127.0.0.1", 0, randomSecret(), 10, quietLogger());
  ASSERT_TRUE(id.isOk());
  std::vector<Status> results(3);
  loom::testing::runRankThreads(3, [&](int r) {
    WaitContext wait{Deadline::after(10)};
    auto b = Bootstrap::connect(id.value(), r, 3, wait, quietLogger());
    if (!b.isOk() || r == 2) {
      results[r] = b.isOk() ? Status::ok() : b.status();
      return;  // rank 2 destroys its bootstrap without joining the allGather
    }
    std::vector<uint8_t> data(3 * 64, 0);
    results[r] = b.value()->allGather(data.data(), 64, wait);
  });
  EXPECT_TRUE(results[2].isOk()) << results[2].message();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(results[r].code(), Code::kRemoteError) << results[r].message();
    EXPECT_TRUE(contains(results[r].message(), "closed by the peer")) << results[r].message();
  }
}

}  // namespace
}  // namespace loom::bootstrap
