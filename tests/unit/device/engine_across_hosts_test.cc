// The device engine in a communicator that spans hosts: each host sets up an
// engine of its own ranks, and the collectives on device buffers run in those
// engines within each host, staging only their inter-host step (one rail per
// local rank) through pinned memory (src/device/engine_across_hosts.h). Ranks
// are threads with an in-process bootstrap, "hosts" are groups of them, the
// engines run on the emulated backend, and the test's own rail step computes
// each collective over the members' staged buffers through the bootstrap.
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

// The rail step as the contract of HostSubgroupCollective says: every rank
// calls it at once (each rank is on one rail); each contributes its send
// buffer through one bootstrap all-gather and computes the collective over
// its members' buffers in member order; kAvg divides by the communicator's
// size. Each call's type and element count are recorded.
struct RailCall {
  algo::CollType type;
  size_t count;
};
HostSubgroupCollective railStep(LocalBootstrap& boot, int nranks, std::vector<RailCall>* calls) {
  return [&boot, nranks, calls](const algo::CollArgs& a, const std::vector<int>& members) -> Status {
    calls->push_back({a.type, a.count});
    if (a.dtype != DataType::kFloat32) return makeError(Code::kInternalError, "the test's rail moves floats only");
    const size_t m = members.size(), c = a.count;
    size_t me = 0;
    while (members[me] != boot.rank()) ++me;
    const size_t in = a.type == algo::CollType::kReduceScatter ? m * c : c;
    std::vector<float> all(in * static_cast<size_t>(nranks));
    std::memcpy(all.data() + in * static_cast<size_t>(boot.rank()), a.sendbuf, in * sizeof(float));
    LOOM_TRY(boot.allGather(all.data(), in * sizeof(float), waitFor(20)));
    auto of = [&](size_t member, size_t i) { return all[static_cast<size_t>(members[member]) * in + i]; };
    auto fold = [&](size_t i) {
      float v = of(0, i);
      for (size_t k = 1; k < m; ++k) v = a.op == RedOp::kMax ? std::max(v, of(k, i)) : v + of(k, i);
      return a.op == RedOp::kAvg ? v / static_cast<float>(nranks) : v;
    };
    auto* out = static_cast<float*>(a.recvbuf);
    const size_t root = static_cast<size_t>(a.root);
    for (size_t i = 0; i < c; ++i) switch (a.type) {
        case algo::CollType::kAllReduce: out[i] = fold(i); break;
        case algo::CollType::kReduceScatter: out[i] = fold(me * c + i); break;
        case algo::CollType::kBroadcast: out[i] = of(root, i); break;
        case algo::CollType::kReduce:
          if (me == root) out[i] = fold(i);
          break;
        case algo::CollType::kAllGather:
          for (size_t k = 0; k < m; ++k) out[k * c + i] = of(k, i);
          break;
      }
    return Status::ok();
  };
}

// Varied so that max takes its value from different ranks, integral so that
// every order of summation gives the same floats.
float inputOf(int rank, size_t i) { return static_cast<float>(((rank + 1) * 7919 + i * 104729) % 1000); }

struct Call {
  algo::CollType type = algo::CollType::kAllReduce;
  size_t count = 0;
  RedOp op = RedOp::kSum;
  int root = 0;
  bool inPlace = false;
};

// How many elements the call's send and receive buffers hold on `rank`.
size_t sendElems(const Call& call, int nranks) {
  return call.type == algo::CollType::kReduceScatter ? call.count * static_cast<size_t>(nranks) : call.count;
}
size_t recvElems(const Call& call, int nranks) {
  return call.type == algo::CollType::kAllGather ? call.count * static_cast<size_t>(nranks) : call.count;
}

struct RunResult {
  std::vector<std::vector<float>> outputs;  // each rank's receive buffer after the call
  std::vector<DataPath> paths;
  std::vector<std::vector<RailCall>> railCalls;
  std::vector<int> hostCalls;
  std::vector<std::string> errors;
};

bool runOne(CommDevices& devices, LocalBootstrap& boot, int n, int rank, const Call& call, RunResult* result);

