// The GDR path's registrations of user buffers against free-and-reallocate
// (src/device/allocation_identity.h): over the emulated fabric, with buffer ids the
// test controls. "Freeing and reallocating" a buffer at the same address is
// modelled by changing its id, as the CUDA driver would.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "tests/unit/device/gdr_world.h"
#include "tests/support/rank_threads.h"

namespace loom::testing::gdr {
namespace {

constexpr size_t kPage = 4096;

// Buffer ids by address, shared by the rank threads; an address without an
// entry has no identity (the query fails, as without a driver).
class IdTable {
 public:
  void set(const void* p, uint64_t id, size_t size) {
    std::lock_guard<std::mutex> lock(mutex_);
    table_[p] = {id, size};
  }
  void forget(const void* p) {
    std::lock_guard<std::mutex> lock(mutex_);
    table_.erase(p);
  }
  cuda::AllocationIdentityFn fn() {
    return [this](const void* p) -> Result<cuda::AllocationIdentity> {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = table_.find(p);
      if (it == table_.end()) return makeError(Code::kUnhandledCudaError, "no identity for %p (test)", p);
      return cuda::AllocationIdentity{it->second.first, reinterpret_cast<uintptr_t>(p), it->second.second};
    };
  }

 private:
  std::mutex mutex_;
  std::map<const void*, std::pair<uint64_t, size_t>> table_;
};

// Page-aligned float buffers: send and recv never share a page, so each is
// one registration and the counts below are exact.
struct Buffers {
  explicit Buffers(size_t count) : bytes((count * sizeof(float) + kPage - 1) / kPage * kPage) {
    send = static_cast<float*>(std::aligned_alloc(kPage, bytes));
    recv = static_cast<float*>(std::aligned_alloc(kPage, bytes));
  }
  ~Buffers() {
    std::free(send);
    std::free(recv);
  }
  Buffers(const Buffers&) = delete;
  Buffers& operator=(const Buffers&) = delete;
  size_t bytes;
  float* send;
  float* recv;
};

// Small integers: float sums are exact, so the reference needs no order.
float input(int rank, size_t i, int salt) {
  return static_cast<float>((rank * 131 + static_cast<int>(i) * 7 + salt) % 97);
}

class GdrIdentity : public ::testing::Test {
 protected:
  static constexpr int kRanks = 3;
  static constexpr size_t kCount = 3000;

  void SetUp() override {
    // Rank 1 logs (INFO) to a file of its own, which tests read back.
    log_ = std::tmpfile();
    ASSERT_NE(log_, nullptr);
    LogSettings settings;
    settings.level = LogLevel::kInfo;
    settings.sink = log_;
    world_ = makeGdrWorld(kRanks, [&](int rank, cuda::GdrPathOptions& o) {
      o.identify = ids_.fn();
      if (rank == 1) o.log = Logger(settings, 1);
    });
    for (int r = 0; r < kRanks; ++r) {
      bufs_.push_back(std::make_unique<Buffers>(kCount));
      ids_.set(bufs_[r]->send, 100 + r, bufs_[r]->bytes);
      ids_.set(bufs_[r]->recv, 200 + r, bufs_[r]->bytes);
    }
  }

  // One all-reduce (sum) on every rank with inputs of `salt`; recvbuffs are
  // filled with a marker first.
  void call(int salt) {
    for (int r = 0; r < kRanks; ++r) {
      for (size_t i = 0; i < kCount; ++i) bufs_[r]->send[i] = input(r, i, salt);
      std::fill(bufs_[r]->recv, bufs_[r]->recv + kCount, -1.0f);
    }
    ran_.assign(kRanks, 0);
    st_.assign(kRanks, Status::ok());
    runRankThreads(kRanks, [&](int r) {
      algo::CollArgs args;
      args.sendbuf = bufs_[r]->send;
      args.recvbuf = bufs_[r]->recv;
      args.count = kCount;
      args.dtype = DataType::kFloat32;
      args.op = RedOp::kSum;
      bool didRun = false;
      st_[r] = world_.paths[r]->allReduce(args, deviceInfo(), deviceInfo(), waitFor(20), &didRun);
      ran_[r] = didRun;
    });
  }

  // Every rank ran and holds the sum of the inputs of `salt`.
  void expectSums(int salt) {
    for (int r = 0; r < kRanks; ++r) {
      ASSERT_TRUE(st_[r].isOk()) << "rank " << r << ": " << st_[r].message();
      ASSERT_TRUE(ran_[r]) << "rank " << r;
      for (size_t i = 0; i < kCount; ++i) {
        float want = 0;
        for (int p = 0; p < kRanks; ++p) want += input(p, i, salt);
        ASSERT_EQ(bufs_[r]->recv[i], want) << "rank " << r << " element " << i;
      }
    }
  }

  void TearDown() override {
    world_ = GdrWorld{};  // the paths hold the log's sink
    if (log_) std::fclose(log_);
  }

