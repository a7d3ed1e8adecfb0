// The ring acceptor drops strangers and waits for its real predecessor.
#include <gtest/gtest.h>

#include <thread>

#include "bootstrap/socket_ring.h"
#include "bootstrap/socket_io.h"
#include "bootstrap/wire.h"
#include "tests/unit/bootstrap/test_helpers.h"

namespace loom::bootstrap {
namespace {

using testing::captureLog;
using testing::secondsSince;

Socket rawConnect(const SockAddr& to) {
  int err = 0;
  Result<Socket> s = connectOnce(to, WaitContext{Deadline::after(5)}, &err);
  EXPECT_TRUE(s.isOk()) << s.status().message();
  return s.isOk() ? std::move(s.value()) : Socket();
}

void sendRingHello(const Socket& s, const Secret& secret, int rank, int nranks) {
  Status st = sendFrame(s.fd(), MsgType::kRingHello, encodeRingHello({secret, rank, nranks}),
                        WaitContext{Deadline::after(5)}, "test ring hello");
  EXPECT_TRUE(st.isOk()) << st.message();
}

TEST(RingAccept, StrangersAreDroppedAndThePredecessorAccepted) {
  Result<SockAddr> local = SockAddr::fromNumeric("127.0.0.1", 0);
  ASSERT_TRUE(local.isOk());
  Result<Socket> listener = listenOn(local.value(), false);
  ASSERT_TRUE(listener.isOk()) << listener.status().message();
  SockAddr at = localAddressOf(listener.value().fd()).value();

  const Secret secret = randomSecret();
  const RingIdentity self{secret, /*rank=*/1, /*nranks=*/3};
  auto log = captureLog();

  // Connections arrive in this order; only the last is rank 0 of this job.
  std::vector<Socket> strangers;
  std::thread peers([&] {
    strangers.push_back(rawConnect(at));  // garbage bytes
    const char junk[] = "GET / HTTP/1.1\r\n\r\n";
    EXPECT_TRUE(sendAll(strangers.back().fd(), junk, sizeof(junk), WaitContext{Deadline::after(5)}, "junk").isOk());
    strangers.push_back(rawConnect(at));  // another job's secret
    sendRingHello(strangers.back(), randomSecret(), 0, 3);
    strangers.push_back(rawConnect(at));  // our job, wrong rank
    sendRingHello(strangers.back(), secret, 2, 3);
    strangers.push_back(rawConnect(at));  // our job, wrong nranks
    sendRingHello(strangers.back(), secret, 0, 4);
    strangers.push_back(rawConnect(at));  // says nothing
    RingIdentity rank0{secret, 0, 3};
    Result<Socket> real = connectRingPeer(at, 1, rank0, WaitContext{Deadline::after(10)});
    ASSERT_TRUE(real.isOk()) << real.status().message();
    const uint8_t token = 0x5A;
    EXPECT_TRUE(sendAll(real.value().fd(), &token, 1, WaitContext{Deadline::after(5)}, "token").isOk());
    // Keep every socket open until the acceptor is done with them.
    uint8_t done = 0;
    EXPECT_TRUE(recvAll(real.value().fd(), &done, 1, WaitContext{Deadline::after(10)}, "done").isOk());
  });

  auto start = Clock::now();
  Result<Socket> accepted =
      acceptRingPeer(listener.value(), 0, self, WaitContext{Deadline::after(10)}, log.logger, 0.3);
  ASSERT_TRUE(accepted.isOk()) << accepted.status().message();
  uint8_t token = 0;
  ASSERT_TRUE(recvAll(accepted.value().fd(), &token, 1, WaitContext{Deadline::after(5)}, "token").isOk());
  EXPECT_EQ(token, 0x5A);
  const uint8_t done = 1;
  EXPECT_TRUE(sendAll(accepted.value().fd(), &done, 1, WaitContext{Deadline::after(5)}, "done").isOk());
  peers.join();
  EXPECT_LT(secondsSince(start), 5.0);

  std::string text = log.text();
  EXPECT_NE(text.find("bad frame magic"), std::string::npos) << text;
  EXPECT_NE(text.find("did not present this job's secret"), std::string::npos) << text;
  EXPECT_NE(text.find("it says it is rank 2, rank 0 was expected"), std::string::npos) << text;
  EXPECT_NE(text.find("it says nranks is 4"), std::string::npos) << text;
  EXPECT_NE(text.find("timed out waiting for the ring hello"), std::string::npos) << text;
  // Every drop names the peer's address.
  size_t drops = 0;
  for (size_t pos = 0; (pos = text.find("dropping connection from 127.0.0.1:", pos)) != std::string::npos; ++pos) ++drops;
  EXPECT_EQ(drops, 5u) << text;
}

TEST(RingAccept, TimesOutNamingTheExpectedRank) {
  Result<Socket> listener = listenOn(SockAddr::fromNumeric("127.0.0.1", 0).value(), false);
  ASSERT_TRUE(listener.isOk());
  RingIdentity self{randomSecret(), 3, 4};
  auto start = Clock::now();
  Result<Socket> r = acceptRingPeer(listener.value(), 2, self, WaitContext{Deadline::after(0.3)},
                                    testing::quietLogger());
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), Code::kTimeout);
  EXPECT_NE(r.status().message().find("rank 2"), std::string::npos) << r.status().message();
  EXPECT_LT(secondsSince(start), 2.0);
}

}  // namespace
}  // namespace loom::bootstrap
