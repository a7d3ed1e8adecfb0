// The GPUDirect RDMA all-reduce (src/device/gdr_path.h) over the emulated verbs
// fabric: results against references computed here, registration reuse,
// agreement on falling back, and failures that name the peer.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "tests/unit/device/gdr_world.h"
#include "tests/support/rank_threads.h"

namespace loom::testing::gdr {
namespace {

using cuda::GdrPath;
using cuda::PointerInfo;

uint32_t mix(uint32_t rank, uint32_t i, uint32_t salt) {
  uint32_t h = rank * 0x9E3779B1u ^ (i + 0x7F4A7C15u) * 0x85EBCA77u ^ salt * 0xC2B2AE3Du;
  h ^= h >> 15;
  h *= 0x2C1B3C6Du;
  return h ^ (h >> 13);
}

// Not exactly representable sums: the reference only matches if every rank
// adds the n sources in rank order, as the path promises.
float floatInput(int rank, size_t i) { return static_cast<float>(static_cast<int>(mix(rank, i, 1) % 20001) - 10000) / 7.0f; }
int32_t intInput(int rank, size_t i) { return static_cast<int32_t>(mix(rank, i, 2)); }

struct Case {
  DataType dtype;
  RedOp op;
  size_t count;
  bool inPlace;
};

// One collective call on every rank; returns each rank's recvbuff bytes.
std::vector<std::vector<std::byte>> runCall(GdrWorld& w, const Case& c, std::vector<std::vector<std::byte>>& sends,
                                            std::vector<char>* ran, std::vector<Status>* statuses,  // char: threads write neighbouring elements
                                            const std::vector<PointerInfo>& kinds = {}) {
  const size_t bytes = c.count * dataTypeSize(c.dtype);
  std::vector<std::vector<std::byte>> recvs(static_cast<size_t>(w.nranks), std::vector<std::byte>(bytes, std::byte{0x5A}));
  ran->assign(static_cast<size_t>(w.nranks), false);
  statuses->assign(static_cast<size_t>(w.nranks), Status::ok());
  runRankThreads(w.nranks, [&](int r) {
    algo::CollArgs args;
    args.type = algo::CollType::kAllReduce;
    args.sendbuf = sends[r].data();
    args.recvbuf = c.inPlace ? sends[r].data() : recvs[r].data();
    args.count = c.count;
    args.dtype = c.dtype;
    args.op = c.op;
    const PointerInfo kind = kinds.empty() ? deviceInfo() : kinds[r];
    bool didRun = false;
    (*statuses)[r] = w.paths[r]->allReduce(args, kind, kind, waitFor(20), &didRun);
    (*ran)[r] = didRun;
  });
  if (c.inPlace) return sends;
  return recvs;
}

std::vector<std::vector<std::byte>> makeInputs(int nranks, const Case& c) {
  std::vector<std::vector<std::byte>> in(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) {
    in[r].resize(c.count * dataTypeSize(c.dtype));
    for (size_t i = 0; i < c.count; ++i) {
      if (c.dtype == DataType::kFloat32) {
        const float v = floatInput(r, i);
        std::memcpy(in[r].data() + i * 4, &v, 4);
      } else {
        const int32_t v = intInput(r, i);
        std::memcpy(in[r].data() + i * 4, &v, 4);
      }
    }
  }
  return in;
}

// The expected element i, computed here from the inputs' definitions.
std::vector<std::byte> reference(int nranks, const Case& c) {
  std::vector<std::byte> out(c.count * 4);
  for (size_t i = 0; i < c.count; ++i) {
    if (c.dtype == DataType::kFloat32) {
      float acc = floatInput(0, i);
      for (int r = 1; r < nranks; ++r) acc = c.op == RedOp::kMax ? std::max(acc, floatInput(r, i)) : acc + floatInput(r, i);
      if (c.op == RedOp::kAvg) acc = acc / static_cast<float>(nranks);
      std::memcpy(out.data() + i * 4, &acc, 4);
    } else {
      int32_t acc = intInput(0, i);
      for (int r = 1; r < nranks; ++r) {
        const int32_t v = intInput(r, i);
        acc = c.op == RedOp::kMax ? std::max(acc, v) : static_cast<int32_t>(static_cast<uint32_t>(acc) + static_cast<uint32_t>(v));
      }
      std::memcpy(out.data() + i * 4, &acc, 4);
    }
  }
  return out;
}

// First differing element, or -1.
long firstMismatch(const std::vector<std::byte>& got, const std::vector<std::byte>& want) {
  for (size_t i = 0; i < want.size(); i += 4)
    if (std::memcmp(got.data() + i, want.data() + i, 4) != 0) return static_cast<long>(i / 4);
  return got.size() == want.size() ? -1 : static_cast<long>(want.size() / 4);
}

class GdrAllReduce : public ::testing::TestWithParam<int> {};

TEST_P(GdrAllReduce, MatchesReferenceForEveryTypeOpCountAndPlacement) {
  const int n = GetParam();
  GdrWorld w = makeGdrWorld(n);
  const size_t odd = 1001;  // 7 x 11 x 13: not divisible by 2, 3 or 4
  const std::vector<Case> cases = {
      {DataType::kFloat32, RedOp::kSum, odd, false}, {DataType::kFloat32, RedOp::kSum, odd, true},
      {DataType::kInt32, RedOp::kMax, odd, false},   {DataType::kInt32, RedOp::kMax, odd, true},
      {DataType::kFloat32, RedOp::kAvg, 64, false},  {DataType::kInt32, RedOp::kSum, 40000, true},
      // Fewer elements than ranks: some slices are empty (immediate only).
      {DataType::kFloat32, RedOp::kSum, static_cast<size_t>(n - 1), false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << n << " ranks, " << dataTypeName(c.dtype) << " " << redOpName(c.op) << " count "
                                    << c.count << (c.inPlace ? " in place" : " out of place"));
    auto sends = makeInputs(n, c);
    std::vector<char> ran;
    std::vector<Status> st;
    auto out = runCall(w, c, sends, &ran, &st);
    const auto want = reference(n, c);
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(st[r].isOk()) << "rank " << r << ": " << st[r].message();
      EXPECT_TRUE(ran[r]) << "rank " << r;
      EXPECT_EQ(firstMismatch(out[r], want), -1) << "rank " << r;
    }
    if (!c.inPlace) {  // sendbuff is only read
      const auto again = makeInputs(n, c);
      for (int r = 0; r < n; ++r) EXPECT_EQ(sends[r], again[r]) << "rank " << r << "'s sendbuff changed";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, GdrAllReduce, ::testing::Values(2, 3, 4),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

TEST(GdrAllReducePaths, RepeatedCallsOnTheSameBuffersRegisterNothing) {
  const int n = 3;
  GdrWorld w = makeGdrWorld(n);
  const Case c{DataType::kFloat32, RedOp::kSum, 5000, false};
  auto sends = makeInputs(n, c);
  std::vector<char> ran;
  std::vector<Status> st;
  // The receive buffers must stay put across calls for reuse: keep our own.
  const size_t bytes = c.count * 4;
  std::vector<std::vector<std::byte>> recvs(n, std::vector<std::byte>(bytes));
  auto call = [&] {
    runRankThreads(n, [&](int r) {
      algo::CollArgs args;
      args.sendbuf = sends[r].data();
      args.recvbuf = recvs[r].data();
      args.count = c.count;
      bool didRun = false;
      st[r] = w.paths[r]->allReduce(args, deviceInfo(), deviceInfo(), waitFor(20), &didRun);
      ran[r] = didRun;
    });
  };
  ran.assign(n, false);
  st.assign(n, Status::ok());
  call();
  for (int r = 0; r < n; ++r) ASSERT_TRUE(st[r].isOk()) << st[r].message();
  const uint64_t registered = w.fabric->registrations();
  EXPECT_EQ(registered, static_cast<uint64_t>(3 * n));  // sendbuff, recvbuff, scratch per rank
  std::vector<uint64_t> hits(n);
  for (int r = 0; r < n; ++r) hits[r] = w.paths[r]->registrationStats().hits;
  for (int i = 0; i < 4; ++i) call();
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(st[r].isOk()) << st[r].message();
    EXPECT_TRUE(ran[r]);
    EXPECT_EQ(w.paths[r]->registrationStats().hits, hits[r] + 4 * 3) << "rank " << r;
    EXPECT_EQ(firstMismatch(recvs[r], reference(n, c)), -1) << "rank " << r;
  }
  EXPECT_EQ(w.fabric->registrations(), registered) << "repeated calls registered memory again";
}

TEST(GdrAllReducePaths, HostBuffersOnOneRankMakeEveryRankFallBackUntouched) {
  const int n = 3;
  GdrWorld w = makeGdrWorld(n);
  const Case c{DataType::kFloat32, RedOp::kSum, 777, false};
  auto sends = makeInputs(n, c);
  std::vector<char> ran;
  std::vector<Status> st;
  auto out = runCall(w, c, sends, &ran, &st, {deviceInfo(), hostInfo(), deviceInfo()});
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(st[r].isOk()) << "rank " << r << ": " << st[r].message();
    EXPECT_FALSE(ran[r]) << "rank " << r << " ran although rank 1's buffers are host memory";
    for (std::byte b : out[r]) ASSERT_EQ(b, std::byte{0x5A}) << "rank " << r << "'s recvbuff was written";
  }
  EXPECT_EQ(sends, makeInputs(n, c));
  // The path is not broken by it: the next call with device buffers runs.
  auto again = runCall(w, c, sends, &ran, &st);
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(st[r].isOk()) << st[r].message();
    EXPECT_TRUE(ran[r]);
    EXPECT_EQ(firstMismatch(again[r], reference(n, c)), -1);
  }
}

TEST(GdrAllReducePaths, ARankWithoutRdmaMakesEveryRankStageForGood) {
  const int n = 3;
  GdrWorld w = makeGdrWorld(n, [](int rank, cuda::GdrPathOptions& o) {
    if (rank == 2)
      o.network = transport::verbsRdmaNetwork(transport::verbs::emulated::noDeviceProvider("no RDMA device (test)"));
  });
  const Case c{DataType::kInt32, RedOp::kMax, 99, false};
  auto sends = makeInputs(n, c);
  std::vector<char> ran;
  std::vector<Status> st;
  for (int call = 0; call < 2; ++call) {
    auto out = runCall(w, c, sends, &ran, &st);
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(st[r].isOk()) << st[r].message();
      EXPECT_FALSE(ran[r]);
      EXPECT_TRUE(w.paths[r]->unavailable()) << "rank " << r;
      for (std::byte b : out[r]) ASSERT_EQ(b, std::byte{0x5A});
    }
  }
  EXPECT_EQ(w.fabric->liveQueuePairs(), 0) << "a failed setup keeps no queue pairs";
}

