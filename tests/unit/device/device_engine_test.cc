// The device engine's host side (src/device/device_engine.h) end to end over
// the emulated backend: setup and its agreement, the calls it builds from
// collectives and send/recv batches, several calls in a row on the same
// connections, one rank, and the failures (timeout, abort) that must reach
// the caller instead of hanging. Ranks are threads with an in-process
// bootstrap; "device memory" is host memory, and each launch runs the engine
// kernel's own body on host threads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "src/device/device_engine.h"
#include "tests/support/local_bootstrap.h"
#include "tests/support/rank_threads.h"

namespace loom::cuda {
namespace {

using testing::LocalBootstrap;
using testing::LocalBootstrapGroup;
using testing::runRankThreads;

WaitContext waitFor(double seconds) {
  WaitContext w;
  w.deadline = Deadline::after(seconds);
  return w;
}

const PointerInfo kDevice{MemoryKind::kDevice, 0};
const PointerInfo kHost{};

struct EngineWorld {
  std::vector<std::unique_ptr<DeviceEngine>> engines;
  std::vector<std::string> why;
};

// Creates one engine per rank; `backendFor(rank)` may return null.
EngineWorld makeWorld(int nranks, double timeoutSeconds = 20,
                      const std::function<std::unique_ptr<EngineBackend>(int)>& backendFor = {},
                      const EngineChoiceRules& rules = {},
                      const std::function<int(int)>& channelsFor = {}) {
  EngineWorld world;
  world.engines.resize(static_cast<size_t>(nranks));
  world.why.resize(static_cast<size_t>(nranks));
  auto group = LocalBootstrapGroup::create(nranks);
  std::vector<std::string> errors(static_cast<size_t>(nranks));
  runRankThreads(nranks, [&](int rank) {
    LocalBootstrap boot(group, rank);
    EngineSetup setup;
    setup.rank = rank;
    setup.nranks = nranks;
    setup.bootstrap = &boot;
    setup.wait = waitFor(20);
    setup.settings.channels = channelsFor ? channelsFor(rank) : 2;
    setup.settings.slots = 2;
    setup.settings.slotBytes = 4096;  // small: every call below crosses many slots
    setup.settings.timeoutSeconds = timeoutSeconds;
    setup.settings.rules = rules;
    auto backend = backendFor ? backendFor(rank) : makeEmulatedEngineBackend();
    auto made = DeviceEngine::create(setup, std::move(backend), &world.why[static_cast<size_t>(rank)]);
    if (!made.isOk()) errors[static_cast<size_t>(rank)] = made.status().message();
    else world.engines[static_cast<size_t>(rank)] = std::move(made).value();
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
  return world;
}

// Rank r's input element i: distinct per rank and index, exact in float.
float inputOf(int rank, size_t i) { return static_cast<float>((rank + 1) * 1000 + static_cast<int>(i % 997)); }

TEST(DeviceEngineEmulated, EveryCollectiveInARowMatchesItsReference) {
  for (int nranks : {1, 2, 3, 4}) {
    SCOPED_TRACE("nranks " + std::to_string(nranks));
    EngineWorld world = makeWorld(nranks);
    for (int r = 0; r < nranks; ++r) ASSERT_NE(world.engines[static_cast<size_t>(r)], nullptr) << world.why[0];
    constexpr size_t kCount = 10007;  // not a multiple of anything the engine splits by
    const size_t n = static_cast<size_t>(nranks);
    std::vector<std::string> failures(n);
    runRankThreads(nranks, [&](int rank) {
      DeviceEngine& eng = *world.engines[static_cast<size_t>(rank)];
      std::string& failure = failures[static_cast<size_t>(rank)];
      auto check = [&](bool ok, const std::string& what) {
        if (!ok && failure.empty()) failure = what;
      };
      std::vector<float> in(kCount * n), sum(kCount), avgInPlace(kCount), gathered(kCount * n), scattered(kCount),
          bcast(kCount), reduced(kCount, -1.0f);
      for (size_t i = 0; i < in.size(); ++i) in[i] = inputOf(rank, i);
      for (size_t i = 0; i < kCount; ++i) avgInPlace[i] = in[i];
      auto run = [&](algo::CollType type, const void* send, void* recv, RedOp op, int root) {
        algo::CollArgs args;
        args.type = type;
        args.sendbuf = send;
        args.recvbuf = recv;
        args.count = kCount;
        args.op = op;
        args.root = root;
        check(eng.accepts(args, kDevice, kDevice), "accepts");
        Status s = eng.enqueue(args, nullptr);
        check(s.isOk(), s.message());
      };
      // Five calls queued back to back, then one wait (as a training step does).
      run(algo::CollType::kAllReduce, in.data(), sum.data(), RedOp::kSum, 0);
      run(algo::CollType::kAllReduce, avgInPlace.data(), avgInPlace.data(), RedOp::kAvg, 0);
      run(algo::CollType::kAllGather, in.data(), gathered.data(), RedOp::kSum, 0);
      run(algo::CollType::kReduceScatter, in.data(), scattered.data(), RedOp::kMax, 0);
      std::vector<float> bsrc(kCount);
      for (size_t i = 0; i < kCount; ++i) bsrc[i] = rank == nranks - 1 ? inputOf(rank, i) : -7.0f;
      run(algo::CollType::kBroadcast, bsrc.data(), bcast.data(), RedOp::kSum, nranks - 1);
      run(algo::CollType::kReduce, in.data(), reduced.data(), RedOp::kMin, 0);
      Status idle = eng.waitIdle(waitFor(60));
      check(idle.isOk(), idle.message());
      Status kernel = eng.kernelError();
      check(kernel.isOk(), kernel.message());
      for (size_t i = 0; i < kCount && failure.empty(); ++i) {
        float s = 0, m = 0;
        for (int r = 0; r < nranks; ++r) s += inputOf(r, i);  // rank order, as the engine promises for sums
        check(sum[i] == s, "all-reduce sum at " + std::to_string(i));
        check(std::fabs(avgInPlace[i] - s / static_cast<float>(nranks)) <= 1e-3f * std::fabs(s),
              "all-reduce avg in place at " + std::to_string(i));
        for (int r = 0; r < nranks; ++r)
          check(gathered[static_cast<size_t>(r) * kCount + i] == inputOf(r, i), "all-gather at " + std::to_string(i));
        const size_t block = static_cast<size_t>(rank) * kCount + i;
        m = inputOf(0, block);
        for (int r = 1; r < nranks; ++r) m = std::max(m, inputOf(r, block));
        check(scattered[i] == m, "reduce-scatter max at " + std::to_string(i));
        check(bcast[i] == inputOf(nranks - 1, i), "broadcast at " + std::to_string(i));
        if (rank == 0) check(reduced[i] == inputOf(0, i), "reduce min at " + std::to_string(i));  // rank 0 is smallest
      }
    });
    for (int r = 0; r < nranks; ++r) EXPECT_EQ(failures[static_cast<size_t>(r)], "") << "rank " << r;
  }
}

TEST(DeviceEngineEmulated, RanksThatSetDifferentChannelCountsAllUseTheSmallest) {
  // LOOM_CUDA_CHANNELS differs between ranks: the FIFO offsets depend on the
  // count, so every rank must lay its memory out for the same one.
  constexpr int kRanks = 3;
  EngineWorld world = makeWorld(kRanks, 20, {}, {}, [](int rank) { return rank == 1 ? 2 : 3; });
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_NE(world.engines[static_cast<size_t>(r)], nullptr) << world.why[static_cast<size_t>(r)];
    EXPECT_EQ(world.engines[static_cast<size_t>(r)]->channels(), 2) << "rank " << r;
  }
  constexpr size_t kCount = 30011;  // Simple: several slots per channel
  std::vector<std::string> failures(kRanks);
  runRankThreads(kRanks, [&](int rank) {
    DeviceEngine& eng = *world.engines[static_cast<size_t>(rank)];
    std::vector<float> in(kCount), sum(kCount, -1.0f);
    for (size_t i = 0; i < kCount; ++i) in[i] = inputOf(rank, i);
    algo::CollArgs args;
    args.type = algo::CollType::kAllReduce;
    args.sendbuf = in.data();
    args.recvbuf = sum.data();
    args.count = kCount;
    args.op = RedOp::kSum;
    Status s = eng.enqueue(args, nullptr);
    if (s.isOk()) s = eng.waitIdle(waitFor(60));
    if (s.isOk()) s = eng.kernelError();
    std::string& failure = failures[static_cast<size_t>(rank)];
    if (!s.isOk()) failure = s.message();
    for (size_t i = 0; i < kCount && failure.empty(); ++i) {
      float expected = 0;
      for (int r = 0; r < kRanks; ++r) expected += inputOf(r, i);
      if (sum[i] != expected) failure = "all-reduce at " + std::to_string(i);
    }
  });
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(failures[static_cast<size_t>(r)], "") << "rank " << r;
}

TEST(DeviceEngineEmulated, SendRecvBatchesWithRepeatedPeersRunAsRounds) {
  constexpr int kRanks = 3;
  EngineWorld world = makeWorld(kRanks);
  for (int r = 0; r < kRanks; ++r) ASSERT_NE(world.engines[static_cast<size_t>(r)], nullptr) << world.why[0];
  constexpr size_t kBytes = 9001;
  std::vector<std::string> failures(kRanks);
  runRankThreads(kRanks, [&](int rank) {
    DeviceEngine& eng = *world.engines[static_cast<size_t>(rank)];
    const int next = (rank + 1) % kRanks, prev = (rank + kRanks - 1) % kRanks;
    // Two messages to the next rank and two from the previous one, plus one to itself.
    std::vector<uint8_t> out1(kBytes), out2(kBytes), self(kBytes), in1(kBytes, 0), in2(kBytes, 0), selfIn(kBytes, 0);
    for (size_t i = 0; i < kBytes; ++i) {
      out1[i] = static_cast<uint8_t>(rank * 31 + i);
      out2[i] = static_cast<uint8_t>(rank * 17 + 3 * i);
      self[i] = static_cast<uint8_t>(i ^ 0x5a);
    }
    std::vector<algo::P2POp> ops = {algo::P2POp::send(next, out1.data(), kBytes),
                                    algo::P2POp::recv(prev, in1.data(), kBytes),
                                    algo::P2POp::send(next, out2.data(), kBytes),
                                    algo::P2POp::recv(prev, in2.data(), kBytes),
                                    algo::P2POp::send(rank, self.data(), kBytes),
                                    algo::P2POp::recv(rank, selfIn.data(), kBytes)};
    std::vector<PointerInfo> kinds(ops.size(), kDevice);
    std::string& failure = failures[static_cast<size_t>(rank)];
    if (!eng.acceptsP2P(ops, kinds)) failure = "batch not accepted";
    Status s = eng.enqueueP2P(ops, nullptr);
    if (s.isOk()) s = eng.waitIdle(waitFor(60));
    if (s.isOk()) s = eng.kernelError();
    if (!s.isOk()) failure = s.message();
    for (size_t i = 0; i < kBytes && failure.empty(); ++i) {
      if (in1[i] != static_cast<uint8_t>(prev * 31 + i)) failure = "first message from prev at " + std::to_string(i);
      if (in2[i] != static_cast<uint8_t>(prev * 17 + 3 * i)) failure = "second message at " + std::to_string(i);
      if (selfIn[i] != static_cast<uint8_t>(i ^ 0x5a)) failure = "message to itself at " + std::to_string(i);
    }
  });
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(failures[static_cast<size_t>(r)], "") << "rank " << r;
}

// An in-place all-to-all: the receive from each peer lands where the send
// to it reads. The kernel orders neither before the other, so the engine
// sends those blocks from a copy.
TEST(DeviceEngineEmulated, InPlaceAllToAllSendsFromACopyOfWhatItsReceivesOverwrite) {
  constexpr int kRanks = 4;
  EngineWorld world = makeWorld(kRanks);
  for (int r = 0; r < kRanks; ++r) ASSERT_NE(world.engines[static_cast<size_t>(r)], nullptr) << world.why[0];
  std::vector<std::string> failures(kRanks);
  runRankThreads(kRanks, [&](int rank) {
    DeviceEngine& eng = *world.engines[static_cast<size_t>(rank)];
    std::string& failure = failures[static_cast<size_t>(rank)];
    // Calls in sequence: a race that one call slips past, another meets.
    for (size_t kCount : {size_t{1001}, size_t{3}, size_t{40000}, size_t{1001}}) {
      auto valueOf = [](int owner, size_t i) { return static_cast<float>(owner * 100000 + static_cast<int>(i)); };
      std::vector<float> buf(kCount * kRanks);
      for (size_t i = 0; i < buf.size(); ++i) buf[i] = valueOf(rank, i);
      std::vector<algo::P2POp> ops;
      for (int q = 0; q < kRanks; ++q) {
        float* block = buf.data() + static_cast<size_t>(q) * kCount;
        ops.push_back(algo::P2POp::send(q, block, kCount * sizeof(float)));
        ops.push_back(algo::P2POp::recv(q, block, kCount * sizeof(float)));
      }
      Status s = eng.enqueueP2P(ops, nullptr);
      if (s.isOk()) s = eng.waitIdle(waitFor(60));
      if (s.isOk()) s = eng.kernelError();
      if (!s.isOk()) failure = s.message();
      // Block q now holds block `rank` of rank q's input.
      for (int q = 0; q < kRanks && failure.empty(); ++q)
        for (size_t i = 0; i < kCount && failure.empty(); ++i)
          if (buf[static_cast<size_t>(q) * kCount + i] != valueOf(q, static_cast<size_t>(rank) * kCount + i))
            failure = "count " + std::to_string(kCount) + ", block from rank " + std::to_string(q) + ", element " +
                      std::to_string(i);
      if (!failure.empty()) return;
    }
  });
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(failures[static_cast<size_t>(r)], "") << "rank " << r;
}

TEST(DeviceEngineEmulated, HostBuffersAreNotTheEngines) {
  EngineWorld world = makeWorld(1);
  ASSERT_NE(world.engines[0], nullptr);
  algo::CollArgs args;
  EXPECT_FALSE(world.engines[0]->accepts(args, kHost, kDevice));
  EXPECT_FALSE(world.engines[0]->accepts(args, kDevice, PointerInfo{MemoryKind::kDevice, 3}));
  EXPECT_TRUE(world.engines[0]->accepts(args, kDevice, kDevice));
}

TEST(DeviceEngineEmulated, OneRankWithoutABackendMeansNoEngineOnAnyRank) {
  EngineWorld world = makeWorld(3, 20, [](int rank) {
    return rank == 1 ? std::unique_ptr<EngineBackend>() : makeEmulatedEngineBackend();
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(world.engines[static_cast<size_t>(r)], nullptr) << "rank " << r;
    EXPECT_NE(world.why[static_cast<size_t>(r)].find(r == 1 ? "no device" : "rank 1"), std::string::npos)
        << world.why[static_cast<size_t>(r)];
  }
}

// The emulated backend, for tests to override one part of.
class ForwardingBackend : public EngineBackend {
 public:
  ForwardingBackend() : inner_(makeEmulatedEngineBackend()) {}
  const char* name() const override { return "forwarding"; }
  int device() const override { return inner_->device(); }
  Result<void*> allocShared(size_t bytes, EngineExport* out) override { return inner_->allocShared(bytes, out); }
  void freeShared(void* base) override { inner_->freeShared(base); }
  Result<bool> reaches(const EngineExport& peer) override { return inner_->reaches(peer); }
  Result<void*> mapPeer(const EngineExport& peer) override { return inner_->mapPeer(peer); }
  void unmapPeer(void* base) override { inner_->unmapPeer(base); }
  Result<const kernels::cuda::engine::EngineView*> publishView(const kernels::cuda::engine::EngineView& v) override {
    return inner_->publishView(v);
  }
  Result<uint32_t*> mappedWords(int count) override { return inner_->mappedWords(count); }
  Status launch(const kernels::cuda::engine::EngineView* view, const kernels::cuda::engine::EngineLayout& layout,
                const kernels::cuda::engine::EngineCall& call, void* stream) override {
    return inner_->launch(view, layout, call, stream);
  }
  Status copy(void* dst, const void* src, size_t bytes, void* stream) override {
    return inner_->copy(dst, src, bytes, stream);
  }
  Status waitIdle(const WaitContext& wait) override { return inner_->waitIdle(wait); }

 private:
  std::unique_ptr<EngineBackend> inner_;
};

// Mapping a peer fails.
class UnmappableBackend final : public ForwardingBackend {
 public:
  Result<void*> mapPeer(const EngineExport&) override {
    return makeError(Code::kUnhandledCudaError, "cudaIpcOpenMemHandle failed (injected)");
  }
};

// Records the protocol of every call it launches.
class ProtocolRecordingBackend final : public ForwardingBackend {
 public:
  explicit ProtocolRecordingBackend(std::vector<kernels::cuda::engine::EngineProtocol>* seen) : seen_(seen) {}
  Status launch(const kernels::cuda::engine::EngineView* view, const kernels::cuda::engine::EngineLayout& layout,
                const kernels::cuda::engine::EngineCall& call, void* stream) override {
    seen_->push_back(call.protocol);
    return ForwardingBackend::launch(view, layout, call, stream);
  }

 private:
  std::vector<kernels::cuda::engine::EngineProtocol>* seen_;
};

// Small calls run LL and large ones Simple, alike on every rank, and both
// give the reference's results when mixed on the same connections.
TEST(DeviceEngineEmulated, SmallCallsRunLLAndLargeOnesSimpleOnEveryRank) {
  using kernels::cuda::engine::EngineProtocol;
  const int nranks = 3;
  std::vector<std::vector<EngineProtocol>> seen(nranks);
  EngineWorld world = makeWorld(nranks, 20, [&](int rank) {
    return std::unique_ptr<EngineBackend>(new ProtocolRecordingBackend(&seen[static_cast<size_t>(rank)]));
  });
  for (int r = 0; r < nranks; ++r) ASSERT_NE(world.engines[static_cast<size_t>(r)], nullptr) << world.why[0];
  const size_t small = 1000, large = 40000;  // floats: 4 KB and 160 KB
  const std::vector<algo::CollType> types = {algo::CollType::kAllReduce, algo::CollType::kBroadcast,
                                             algo::CollType::kReduce, algo::CollType::kAllGather,
                                             algo::CollType::kReduceScatter};
  std::vector<std::string> failures(nranks);
  runRankThreads(nranks, [&](int rank) {
    DeviceEngine& eng = *world.engines[static_cast<size_t>(rank)];
    std::string& failure = failures[static_cast<size_t>(rank)];
    for (size_t count : {small, large, small})
      for (algo::CollType type : types) {
        const size_t n = static_cast<size_t>(nranks);
        std::vector<float> in(count * n), out(count * n, -1.0f);
        for (size_t i = 0; i < in.size(); ++i) in[i] = inputOf(rank, i);
        algo::CollArgs args;
        args.type = type;
        args.sendbuf = in.data();
        args.recvbuf = out.data();
        args.count = count;
        args.op = RedOp::kSum;
        args.root = 1;
        Status s = eng.enqueue(args, nullptr);
        if (s.isOk()) s = eng.waitIdle(waitFor(60));
        if (s.isOk()) s = eng.kernelError();
        if (!s.isOk()) {
          failure = s.message();
          return;
        }
        for (size_t i = 0; i < count && failure.empty(); ++i) {
          float want = 0;
          switch (type) {
            case algo::CollType::kAllReduce:
              for (int r = 0; r < nranks; ++r) want += inputOf(r, i);
              break;
            case algo::CollType::kReduce:
              if (rank != 1) continue;
              for (int r = 0; r < nranks; ++r) want += inputOf(r, i);
              break;
            case algo::CollType::kBroadcast: want = inputOf(1, i); break;
            case algo::CollType::kAllGather: want = inputOf(static_cast<int>(i / count), i % count); break;
            case algo::CollType::kReduceScatter:
              for (int r = 0; r < nranks; ++r) want += inputOf(r, static_cast<size_t>(rank) * count + i);
              break;
          }
          if (out[i] != want)
            failure = std::string(algo::collTypeName(type)) + " of " + std::to_string(count) + " floats differs at " +
                      std::to_string(i);
        }
        // All-gather: the rest of the output too.
        if (type == algo::CollType::kAllGather)
          for (size_t i = count; i < count * n && failure.empty(); ++i)
            if (out[i] != inputOf(static_cast<int>(i / count), i % count))
              failure = "all-gather of " + std::to_string(count) + " floats differs at " + std::to_string(i);
      }
  });
  for (int r = 0; r < nranks; ++r) EXPECT_EQ(failures[static_cast<size_t>(r)], "") << "rank " << r;
  // Per call: LL where every buffer of the call is at most 64 KiB (all-gather's output and reduce-scatter's
  // input are 3 x count), Simple otherwise; every rank the same.
  std::vector<EngineProtocol> want;
  for (size_t count : {small, large, small})
    for (algo::CollType type : types) {
      const bool spans = type == algo::CollType::kAllGather || type == algo::CollType::kReduceScatter;
      const size_t bytes = count * sizeof(float) * (spans ? static_cast<size_t>(nranks) : 1);
      want.push_back(bytes <= (size_t{64} << 10) ? EngineProtocol::kLL : EngineProtocol::kSimple);
    }
  for (int r = 0; r < nranks; ++r) EXPECT_EQ(seen[static_cast<size_t>(r)], want) << "rank " << r;
}

// The engine's choice per call: the tree for small all-reduces from 5 ranks
// on, the ring otherwise, and LOOM_ALGO / LOOM_PROTO (as rules) override it
// per collective where the engine can run what they name; every choice gives
// the reference's sums, and every rank reports the same choice.
TEST(DeviceEngineEmulated, AlgorithmAndProtocolFollowTheDefaultsAndTheRules) {
  using kernels::cuda::engine::EngineAlgorithm;
  using kernels::cuda::engine::EngineProtocol;
  const int nranks = 6;
  struct Case {
    const char* what;
    EngineChoiceRules rules;
    algo::CollType type;
    size_t count;
    const char* expected;
  };
  auto only = [](algo::CollType type, int algorithmBits, int protocolBits) {
    EngineChoiceRules r;
    r.algorithms[static_cast<int>(type)] = static_cast<uint8_t>(algorithmBits);
    r.protocols[static_cast<int>(type)] = static_cast<uint8_t>(protocolBits);
    return r;
  };
  const int ring = 1 << static_cast<int>(EngineAlgorithm::kRing), tree = 1 << static_cast<int>(EngineAlgorithm::kTree);
  const int simple = 1 << static_cast<int>(EngineProtocol::kSimple), ll = 1 << static_cast<int>(EngineProtocol::kLL);
  const algo::CollType ar = algo::CollType::kAllReduce, ag = algo::CollType::kAllGather;
  const std::vector<Case> cases = {
      {"defaults, small", {}, ar, 1000, "tree/LL"},
      {"defaults, large", {}, ar, 40000, "ring/Simple"},
      {"ring forced", only(ar, ring, ll | simple), ar, 1000, "ring/LL"},
      {"tree and Simple forced", only(ar, tree, simple), ar, 40000, "tree/Simple"},
      {"LL forced on a large call", only(ar, ring | tree, ll), ar, 40000, "tree/LL"},
      {"Simple forced on a small all-gather", only(ag, ring, simple), ag, 100, "ring/Simple"},
      {"the tree cannot gather: the rule is ignored", only(ag, tree, ll), ag, 100, "ring/LL"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    EngineWorld world = makeWorld(nranks, 20, {}, c.rules);
    for (int r = 0; r < nranks; ++r) ASSERT_NE(world.engines[static_cast<size_t>(r)], nullptr) << world.why[0];
    std::vector<std::string> failures(nranks), choices(nranks);
    runRankThreads(nranks, [&](int rank) {
      DeviceEngine& eng = *world.engines[static_cast<size_t>(rank)];
      const size_t n = static_cast<size_t>(nranks);
      std::vector<float> in(c.count), out(c.count * n, -1.0f);
      for (size_t i = 0; i < c.count; ++i) in[i] = inputOf(rank, i);
      algo::CollArgs args;
      args.type = c.type;
      args.sendbuf = in.data();
      args.recvbuf = out.data();
      args.count = c.count;
      args.op = RedOp::kSum;
      Status s = eng.enqueue(args, nullptr);
      if (s.isOk()) s = eng.waitIdle(waitFor(60));
      if (s.isOk()) s = eng.kernelError();
      std::string& failure = failures[static_cast<size_t>(rank)];
      if (!s.isOk()) failure = s.message();
      for (size_t i = 0; i < out.size() && failure.empty(); ++i) {
        float want = 0;
        if (c.type == ar && i < c.count)
          for (int r = 0; r < nranks; ++r) want += inputOf(r, i);
        else if (c.type == ag)
          want = inputOf(static_cast<int>(i / c.count), i % c.count);
        else
          continue;
        if (out[i] != want) failure = "differs at " + std::to_string(i);
      }
      choices[static_cast<size_t>(rank)] = eng.lastChoice();
    });
    for (int r = 0; r < nranks; ++r) {
      EXPECT_EQ(failures[static_cast<size_t>(r)], "") << "rank " << r;
      EXPECT_EQ(choices[static_cast<size_t>(r)], c.expected) << "rank " << r;
    }
  }
}

TEST(DeviceEngineEmulated, ARankThatCannotMapItsPeersLeavesNoRankWithTheEngine) {
  EngineWorld world = makeWorld(3, 20, [](int rank) {
    return rank == 2 ? std::unique_ptr<EngineBackend>(new UnmappableBackend) : makeEmulatedEngineBackend();
  });
  for (int r = 0; r < 3; ++r) EXPECT_EQ(world.engines[static_cast<size_t>(r)], nullptr) << "rank " << r;
  EXPECT_NE(world.why[2].find("injected"), std::string::npos) << world.why[2];
  EXPECT_NE(world.why[0].find("rank 2"), std::string::npos) << world.why[0];
}

TEST(DeviceEngineEmulated, MoreRanksThanTheEngineRunsMeansNoEngine) {
  const int n = kernels::cuda::engine::kMaxRanks + 1;
  EngineWorld world = makeWorld(n);
  for (int r = 0; r < n; ++r) EXPECT_EQ(world.engines[static_cast<size_t>(r)], nullptr);
  EXPECT_NE(world.why[0].find("ranks"), std::string::npos) << world.why[0];
}

// Both protocols: 4096 floats run LL, 100000 Simple.
TEST(DeviceEngineEmulated, APeerThatNeverCallsEndsInATimeoutNamingTheRankThenCallsFailAtOnce) {
  for (size_t count : {size_t{4096}, size_t{100000}}) {
    SCOPED_TRACE("count " + std::to_string(count));
    EngineWorld world = makeWorld(2, /*timeoutSeconds=*/0.3);
    ASSERT_NE(world.engines[0], nullptr) << world.why[0];
    std::vector<float> in(count, 1.0f), out(count);
    algo::CollArgs args;
    args.sendbuf = in.data();
    args.recvbuf = out.data();
    args.count = in.size();
    DeviceEngine& eng = *world.engines[0];
    ASSERT_TRUE(eng.enqueue(args, nullptr).isOk());  // rank 1 never joins
    EXPECT_TRUE(eng.waitIdle(waitFor(20)).isOk());    // the kernel gave up: it did not hang
    Status error = eng.kernelError();
    EXPECT_EQ(error.code(), Code::kTimeout) << error.message();
    EXPECT_NE(error.message().find("rank 0"), std::string::npos) << error.message();
    Status next = eng.enqueue(args, nullptr);
    EXPECT_EQ(next.code(), Code::kTimeout) << next.message();
  }
}

TEST(DeviceEngineEmulated, AbortStopsAWaitingKernel) {
  for (size_t count : {size_t{4096}, size_t{100000}}) {
    SCOPED_TRACE("count " + std::to_string(count));
    EngineWorld world = makeWorld(2, /*timeoutSeconds=*/0);  // no timeout: only the abort can end the wait
    ASSERT_NE(world.engines[0], nullptr) << world.why[0];
    std::vector<float> in(count, 1.0f), out(count);
    algo::CollArgs args;
    args.sendbuf = in.data();
    args.recvbuf = out.data();
    args.count = in.size();
    DeviceEngine& eng = *world.engines[0];
    ASSERT_TRUE(eng.enqueue(args, nullptr).isOk());
    EXPECT_FALSE(eng.waitIdle(waitFor(0.2)).isOk());  // still waiting for rank 1
    eng.abort();
    EXPECT_TRUE(eng.waitIdle(waitFor(20)).isOk());
    EXPECT_EQ(eng.kernelError().code(), Code::kRemoteError) << eng.kernelError().message();
  }
}

}  // namespace
}  // namespace loom::cuda