// Runs `calls` one after another on one set of ranks (engines, scratch and
// staging buffers reused and grown between calls); a result per call.
std::vector<RunResult> runCalls(const Layout& layout, const std::vector<Call>& calls) {
  const int n = layout.nranks();
  std::vector<RunResult> results(calls.size());
  for (RunResult& res : results) {
    res.outputs.assign(static_cast<size_t>(n), {});
    res.paths.assign(static_cast<size_t>(n), DataPath::kHost);
    res.railCalls.assign(static_cast<size_t>(n), {});
    res.hostCalls.assign(static_cast<size_t>(n), 0);
    res.errors.assign(static_cast<size_t>(n), "");
  }
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
    std::string& error = results[0].errors[me];
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
    cds.hosts = layout.hosts;
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
    for (size_t k = 0; k < calls.size(); ++k) {
      if (!runOne(devices, boot, n, rank, calls[k], &results[k])) return;
    }
  });
  return results;
}

RunResult runCall(const Layout& layout, const Call& call) { return runCalls(layout, {call})[0]; }

bool runOne(CommDevices& devices, LocalBootstrap& boot, int n, int rank, const Call& call, RunResult* result) {
  RunResult& res = *result;
  const size_t me = static_cast<size_t>(rank);
  std::string& error = res.errors[me];
  // In place: the send buffer is the rank's block of the receive buffer
  // (all-gather), the receive buffer the rank's block of the send buffer
  // (reduce-scatter), or the same buffer.
  const size_t ns = sendElems(call, n), nr = recvElems(call, n);
  std::vector<float> sendBuf(ns), recvBuf(nr, -1.0f);
  std::vector<float>& whole = call.inPlace && call.type == algo::CollType::kAllGather ? recvBuf : sendBuf;
  const size_t at = call.inPlace && call.type == algo::CollType::kAllGather ? me * call.count : 0;
  for (size_t i = 0; i < ns; ++i) whole[at + i] = inputOf(rank, i);
  algo::CollArgs args;
  args.type = call.type;
  args.dtype = DataType::kFloat32;
  args.op = call.op;
  args.count = call.count;
  args.root = call.root;
  args.sendbuf = sendBuf.data();
  args.recvbuf = recvBuf.data();
  if (call.inPlace) {
    if (call.type == algo::CollType::kAllGather) args.sendbuf = recvBuf.data() + me * call.count;
    else if (call.type == algo::CollType::kReduceScatter) args.recvbuf = sendBuf.data() + me * call.count;
    else args.recvbuf = sendBuf.data();
  }
  bool handled = false;
  // The whole-communicator staged path: counted, and computed through the
  // bootstrap too, so that a wrong choice shows as a count rather than a hang.
  std::vector<RailCall> wholeCalls;
  auto runHost = [&](const algo::CollArgs& host) -> Status {
    ++res.hostCalls[me];
    std::vector<int> everyone;
    for (int r = 0; r < n; ++r) everyone.push_back(r);
    return railStep(boot, n, &wholeCalls)(host, everyone);
  };
  Status s = devices.runCollective(args, waitFor(30), runHost, &handled, railStep(boot, n, &res.railCalls[me]));
  if (!s.isOk()) error = s.message();
  else if (!handled) error = "not handled";
  res.paths[me] = devices.lastPath();
  const float* out = static_cast<const float*>(args.recvbuf);
  res.outputs[me].assign(out, out + nr);
  return error.empty();
}

// What rank r's receive buffer must hold, computed from the inputs alone.
std::vector<float> reference(const Call& call, int n, int r) {
  const size_t c = call.count;
  auto fold = [&](size_t i) {
    float v = inputOf(0, i);
    for (int q = 1; q < n; ++q) v = call.op == RedOp::kMax ? std::max(v, inputOf(q, i)) : v + inputOf(q, i);
    return call.op == RedOp::kAvg ? v / static_cast<float>(n) : v;
  };
  std::vector<float> want(recvElems(call, n));
  for (size_t i = 0; i < c; ++i) switch (call.type) {
      case algo::CollType::kAllReduce: want[i] = fold(i); break;
      case algo::CollType::kReduceScatter: want[i] = fold(static_cast<size_t>(r) * c + i); break;
      case algo::CollType::kBroadcast: want[i] = inputOf(call.root, i); break;
      case algo::CollType::kReduce:
        // Off the root the receive buffer keeps what it held.
        want[i] = r == call.root ? fold(i) : call.inPlace ? inputOf(r, i) : -1.0f;
        break;
      case algo::CollType::kAllGather:
        for (int q = 0; q < n; ++q) want[static_cast<size_t>(q) * c + i] = inputOf(q, i);
        break;
    }
  return want;
}

