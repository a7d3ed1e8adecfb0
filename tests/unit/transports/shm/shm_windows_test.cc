// The shared-memory windows (transports/shm/shm_windows.h): phases of
// writes and reads between rank threads, over real segments through the shm
// transport and over windows in this process's heap; the reports of a
// mismatched tag, a silent peer and an abort, and the sleeping waiter.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <new>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/rank_threads.h"
#include "tests/unit/transports/shm/shm_test_util.h"
#include "tests/unit/transports/transport_world.h"
#include "transports/shm/shm_layout.h"
#include "transports/shm/shm_windows.h"

namespace loom::testing::shm {
namespace {

using transports::Backend;
using transports::World;
using transports::connectWorld;

using transport::shm::ShmWindows;
using transport::shm::WindowControl;
using transport::shm::WindowView;

bool contains(const Status& s, const std::string& text) { return s.message().find(text) != std::string::npos; }

// Every rank's window in the heap, zeroed like a fresh segment.
class LocalWindows {
 public:
  LocalWindows(int nranks, uint64_t bytes) {
    for (int r = 0; r < nranks; ++r) {
      controls_.push_back(std::make_unique<WindowControl>());
      data_.emplace_back(bytes / 8, 0);
      views_.push_back({controls_.back().get(), reinterpret_cast<std::byte*>(data_.back().data()), bytes});
    }
  }
  ShmWindows make(int rank) const { return ShmWindows(rank, views_); }
  std::vector<WindowView>& views() { return views_; }

