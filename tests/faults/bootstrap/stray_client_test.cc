// Stray clients against the bootstrap port while the real ranks start: one
// without the job secret, one speaking another protocol, one that sends half
// a hello and falls silent, and one that opens more connections than the
// root keeps pending. The real ranks still form their ring and gather; every
// stray is logged with its address and dropped within the hello timeout.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "bootstrap/socket.h"
#include "bootstrap/socket_io.h"
#include "bootstrap/wire.h"
#include "tests/faults/bootstrap/root_and_rank_threads.h"

namespace loom::bootstrap::testing {
namespace {

Socket connectRaw(const UniqueId& id) {
  int err = 0;
  Result<Socket> s = connectOnce(rootAddress(id), WaitContext{Deadline::after(5)}, &err);
  EXPECT_TRUE(s.isOk()) << s.status().message();
  return s.isOk() ? std::move(s.value()) : Socket();
}

std::string localText(const Socket& s) { return localAddressOf(s.fd()).value().toString(); }

void sendBytes(const Socket& s, const std::vector<uint8_t>& bytes) {
  Status st = sendAll(s.fd(), bytes.data(), bytes.size(), WaitContext{Deadline::after(5)}, "stray bytes");
  EXPECT_TRUE(st.isOk()) << st.message();
}

std::vector<uint8_t> helloFrame(const Secret& secret, int rank, int nranks) {
  std::vector<uint8_t> payload = encodeHello({secret, rank, nranks, SockAddr::fromNumeric("127.0.0.1", 9).value()});
  std::vector<uint8_t> frame(kFrameHeaderBytes);
  encodeHeader(MsgType::kHello, static_cast<uint32_t>(payload.size()), frame.data());
  frame.insert(frame.end(), payload.begin(), payload.end());
  return frame;
}

// What a stray reads until the root closes on it: the drop notice's text if
// one came, and the seconds until end of stream (-1 if it stayed open).
struct StrayView {
  std::string notice;
  double closedAfter = -1;
};

StrayView watchUntilClosed(const Socket& s, double limit) {
  StrayView view;
  const auto start = Clock::now();
  WaitContext wait{Deadline::after(limit)};
  Result<Frame> f = recvFrame(s.fd(), wait, "the drop notice");
  if (f.isOk() && f.value().type == MsgType::kError) {
    Result<RemoteError> e = decodeRemoteError(f.value().payload);
    if (e.isOk()) view.notice = e.value().text;
    uint8_t byte;
    f = Status(recvAll(s.fd(), &byte, 1, wait, "the close"));
  }
  if (!f.isOk() && f.status().code() == Code::kRemoteError && contains(f.status().message(), "closed")) {
    view.closedAfter = secondsSince(start);
  }
  return view;
}

size_t countOf(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST(BootstrapFaults, StrayClientsAreDroppedWhileTheRealRanksFormTheRing) {
  constexpr int kRanks = 4;
  constexpr int kFlood = 300;  // more than the 256 connections the root keeps pending
  const ResourceCounts before = ResourceCounts::now();
  TestRoot root = startTestRoot(/*timeout=*/20);
  ASSERT_FALSE(root.address.empty());
  const auto start = Clock::now();

  // Idle connections first (the oldest are evicted for newer ones), then
  // the two that talk, then the real ranks.
  std::vector<Socket> flood;
  for (int i = 0; i < kFlood; ++i) flood.push_back(connectRaw(root.id));
  Socket wrongSecret = connectRaw(root.id);
  sendBytes(wrongSecret, helloFrame(randomSecret(), 0, kRanks));
  Socket otherProtocol = connectRaw(root.id);
  const std::string http = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  sendBytes(otherProtocol, std::vector<uint8_t>(http.begin(), http.end()));

  std::vector<RankOutcome> ranks = runRanks(std::vector<UniqueId>(kRanks, root.id), 10);
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_TRUE(ranks[r].status.isOk()) << "rank " << r << ": " << ranks[r].status.message();
    EXPECT_LT(ranks[r].seconds, 3.0) << "rank " << r;
  }

  const StrayView secretView = watchUntilClosed(wrongSecret, 3);
  const StrayView protocolView = watchUntilClosed(otherProtocol, 3);
  EXPECT_GE(secretView.closedAfter, 0);
  EXPECT_TRUE(contains(secretView.notice, "did not present this job's secret")) << secretView.notice;
  EXPECT_GE(protocolView.closedAfter, 0);
  EXPECT_TRUE(contains(protocolView.notice, "bad frame magic")) << protocolView.notice;
  // Every idle connection is closed: evicted, or when the root finished.
  int floodClosed = 0;
  for (const Socket& s : flood) floodClosed += watchUntilClosed(s, 3).closedAfter >= 0;
  EXPECT_EQ(floodClosed, kFlood);
  EXPECT_LT(secondsSince(start), 6.0);

  const std::string log = root.log.text();
  const std::string prefix = "bootstrap root at " + root.address + ": dropping connection from ";
  EXPECT_TRUE(contains(log, prefix + localText(wrongSecret) + ": it did not present this job's secret")) << log;
  EXPECT_TRUE(contains(log, prefix + localText(otherProtocol) + ": invalid hello frame: bad frame magic")) << log;
  // The flood is one line and a count, not one line per connection.
  EXPECT_EQ(countOf(log, "awaiting their hello (further evictions are only counted)"), 1u) << log;
  // How many were pending at once depends on how accepts and hellos
  // interleave; at least the flood's excess over 256 was evicted.
  const size_t at = log.find("evicted ");
  ASSERT_NE(at, std::string::npos) << log;
  EXPECT_GE(std::stoi(log.substr(at + 8)), kFlood - 256) << log;
  EXPECT_EQ(countOf(log, "dropping connection"), 3u) << log;

  wrongSecret.close();
  otherProtocol.close();
  flood.clear();
  const ResourceCounts after = waitForCounts({before.fds + 1, before.threads}, 3.0);
  EXPECT_LE(after.fds, before.fds + 1);  // the captured log's file
  EXPECT_LE(after.threads, before.threads);
}

TEST(BootstrapFaults, HalfAHelloThenSilenceIsDroppedAtTheHelloTimeout) {
  const ResourceCounts before = ResourceCounts::now();
  TestRoot root = startTestRoot(/*timeout=*/20, /*helloTimeout=*/0.3);
  ASSERT_FALSE(root.address.empty());
  Socket halfHello = connectRaw(root.id);
  std::vector<uint8_t> half = helloFrame(root.id.secret, 1, 2);
  half.resize(20);
  sendBytes(halfHello, half);

  // Rank 0 arrives at once, rank 1 after the stray has been dropped: the
  // root must have kept serving in between.
  std::vector<RankOutcome> ranks(2);
  StrayView stray;
  std::thread rank0([&] { ranks[0] = connectAndGather(root.id, 0, 2, 10); });
  stray = watchUntilClosed(halfHello, 3);
  ranks[1] = connectAndGather(root.id, 1, 2, 10);
  rank0.join();

  EXPECT_GT(stray.closedAfter, 0.2);
  EXPECT_LT(stray.closedAfter, 1.5);
  EXPECT_TRUE(contains(stray.notice, "no hello with the job secret within 0.3 s (20 of 59 bytes received)"))
      << stray.notice;
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(ranks[r].status.isOk()) << "rank " << r << ": " << ranks[r].status.message();
    EXPECT_LT(ranks[r].seconds, 3.0);
  }
  const std::string log = root.log.text();
  EXPECT_TRUE(contains(log, "bootstrap root at " + root.address + ": dropping connection from " +
                                localText(halfHello) + ": no hello with the job secret within 0.3 s"))
      << log;
  halfHello.close();
  const ResourceCounts after = waitForCounts({before.fds + 1, before.threads}, 3.0);
  EXPECT_LE(after.fds, before.fds + 1);
  EXPECT_LE(after.threads, before.threads);
}

}  // namespace
}  // namespace loom::bootstrap::testing