void expectReference(const Layout& layout, const RunResult& res, const Call& call) {
  const int n = layout.nranks();
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(res.errors[static_cast<size_t>(r)], "") << "rank " << r;
    const std::vector<float> want = reference(call, n, r);
    const std::vector<float>& got = res.outputs[static_cast<size_t>(r)];
    ASSERT_EQ(got.size(), want.size()) << "rank " << r;
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(got[i], want[i]) << "rank " << r << " element " << i << " of " << want.size();
  }
}

// The elements one rank stages per call over its rail (the larger of what
// the rail step reads and writes): 1/L of the call's data, with L ranks per
// host, where staging the whole call moves all of it.
size_t railElems(const Call& call, const Layout& layout) {
  const size_t L = layout.hosts[0].size(), H = layout.hosts.size();
  if (call.type == algo::CollType::kAllGather || call.type == algo::CollType::kReduceScatter) return H * call.count;
  return call.count / L + call.count % L;
}

// Checks every rank's output and that each rank took the path and staged only its fraction.
void runAndCheck(const Layout& layout, const Call& call) {
  SCOPED_TRACE(std::string(algo::collTypeName(call.type)) + ", " + std::to_string(layout.nranks()) +
               " ranks, count " + std::to_string(call.count) + ", " + redOpName(call.op) + ", root " +
               std::to_string(call.root) + (call.inPlace ? ", in place" : ", out of place"));
  const RunResult res = runCall(layout, call);
  expectReference(layout, res, call);
  if (::testing::Test::HasFatalFailure()) return;
  for (int r = 0; r < layout.nranks(); ++r) {
    const auto& calls = res.railCalls[static_cast<size_t>(r)];
    EXPECT_EQ(res.paths[static_cast<size_t>(r)], DataPath::kEngineAcrossHosts) << "rank " << r;
    EXPECT_EQ(res.hostCalls[static_cast<size_t>(r)], 0) << "rank " << r << ": nothing staged whole";
    ASSERT_EQ(calls.size(), 1u) << "rank " << r << ": one rail step per call";
    EXPECT_EQ(calls[0].type, call.type) << "rank " << r;
    const size_t staged =
        calls[0].count * (call.type == algo::CollType::kAllGather || call.type == algo::CollType::kReduceScatter
                              ? layout.hosts.size()
                              : 1);
    EXPECT_EQ(staged, railElems(call, layout)) << "rank " << r << ": elements staged over the rail";
  }
}

const std::vector<Layout>& layouts() {
  // Two hosts of two ranks; three of two with the ranks interleaved.
  static const std::vector<Layout> all = {Layout{{{0, 1}, {2, 3}}}, Layout{{{0, 3}, {1, 4}, {2, 5}}}};
  return all;
}
const std::vector<size_t> kCounts = {1, 3, 1001, 40000};

// Shards, the tail past them, in and out of place, sum / max / avg.
TEST(EngineAcrossHosts, AllReduceRunsInEachHostsEngineAndStagesOnlyTheRails) {
  for (const Layout& layout : layouts())
    for (size_t count : kCounts)
      for (RedOp op : {RedOp::kSum, RedOp::kMax, RedOp::kAvg})
        for (bool inPlace : {false, true}) {
          runAndCheck(layout, {algo::CollType::kAllReduce, count, op, 0, inPlace});
          if (::testing::Test::HasFatalFailure()) return;
        }
}