 private:
  std::vector<std::unique_ptr<WindowControl>> controls_;
  std::vector<std::vector<uint64_t>> data_;
  std::vector<WindowView> views_;
};

// `phases` phases on `nranks` threads, each window used as two halves of
// `bytes`: in phase k every rank checks what each peer wrote in phase k-1
// (the other half), then overwrites its half k % 2 (last written in phase
// k-2) with phase k's pattern. A phase end that let a rank run ahead would
// show as a peer's half holding the wrong phase. Returns the first failure, or "".
std::string runPhases(int nranks, int phases, size_t bytes, const std::function<transport::SharedWindows&(int)>& of) {
  std::vector<std::string> failure(static_cast<size_t>(nranks));
  runRankThreads(nranks, [&](int rank) {
    transport::SharedWindows& w = of(rank);
    for (int k = 0; k < phases; ++k) {
      for (int q = 0; q < nranks && k > 0; ++q) {
        if (q == rank) continue;
        std::string bad = checkPattern(w.of(q) + (k - 1) % 2 * bytes, bytes, q, 0, static_cast<uint64_t>(k - 1));
        if (!bad.empty()) {
          failure[rank] = "rank " + std::to_string(rank) + " phase " + std::to_string(k) + " reading rank " +
                          std::to_string(q) + ": " + bad;
          return;
        }
      }
      fillPattern(w.own() + k % 2 * bytes, bytes, rank, 0, static_cast<uint64_t>(k));
      Status ended = w.arrive(bytes, waitFor(30));
      if (!ended.isOk()) {
        failure[rank] = "arrive: " + ended.message();
        return;
      }
    }
  });
  for (const auto& f : failure)
    if (!f.empty()) return f;
  return "";
}

TEST(ShmWindows, ThroughTheShmTransportEveryRankSeesEveryPhase) {
  const int n = 3;
  World world = connectWorld(Backend::kShm, n, uniqueJobTag(), smallConfig(), [&](int r) { return allPeersOf(r, n); });
  ASSERT_TRUE(world.allOk()) << world.firstError();
  for (int r = 0; r < n; ++r) ASSERT_NE(world.transports[r]->windows(), nullptr) << "rank " << r;
  EXPECT_EQ(world.transports[0]->windows()->bytes(), transport::shm::kWindowBytes);
  // Part of the window: enough to span pages, quick enough for 100 phases.
  EXPECT_EQ(runPhases(n, 100, 64 * 1024,
                      [&](int r) -> transport::SharedWindows& { return *world.transports[r]->windows(); }),
            "");
  for (int r = 0; r < n; ++r) EXPECT_EQ(world.transports[r]->windows()->phasesEnded(), 100u);
}

TEST(ShmWindows, ManyRanksInTheHeap) {
  const int n = 7;
  LocalWindows windows(n, 4096);
  std::vector<ShmWindows> each;
  for (int r = 0; r < n; ++r) each.push_back(windows.make(r));
  EXPECT_EQ(runPhases(n, 300, 2048, [&](int r) -> transport::SharedWindows& { return each[r]; }), "");
}

// Windows must reach every other rank: with a peer served elsewhere (sparse
// peer lists) the transport offers none.
TEST(ShmWindows, NoneWhenTheTransportDoesNotServeEveryRank) {
  const int n = 3;
  World world = connectWorld(Backend::kShm, n, uniqueJobTag(), smallConfig(), [](int r) {
    if (r == 2) return std::vector<int>{};
    return std::vector<int>{1 - r};
  });
  ASSERT_TRUE(world.allOk()) << world.firstError();
  for (int r = 0; r < n; ++r) EXPECT_EQ(world.transports[r]->windows(), nullptr) << "rank " << r;
}

TEST(ShmWindows, DifferentTagsAreReportedNamingBothRanks) {
  LocalWindows windows(2, 64);
  ShmWindows a = windows.make(0), b = windows.make(1);
  Status sb;
  std::thread other([&] { sb = b.arrive(12, waitFor(5)); });
  Status sa = a.arrive(8, waitFor(5));
  other.join();
  EXPECT_EQ(sa.code(), Code::kInvalidUsage);
  EXPECT_TRUE(contains(sa, "rank 1 ended phase 1 of the shared windows with tag 12 where rank 0 used 8")) << sa.message();
  EXPECT_EQ(sb.code(), Code::kInvalidUsage);
  EXPECT_TRUE(contains(sb, "rank 0 ended phase 1 of the shared windows with tag 8 where rank 1 used 12")) << sb.message();
}

// A rank that failed within a phase ends it with kFailedTag: its peers fail
// naming it, it does not, and the next phase is back to normal.
TEST(ShmWindows, AFailedPhaseIsReportedByEveryPeer) {
  const int n = 3;
  LocalWindows windows(n, 64);
  std::vector<ShmWindows> each;
  for (int r = 0; r < n; ++r) each.push_back(windows.make(r));
  std::vector<Status> first(n), second(n);
  runRankThreads(n, [&](int r) {
    first[r] = each[r].arrive(r == 1 ? transport::SharedWindows::kFailedTag : 8, waitFor(10));
    second[r] = each[r].arrive(16, waitFor(10));
  });
  for (int r : {0, 2}) {
    EXPECT_EQ(first[r].code(), Code::kRemoteError) << "rank " << r << ": " << first[r].message();
    EXPECT_TRUE(contains(first[r], "rank 1 failed within phase 1")) << first[r].message();
  }
  EXPECT_TRUE(first[1].isOk()) << first[1].message();
  for (int r = 0; r < n; ++r) EXPECT_TRUE(second[r].isOk()) << "rank " << r << ": " << second[r].message();
}

TEST(ShmWindows, ArriveTimesOutNamingTheSilentPeer) {
  LocalWindows windows(3, 64);
  ShmWindows a = windows.make(0), b = windows.make(1);
  std::thread other([&] { (void)b.arrive(8, waitFor(0.5)); });  // rank 1 arrives; rank 2 never does
  Status s = a.arrive(8, waitFor(0.1));
  other.join();
  EXPECT_EQ(s.code(), Code::kTimeout);
  EXPECT_TRUE(contains(s, "rank 2 to end phase 1 of the shared windows (rank 0 waits; rank 2 has ended 0)"))
      << s.message();
}

TEST(ShmWindows, AbortEndsAWaitingArrive) {
  LocalWindows windows(2, 64);
  ShmWindows a = windows.make(0);
  std::atomic<bool> abort{false};
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    abort = true;
  });
  Status s = a.arrive(8, waitFor(30, &abort));
  aborter.join();
  EXPECT_EQ(s.code(), Code::kRemoteError) << s.message();
}

