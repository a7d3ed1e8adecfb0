// The device engine in a communicator that spans hosts: each host sets up an
// engine of its own ranks, and an all-reduce on device buffers runs in those
// engines within each host, staging only its inter-host step (one rail per
// local rank) through pinned memory. Ranks are threads with an in-process
// bootstrap, "hosts" are groups of them, the engines run on the emulated
// backend, and the test's own rail step sums the members' staged buffers
// through the bootstrap, in member order.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "src/device/comm_devices.h"
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

// `hosts` lists each host's ranks, ascending; ranks 0..n-1 appear once.
struct Layout {
  std::vector<std::vector<int>> hosts;
  int nranks() const {
    int n = 0;
    for (const auto& h : hosts) n += static_cast<int>(h.size());
    return n;
  }
  const std::vector<int>& hostOf(int rank) const {
    for (const auto& h : hosts)
      for (int r : h)
        if (r == rank) return h;
    return hosts[0];
  }
  // The rank's rail: its local index on every host (empty unless hosts are even).
  std::vector<int> railOf(int rank) const {
    const std::vector<int>& mine = hostOf(rank);
    size_t j = 0;
    while (mine[j] != rank) ++j;
    std::vector<int> rail;
    for (const auto& h : hosts) {
      if (h.size() != mine.size()) return {};
      rail.push_back(h[j]);
    }
    return rail;
  }
};

// The rail step as the contract of HostSubgroupAllReduce says: every rank
// calls it at once (each rank is on one rail); each contributes its buffer
// through one bootstrap all-gather and sums its members' buffers in member
// order; kAvg divides by the communicator's size.
HostSubgroupAllReduce railStep(LocalBootstrap& boot, int nranks, int* calls) {
  return [&boot, nranks, calls](const algo::CollArgs& a, const std::vector<int>& members) -> Status {
    ++*calls;
    if (a.dtype != DataType::kFloat32) return makeError(Code::kInternalError, "the test's rail sums floats only");
    std::vector<float> all(a.count * static_cast<size_t>(nranks));
    std::memcpy(all.data() + a.count * static_cast<size_t>(boot.rank()), a.sendbuf, a.count * sizeof(float));
    LOOM_TRY(boot.allGather(all.data(), a.count * sizeof(float), waitFor(20)));
    auto* out = static_cast<float*>(a.recvbuf);
    for (size_t i = 0; i < a.count; ++i) {
      float v = all[static_cast<size_t>(members[0]) * a.count + i];
      for (size_t m = 1; m < members.size(); ++m) {
        const float x = all[static_cast<size_t>(members[m]) * a.count + i];
        v = a.op == RedOp::kMax ? std::max(v, x) : v + x;
      }
      out[i] = a.op == RedOp::kAvg ? v / static_cast<float>(nranks) : v;
    }
    return Status::ok();
  };
}

float inputOf(int rank, size_t i) { return static_cast<float>((rank + 1) * 100 + static_cast<int>(i % 89)); }

struct RunResult {
  std::vector<std::vector<float>> outputs;
  std::vector<DataPath> paths;
  std::vector<int> railCalls, hostCalls;
  std::vector<std::string> errors;
};