TEST(GdrAllReducePaths, APeerThatNeverShowsUpTimesOutNamingIt) {
  const int n = 3;
  GdrWorld w = makeGdrWorld(n);
  std::vector<Status> st(n, Status::ok());
  auto sends = makeInputs(n, {DataType::kFloat32, RedOp::kSum, 16, false});
  runRankThreads(n, [&](int r) {
    if (r == 2) return;  // never calls
    algo::CollArgs args;
    args.sendbuf = sends[r].data();
    args.recvbuf = sends[r].data();
    args.count = 16;
    bool ran = false;
    st[r] = w.paths[r]->allReduce(args, deviceInfo(), deviceInfo(), waitFor(0.3), &ran);
  });
  for (int r = 0; r < 2; ++r) {
    // The in-process bootstrap reports a missing rank as kRemoteError (as the real one does).
    EXPECT_FALSE(st[r].isOk());
    EXPECT_NE(st[r].message().find("GDR setup on rank " + std::to_string(r)), std::string::npos) << st[r].message();
    EXPECT_NE(st[r].message().find("timed out"), std::string::npos) << st[r].message();
    EXPECT_NE(st[r].message().find("rank(s) 2"), std::string::npos) << st[r].message();
  }
}

// Reduces only once released: a peer that stalls between the two phases.
class StallingReducer final : public cuda::DeviceReducer {
 public:
  explicit StallingReducer(std::atomic<bool>* release) : inner_(cuda::makeEmulatedReducer()), release_(release) {}
  Result<void*> allocate(size_t bytes) override { return inner_->allocate(bytes); }
  void release(void* p) override { inner_->release(p); }
  Status flushRemoteWrites() override { return Status::ok(); }
  Status reduceCopy(const kernels::cuda::ReduceCopyArgs& args, const WaitContext& wait) override {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!release_->load() && std::chrono::steady_clock::now() < end)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return inner_->reduceCopy(args, wait);
  }

 private:
  std::unique_ptr<cuda::DeviceReducer> inner_;
  std::atomic<bool>* release_;
};