// A waiter that spins and yields not at all goes straight to sleep on the
// peer's signal; the peer's arrive must wake it (or its 20 ms naps find it).
TEST(ShmWindows, ASleepingWaiterIsWoken) {
  LocalWindows windows(2, 64);
  ShmWindows a = windows.make(0), b = windows.make(1);
  std::atomic<bool> asleep{false};
  Status sb;
  std::thread peer([&] {
    const auto giveUp = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (windows.views()[1].control->arrived.sleepers.load() == 0 && std::chrono::steady_clock::now() < giveUp)
      std::this_thread::yield();
    asleep = windows.views()[1].control->arrived.sleepers.load() != 0;
    sb = b.arrive(8, waitFor(30));
  });
  WaitContext w = waitFor(30);
  w.spinMicros = 0;
  w.yieldMicros = 0;
  Status s = a.arrive(8, w);
  peer.join();
  ASSERT_TRUE(s.isOk()) << s.message();
  ASSERT_TRUE(sb.isOk()) << sb.message();
  EXPECT_TRUE(asleep.load());
}

TEST(ShmWindows, MisuseIsReportedNotActedOn) {
  LocalWindows windows(2, 64);
  std::vector<WindowView> views = windows.views();
  views[1].control = nullptr;
  ShmWindows unmapped(0, views);
  EXPECT_EQ(unmapped.arrive(8, waitFor(1)).code(), Code::kInternalError);
  ShmWindows outside(2, windows.views());
  Status s = outside.arrive(8, waitFor(1));
  EXPECT_EQ(s.code(), Code::kInternalError);
  EXPECT_TRUE(contains(s, "rank 2 outside its 2 views")) << s.message();
}

// Two processes whose windows lie in one shared mapping, as two ranks' do
// in their segments: each copies from and into the other's private memory.
TEST(ShmWindows, DirectCopiesBetweenProcesses) {
  constexpr uint64_t kBytes = 4096;
  constexpr size_t kWords = 1000;
  struct Shared {
    WindowControl control[2];
    uint64_t data[2][kBytes / 8];
  };
  void* mem = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto* shared = new (mem) Shared{};
  std::vector<WindowView> views;
  for (int r = 0; r < 2; ++r)
    views.push_back({&shared->control[r], reinterpret_cast<std::byte*>(shared->data[r]), kBytes});
  // Each rank: publish a private buffer's address, read the peer's buffer,
  // write a second pattern into the peer's, then check its own. Returns "" or
  // what went wrong.
  auto rank = [&](int self) -> std::string {
    WindowControl& mine = shared->control[self];
    mine.ownerPid = static_cast<uint64_t>(getpid());
    mine.ownerAddress = reinterpret_cast<uintptr_t>(&mine);
    ShmWindows w(self, views);
    std::vector<uint64_t> buffer(kWords);
    for (size_t i = 0; i < kWords; ++i) buffer[i] = static_cast<uint64_t>(self) << 32 | i;
    const uint64_t where = reinterpret_cast<uintptr_t>(buffer.data());
    std::memcpy(w.own(), &where, sizeof where);
    if (Status s = w.arrive(1, waitFor(30)); !s.isOk()) return "arrive 1: " + s.message();
    w.enablePeerCopies();  // both owners are published now
    if (!w.peerCopies()) return "rank " + std::to_string(self) + ": no direct copies with the other process";
    if (w.peerCopiesInProcess()) return "rank " + std::to_string(self) + ": copies with another process taken for memcpy";
    const int peer = 1 - self;
    uint64_t theirs = 0;
    std::memcpy(&theirs, w.of(peer), sizeof theirs);
    std::vector<uint64_t> got(kWords);
    if (Status s = w.readPeer(peer, got.data(), reinterpret_cast<const void*>(theirs), kWords * 8); !s.isOk())
      return "readPeer: " + s.message();
    for (size_t i = 0; i < kWords; ++i)
      if (got[i] != (static_cast<uint64_t>(peer) << 32 | i)) return "read word " + std::to_string(i) + " wrong";
    if (Status s = w.arrive(2, waitFor(30)); !s.isOk()) return "arrive 2: " + s.message();
    std::vector<uint64_t> second(kWords / 2);
    for (size_t i = 0; i < second.size(); ++i) second[i] = ~(static_cast<uint64_t>(self) << 32 | i);
    if (Status s = w.writePeer(peer, second.data(), reinterpret_cast<void*>(theirs + 8 * 10), second.size() * 8);
        !s.isOk())
      return "writePeer: " + s.message();
    if (Status s = w.arrive(3, waitFor(30)); !s.isOk()) return "arrive 3: " + s.message();
    for (size_t i = 0; i < kWords; ++i) {
      const bool written = i >= 10 && i < 10 + second.size();
      const uint64_t want = written ? ~(static_cast<uint64_t>(peer) << 32 | (i - 10)) : (static_cast<uint64_t>(self) << 32 | i);
      if (buffer[i] != want) return "own word " + std::to_string(i) + " wrong after the peer's write";
    }
    // An address the peer never mapped fails, naming both ranks.
    Status bad = w.readPeer(peer, got.data(), reinterpret_cast<const void*>(uintptr_t{8}), 64);
    if (bad.isOk() || !contains(bad, "of rank " + std::to_string(peer)))
      return "a read at address 8 gave: " + (bad.isOk() ? std::string("ok") : bad.message());
    return "";
  };
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const std::string failure = rank(1);
    if (!failure.empty()) std::fprintf(stderr, "child: %s\n", failure.c_str());
    _exit(failure.empty() ? 0 : 1);
  }
  const std::string failure = rank(0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_EQ(failure, "");
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child rank failed (its message is above)";
  munmap(mem, sizeof(Shared));
}