// Each rank's block goes to its rail, the columns through the engine, and
// back into rank order, which interleaved hosts scatter.
TEST(EngineAcrossHosts, AllGatherStagesOnlyTheRankBlockAndItsRail) {
  for (const Layout& layout : layouts())
    for (size_t count : kCounts)
      for (bool inPlace : {false, true}) {
        runAndCheck(layout, {algo::CollType::kAllGather, count, RedOp::kSum, 0, inPlace});
        if (::testing::Test::HasFatalFailure()) return;
      }
}

TEST(EngineAcrossHosts, ReduceScatterStagesOnlyTheRailsColumn) {
  for (const Layout& layout : layouts())
    for (size_t count : kCounts)
      for (RedOp op : {RedOp::kSum, RedOp::kMax, RedOp::kAvg})
        for (bool inPlace : {false, true}) {
          runAndCheck(layout, {algo::CollType::kReduceScatter, count, op, 0, inPlace});
          if (::testing::Test::HasFatalFailure()) return;
        }
}

// Roots on every host and at both local positions (ranks 1, 2 and the last).
std::vector<int> rootsOf(const Layout& layout) { return {1, 2, layout.nranks() - 1}; }

TEST(EngineAcrossHosts, BroadcastStagesOneShardPerRankFromTheRootsHost) {
  for (const Layout& layout : layouts())
    for (int root : rootsOf(layout))
      for (size_t count : kCounts)
        for (bool inPlace : {false, true}) {
          runAndCheck(layout, {algo::CollType::kBroadcast, count, RedOp::kSum, root, inPlace});
          if (::testing::Test::HasFatalFailure()) return;
        }
}

// Every op at every count would be 72 runs a layout; the ops take turns over
// the counts and roots instead, each op still meeting a tail and a root on
// either local position.
TEST(EngineAcrossHosts, ReduceStagesOneShardPerRankTowardsTheRootsHost) {
  const RedOp ops[] = {RedOp::kSum, RedOp::kMax, RedOp::kAvg};
  for (const Layout& layout : layouts()) {
    size_t turn = 0;
    for (int root : rootsOf(layout))
      for (size_t count : kCounts)
        for (bool inPlace : {false, true}) {
          runAndCheck(layout, {algo::CollType::kReduce, count, ops[turn++ % 3], root, inPlace});
          if (::testing::Test::HasFatalFailure()) return;
        }
  }
}

// One set of ranks runs every collective in turn, the counts growing and
// shrinking: the engine's scratch and the pinned staging are reused and
// grown between calls, and the results stay right.
TEST(EngineAcrossHosts, CallsInSequenceReuseAndGrowTheirBuffers) {
  const Layout& layout = layouts()[1];
  std::vector<Call> calls;
  for (size_t count : {size_t{1001}, size_t{3}, size_t{40000}, size_t{1001}})
    for (algo::CollType type : {algo::CollType::kReduceScatter, algo::CollType::kAllGather, algo::CollType::kReduce,
                                algo::CollType::kBroadcast, algo::CollType::kAllReduce})
      calls.push_back({type, count, RedOp::kSum, 4, false});
  const std::vector<RunResult> results = runCalls(layout, calls);
  for (size_t k = 0; k < calls.size(); ++k) {
    SCOPED_TRACE("call " + std::to_string(k) + ": " + algo::collTypeName(calls[k].type) + ", count " +
                 std::to_string(calls[k].count));
    expectReference(layout, results[k], calls[k]);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// Hosts of different sizes have no rails: every rank stages the whole call.
TEST(EngineAcrossHosts, UnevenHostsStageTheWholeCallOnEveryRank) {
  const Layout layout{{{0, 1, 2}, {3}}};
  for (algo::CollType type : {algo::CollType::kAllReduce, algo::CollType::kAllGather, algo::CollType::kBroadcast}) {
    const Call call{type, 1001, RedOp::kSum, 1, false};
    const RunResult res = runCall(layout, call);
    expectReference(layout, res, call);
    for (int r = 0; r < layout.nranks(); ++r) {
      EXPECT_EQ(res.paths[static_cast<size_t>(r)], DataPath::kStaged) << "rank " << r;
      EXPECT_EQ(res.hostCalls[static_cast<size_t>(r)], 1) << "rank " << r;
    }
  }
}

}  // namespace
}  // namespace loom::cuda