  std::string rank1Log() {
    std::fflush(log_);
    std::rewind(log_);
    std::string text;
    char chunk[512];
    for (size_t got; (got = std::fread(chunk, 1, sizeof chunk, log_)) > 0;) text.append(chunk, got);
    return text;
  }

  uint64_t deregistrations() const {
    return world_.fabric->registrations() - static_cast<uint64_t>(world_.fabric->liveMemoryRegions());
  }

  // Declared before world_, so they outlive the paths that registered them.
  IdTable ids_;
  std::vector<std::unique_ptr<Buffers>> bufs_;
  std::FILE* log_ = nullptr;
  GdrWorld world_;
  std::vector<char> ran_;  // char: threads write neighbouring elements
  std::vector<Status> st_;
};

TEST_F(GdrIdentity, ReallocatedBuffersAreRegisteredAnewAndTheStaleRegistrationGoes) {
  call(1);
  expectSums(1);
  const uint64_t n = kRanks;
  EXPECT_EQ(world_.fabric->registrations(), 3 * n) << "sendbuff, recvbuff and scratch per rank";
  EXPECT_EQ(deregistrations(), 0u);

  // Same buffers, same ids: everything hits.
  call(2);
  expectSums(2);
  EXPECT_EQ(world_.fabric->registrations(), 3 * n) << "the same allocations were registered again";
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(world_.paths[r]->registrationStats().hits, 3u) << "rank " << r;

  // Every rank's recvbuff is "freed and reallocated" at the same address.
  for (int r = 0; r < kRanks; ++r) ids_.set(bufs_[r]->recv, 300 + r, bufs_[r]->bytes);
  call(3);
  expectSums(3);
  EXPECT_EQ(world_.fabric->registrations(), 4 * n) << "one new registration per rank, of its new recvbuff";
  EXPECT_EQ(deregistrations(), n) << "each rank's stale recvbuff registration is gone";
  EXPECT_EQ(world_.fabric->liveMemoryRegions(), static_cast<int>(3 * n));
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(world_.paths[r]->registrationStats().stale, 1u) << "rank " << r;

  // Only rank 1's sendbuff (registered for local access only) is reallocated.
  ids_.set(bufs_[1]->send, 401, bufs_[1]->bytes);
  call(4);
  expectSums(4);
  EXPECT_EQ(world_.fabric->registrations(), 4 * n + 1);
  EXPECT_EQ(deregistrations(), n + 1);
  EXPECT_EQ(world_.paths[1]->registrationStats().stale, 2u);
  EXPECT_EQ(world_.paths[0]->registrationStats().stale, 1u);

  // And the new registrations are reused in turn.
  call(5);
  expectSums(5);
  EXPECT_EQ(world_.fabric->registrations(), 4 * n + 1);
}

TEST_F(GdrIdentity, AnUnknownIdentityMakesEveryRankStageNamingTheRankAndBuffer) {
  call(1);
  expectSums(1);  // rank 1's sendbuff has a cached registration: it must not be reused

  ids_.forget(bufs_[1]->send);  // its identity can no longer be learned
  const uint64_t before = world_.fabric->registrations();
  call(9);
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(st_[r].isOk()) << "rank " << r << ": " << st_[r].message();
    EXPECT_FALSE(ran_[r]) << "rank " << r << " ran although rank 1's sendbuff has no known identity";
    for (size_t i = 0; i < kCount; ++i) {
      ASSERT_EQ(bufs_[r]->recv[i], -1.0f) << "rank " << r << "'s recvbuff was written";
      ASSERT_EQ(bufs_[r]->send[i], input(r, i, 9)) << "rank " << r << "'s sendbuff was written";
    }
  }
  EXPECT_EQ(world_.fabric->registrations(), before) << "nothing is registered for a buffer of unknown identity";

  const std::string text = rank1Log();
  char sendText[32];
  std::snprintf(sendText, sizeof sendText, "%p", static_cast<void*>(bufs_[1]->send));
  const std::string want = std::string("GDR: rank 1 cannot run this all-reduce directly (sendbuff ") + sendText +
                           ": cannot tell which allocation it belongs to: no identity for " + sendText + " (test)";
  EXPECT_NE(text.find(want), std::string::npos) << "log:\n" << text;

  // Once the identity is known again, the path runs: nothing was broken.
  ids_.set(bufs_[1]->send, 501, bufs_[1]->bytes);
  call(6);
  expectSums(6);
}

TEST_F(GdrIdentity, ABufferRunningPastItsAllocationIsStaged) {
  ids_.set(bufs_[2]->recv, 202, kCount * sizeof(float) - 4);  // one element short
  call(1);
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(st_[r].isOk()) << st_[r].message();
    EXPECT_FALSE(ran_[r]) << "rank " << r;
    for (size_t i = 0; i < kCount; ++i) ASSERT_EQ(bufs_[r]->recv[i], -1.0f) << "rank " << r;
  }
  EXPECT_EQ(world_.paths[2]->registrationStats().misses + world_.paths[2]->registrationStats().hits, 0u)
      << "rank 2 registered part of a buffer that crosses into another allocation";
}

}  // namespace
}  // namespace loom::testing::gdr