TEST(GdrAllReducePaths, APeerStalledMidCallTimesOutNamingItAndNothingHangs) {
  const int n = 3;
  std::atomic<bool> release{false};
  GdrWorld w = makeGdrWorld(n, [&](int rank, cuda::GdrPathOptions& o) {
    if (rank == 2)
      o.makeReducer = [&](int) -> Result<std::unique_ptr<cuda::DeviceReducer>> {
        return std::unique_ptr<cuda::DeviceReducer>(std::make_unique<StallingReducer>(&release));
      };
  });
  const Case c{DataType::kFloat32, RedOp::kSum, 300, false};
  auto sends = makeInputs(n, c);
  std::vector<Status> st(n, Status::ok());
  std::atomic<int> returned{0};
  runRankThreads(n, [&](int r) {
    std::vector<std::byte> recv(c.count * 4);
    algo::CollArgs args;
    args.sendbuf = sends[r].data();
    args.recvbuf = recv.data();
    args.count = c.count;
    bool ran = false;
    // Setup and the record exchange need every rank; only the stall is short.
    st[r] = w.paths[r]->allReduce(args, deviceInfo(), deviceInfo(), r == 2 ? waitFor(20) : waitFor(1.0), &ran);
    if (r != 2 && ++returned == 2) release = true;
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(st[r].code(), Code::kTimeout) << st[r].message();
    EXPECT_NE(st[r].message().find("all-gather slices from rank(s) 2"), std::string::npos) << st[r].message();
  }
  // Rank 2 resumes and writes to peers that gave up: their QPs are in ERR.
  EXPECT_EQ(st[2].code(), Code::kRemoteError) << st[2].message();
  EXPECT_NE(st[2].message().find("GDR on rank 2: an RDMA write to rank"), std::string::npos) << st[2].message();
  // The path stays failed, and says so at once.
  algo::CollArgs args;
  args.sendbuf = sends[0].data();
  args.recvbuf = sends[0].data();
  args.count = c.count;
  bool ran = true;
  Status later = w.paths[0]->allReduce(args, deviceInfo(), deviceInfo(), waitFor(0.1), &ran);
  EXPECT_FALSE(ran);
  EXPECT_NE(later.message().find("failed in an earlier call"), std::string::npos) << later.message();
}

}  // namespace
}  // namespace loom::testing::gdr