// The check refuses what it cannot read back: an owner that is gone, an
// address that is not the owner's, a block no owner has claimed.
TEST(ShmWindows, NoDirectCopiesWhereTheOwnerCannotBeRead) {
  LocalWindows windows(2, 64);
  WindowControl& first = *windows.views()[0].control;
  WindowControl& second = *windows.views()[1].control;
  first.ownerPid = second.ownerPid = static_cast<uint64_t>(getpid());
  first.ownerAddress = reinterpret_cast<uintptr_t>(&first);
  second.ownerAddress = reinterpret_cast<uintptr_t>(&second);
  ShmWindows w = windows.make(0);
  w.enablePeerCopies();
  EXPECT_TRUE(w.peerCopies());
  EXPECT_TRUE(w.peerCopiesInProcess()) << "both blocks are owned by this process";

  WindowControl elsewhere;  // a block that does not record itself
  second.ownerAddress = reinterpret_cast<uintptr_t>(&elsewhere);
  w.enablePeerCopies();
  EXPECT_FALSE(w.peerCopies());
  EXPECT_FALSE(w.peerCopiesInProcess());
  EXPECT_EQ(w.readPeer(1, &first, &second, 8).code(), Code::kInternalError);
  second.ownerAddress = 4096;  // nothing mapped there
  w.enablePeerCopies();
  EXPECT_FALSE(w.peerCopies());

  const pid_t gone = fork();
  ASSERT_GE(gone, 0);
  if (gone == 0) _exit(0);
  ASSERT_EQ(waitpid(gone, nullptr, 0), gone);
  second.ownerPid = static_cast<uint64_t>(gone);
  second.ownerAddress = reinterpret_cast<uintptr_t>(&second);
  w.enablePeerCopies();
  EXPECT_FALSE(w.peerCopies());

  second.ownerPid = 0;
  w.enablePeerCopies();
  EXPECT_FALSE(w.peerCopies());
}

}  // namespace
}  // namespace loom::testing::shm