RunResult runAllReduce(const Layout& layout, size_t count, RedOp op, bool inPlace) {
  const int n = layout.nranks();
  RunResult res;
  res.outputs.assign(static_cast<size_t>(n), {});
  res.paths.assign(static_cast<size_t>(n), DataPath::kHost);
  res.railCalls.assign(static_cast<size_t>(n), 0);
  res.hostCalls.assign(static_cast<size_t>(n), 0);
  res.errors.assign(static_cast<size_t>(n), "");
  auto group = LocalBootstrapGroup::create(n);
  std::vector<std::unique_ptr<CopyEngine>> copies;
  for (int r = 0; r < n; ++r) copies.push_back(makeHostCopyEngine());
  // Every rank's engine outlives every rank's last kernel (peers acknowledge
  // steps in each other's memory), as the communicator's barrier at
  // destruction ensures: they go when all threads are done.
  std::vector<std::unique_ptr<LocalBootstrap>> boots(static_cast<size_t>(n));
  std::vector<std::unique_ptr<CommDevices>> kept(static_cast<size_t>(n));
  runRankThreads(n, [&](int rank) {
    const size_t me = static_cast<size_t>(rank);
    std::string& error = res.errors[me];
    boots[me] = std::make_unique<LocalBootstrap>(group, rank);
    LocalBootstrap& boot = *boots[me];
    EngineSetup setup;
    setup.rank = rank;
    setup.nranks = n;
    setup.members = layout.hostOf(rank);
    setup.bootstrap = &boot;
    setup.wait = waitFor(20);
    setup.settings.channels = 2;
    setup.settings.slots = 2;
    setup.settings.slotBytes = 1024;
    setup.settings.timeoutSeconds = 20;
    std::string why;
    auto engine = DeviceEngine::create(setup, makeEmulatedEngineBackend(), &why);
    // A failed setup fails on every member alike; no kernel has run.
    if (!engine.isOk() || !engine.value()) {
      error = engine.isOk() ? "no engine: " + why : engine.status().message();
      return;
    }
    CommDeviceSetup cds;
    cds.rank = rank;
    cds.nranks = n;
    cds.singleHost = false;
    cds.bootstrap = &boot;
    cds.hostRanks = layout.hostOf(rank);
    cds.rail = layout.railOf(rank);
    cds.nHosts = static_cast<int>(layout.hosts.size());
    CopyEngine* copy = copies[me].get();
    kept[me] = std::make_unique<CommDevices>(
        cds, DeviceSettings{},
        [](const void*, const std::string&) -> Result<PointerInfo> { return PointerInfo{MemoryKind::kDevice, 0}; },
        [copy](int) -> Result<CopyEngine*> { return copy; });
    CommDevices& devices = *kept[me];
    devices.useEngine(std::move(engine).value());
    if (!devices.hostEngine() || devices.engine()) {
      error = "an engine of the host's ranks must be the host engine";
      return;
    }
    std::vector<float> send(count), recv(count, -1.0f);
    for (size_t i = 0; i < count; ++i) send[i] = inputOf(rank, i);
    algo::CollArgs args;
    args.type = algo::CollType::kAllReduce;
    args.dtype = DataType::kFloat32;
    args.op = op;
    args.count = count;
    args.sendbuf = inPlace ? static_cast<const void*>(send.data()) : send.data();
    args.recvbuf = inPlace ? send.data() : recv.data();
    bool handled = false;
    // The whole-communicator staged path: counted, and sums through the bootstrap too, so
    // that a wrong choice shows as a count rather than a hang.
    auto runHost = [&](const algo::CollArgs& host) -> Status {
      ++res.hostCalls[me];
      std::vector<int> everyone;
      for (int r = 0; r < n; ++r) everyone.push_back(r);
      algo::CollArgs a = host;
      return railStep(boot, n, &res.railCalls[me])(a, everyone);
    };
    Status s = devices.runCollective(args, waitFor(30), runHost, &handled, railStep(boot, n, &res.railCalls[me]));
    if (!s.isOk()) error = s.message();
    else if (!handled) error = "not handled";
    res.paths[me] = devices.lastPath();
    res.outputs[me] = inPlace ? send : recv;
  });
  return res;
}

void expectReference(const Layout& layout, const RunResult& res, size_t count, RedOp op) {
  const int n = layout.nranks();
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(res.errors[static_cast<size_t>(r)], "") << "rank " << r;
    for (size_t i = 0; i < count; ++i) {
      float want = inputOf(0, i);
      for (int q = 1; q < n; ++q) want = op == RedOp::kMax ? std::max(want, inputOf(q, i)) : want + inputOf(q, i);
      if (op == RedOp::kAvg) want /= static_cast<float>(n);
      ASSERT_EQ(res.outputs[static_cast<size_t>(r)][i], want)
          << "rank " << r << " element " << i << " of " << count << " (" << redOpName(op) << ")";
    }
  }
}

// Two hosts of two ranks, and three of two with the ranks interleaved:
// shards, the tail past them, in and out of place, sum / max / avg.
TEST(EngineAcrossHosts, AllReduceRunsInEachHostsEngineAndStagesOnlyTheRails) {
  const std::vector<Layout> layouts = {Layout{{{0, 1}, {2, 3}}}, Layout{{{0, 3}, {1, 4}, {2, 5}}}};
  for (const Layout& layout : layouts) {
    for (size_t count : {size_t{1}, size_t{3}, size_t{1001}, size_t{40000}})
      for (RedOp op : {RedOp::kSum, RedOp::kMax, RedOp::kAvg})
        for (bool inPlace : {false, true}) {
          SCOPED_TRACE(std::to_string(layout.nranks()) + " ranks, count " + std::to_string(count) +
                       (inPlace ? " in place" : " out of place"));
          const RunResult res = runAllReduce(layout, count, op, inPlace);
          expectReference(layout, res, count, op);
          if (::testing::Test::HasFatalFailure()) return;
          for (int r = 0; r < layout.nranks(); ++r) {
            EXPECT_EQ(res.paths[static_cast<size_t>(r)], DataPath::kEngineAcrossHosts) << "rank " << r;
            EXPECT_EQ(res.railCalls[static_cast<size_t>(r)], 1) << "rank " << r << ": one rail step per call";
            EXPECT_EQ(res.hostCalls[static_cast<size_t>(r)], 0) << "rank " << r << ": nothing staged whole";
          }
        }
  }
}

// Hosts of different sizes have no rails: every rank stages the whole call.
TEST(EngineAcrossHosts, UnevenHostsStageTheWholeCallOnEveryRank) {
  const Layout layout{{{0, 1, 2}, {3}}};
  const RunResult res = runAllReduce(layout, 1001, RedOp::kSum, false);
  expectReference(layout, res, 1001, RedOp::kSum);
  for (int r = 0; r < layout.nranks(); ++r) {
    EXPECT_EQ(res.paths[static_cast<size_t>(r)], DataPath::kStaged) << "rank " << r;
    EXPECT_EQ(res.hostCalls[static_cast<size_t>(r)], 1) << "rank " << r;
  }
}

}  // namespace
}  // namespace loom::cuda
