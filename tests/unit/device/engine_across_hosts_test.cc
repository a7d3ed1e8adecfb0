// The device engine in a communicator that spans hosts: each host sets up an
// engine of its own ranks, and the collectives on device buffers run in those
// engines within each host, staging only their inter-host step (one rail per
// local rank) through pinned memory (src/device/engine_across_hosts.h). Ranks
// are threads with an in-process bootstrap, "hosts" are groups of them, the
// engines run on the emulated backend, and the test's own rail step computes
// each collective over the members' staged buffers through the bootstrap.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "common/format.h"
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

// Runs `body` on every rank of `layout`, each a thread with its host's
// engine (emulated) in a CommDevices that spans the hosts; a failed setup
// is written to errors[rank] instead.
using RankBody = std::function<void(CommDevices& devices, LocalBootstrap& boot, int rank)>;
void withRanks(const Layout& layout, std::vector<std::string>* errors, const RankBody& body) {
  const int n = layout.nranks();
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
    std::string& error = (*errors)[me];
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
    body(devices, boot, rank);
  });
}

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
  withRanks(layout, &results[0].errors, [&](CommDevices& devices, LocalBootstrap& boot, int rank) {
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

// ---- Send/recv and all-to-all across hosts (p2p_across_hosts.h) ----

// The host send/recv of these tests, between rank threads: a send is posted
// to its (from, to) queue at once, a receive waits for its pair's next
// message. Sends never wait, so a batch completes once every rank ran its
// matching batch, whatever the order within it.
class Wire {
 public:
  void post(int from, int to, const void* data, size_t bytes) {
    const auto* p = static_cast<const unsigned char*>(data);
    std::lock_guard<std::mutex> lock(mu_);
    queues_[{from, to}].emplace_back(p, p + bytes);
    cv_.notify_all();
  }
  Status take(int from, int to, void* data, size_t bytes) {
    std::unique_lock<std::mutex> lock(mu_);
    auto& q = queues_[{from, to}];
    if (!cv_.wait_for(lock, std::chrono::seconds(20), [&] { return !q.empty(); }))
      return makeError(Code::kTimeout, "rank %d: no message from rank %d", to, from);
    std::vector<unsigned char> msg = std::move(q.front());
    q.pop_front();
    if (msg.size() != bytes)
      return makeError(Code::kRemoteError, "rank %d: %zu bytes from rank %d, expected %zu", to, msg.size(), from, bytes);
    if (bytes) std::memcpy(data, msg.data(), bytes);
    return Status::ok();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::pair<int, int>, std::deque<std::vector<unsigned char>>> queues_;
};

// An op the host send/recv was handed: what the rank staged.
struct HostOp {
  int peer;
  bool send;
  size_t bytes;
};

HostP2P hostSendRecv(Wire& wire, int rank, std::vector<HostOp>* seen) {
  return [&wire, rank, seen](const std::vector<algo::P2POp>& ops) -> Status {
    for (const algo::P2POp& op : ops) {
      seen->push_back({op.peer, op.kind == algo::P2POp::kSend, op.bytes});
      if (op.kind == algo::P2POp::kSend) wire.post(rank, op.peer, op.src, op.bytes);
    }
    for (const algo::P2POp& op : ops)
      if (op.kind == algo::P2POp::kRecv) LOOM_TRY(wire.take(op.peer, rank, op.dst, op.bytes));
    return Status::ok();
  };
}

bool sameHost(const Layout& layout, int a, int b) {
  const auto& h = layout.hostOf(a);
  return std::find(h.begin(), h.end(), b) != h.end();
}

struct P2PResult {
  std::vector<std::string> errors;
  std::vector<std::vector<float>> outputs;          // all-to-all: each rank's receive buffer
  std::vector<std::vector<DataPath>> paths;         // per rank, per batch
  std::vector<std::vector<HostOp>> hostOps;         // per rank, every batch's
  explicit P2PResult(int n)
      : errors(static_cast<size_t>(n)),
        outputs(static_cast<size_t>(n)),
        paths(static_cast<size_t>(n)),
        hostOps(static_cast<size_t>(n)) {}
};

// Checks that each rank handed the host send/recv exactly its ops with
// peers on other hosts: `expected[r]` bytes sent plus received across hosts.
void expectOnlyCrossHostStaged(const Layout& layout, const P2PResult& res, const std::vector<size_t>& expected) {
  for (int r = 0; r < layout.nranks(); ++r) {
    size_t staged = 0;
    for (const HostOp& op : res.hostOps[static_cast<size_t>(r)]) {
      EXPECT_FALSE(sameHost(layout, r, op.peer)) << "rank " << r << " staged an op with its host peer " << op.peer;
      staged += op.bytes;
    }
    EXPECT_EQ(staged, expected[static_cast<size_t>(r)]) << "rank " << r << ": bytes staged";
  }
}

// An all-to-all of `count` floats per pair, as loomAllToAll builds its ops
// (peers staggered; in place: one buffer).
P2PResult runAllToAll(const Layout& layout, size_t count, bool inPlace) {
  const int n = layout.nranks();
  P2PResult res(n);
  Wire wire;
  withRanks(layout, &res.errors, [&](CommDevices& devices, LocalBootstrap&, int rank) {
    const size_t me = static_cast<size_t>(rank), total = count * static_cast<size_t>(n);
    std::vector<float> in(total), outBuf(inPlace ? 0 : total, -1.0f);
    for (size_t i = 0; i < total; ++i) in[i] = inputOf(rank, i);
    float* out = inPlace ? in.data() : outBuf.data();
    std::vector<algo::P2POp> ops;
    for (int i = 0; i < n; ++i) {
      const int to = (rank + i) % n, from = (rank - i + n) % n;
      ops.push_back(algo::P2POp::send(to, in.data() + static_cast<size_t>(to) * count, count * sizeof(float)));
      ops.push_back(algo::P2POp::recv(from, out + static_cast<size_t>(from) * count, count * sizeof(float)));
    }
    bool handled = false;
    Status s = devices.runP2P(ops, waitFor(30), hostSendRecv(wire, rank, &res.hostOps[me]), &handled);
    if (!s.isOk()) res.errors[me] = s.message();
    else if (!handled) res.errors[me] = "not handled";
    res.paths[me].push_back(devices.lastPath());
    res.outputs[me].assign(out, out + total);
  });
  return res;
}

void checkAllToAll(const Layout& layout, size_t count, bool inPlace) {
  SCOPED_TRACE(std::to_string(layout.nranks()) + " ranks on " + std::to_string(layout.hosts.size()) +
               " hosts, count " + std::to_string(count) + (inPlace ? ", in place" : ", out of place"));
  const int n = layout.nranks();
  const P2PResult res = runAllToAll(layout, count, inPlace);
  std::vector<size_t> crossing(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    const size_t me = static_cast<size_t>(r);
    ASSERT_EQ(res.errors[me], "") << "rank " << r;
    EXPECT_EQ(res.paths[me][0], DataPath::kEngineAcrossHosts) << "rank " << r;
    // Block q of rank r's output is block r of rank q's input.
    for (int q = 0; q < n; ++q)
      for (size_t i = 0; i < count; ++i)
        ASSERT_EQ(res.outputs[me][static_cast<size_t>(q) * count + i], inputOf(q, me * count + i))
            << "rank " << r << ", block from rank " << q << ", element " << i;
    const size_t remote = static_cast<size_t>(n) - layout.hostOf(r).size();
    crossing[me] = 2 * remote * count * sizeof(float);  // sent and received
  }
  expectOnlyCrossHostStaged(layout, res, crossing);
}

TEST(EngineAcrossHosts, AllToAllMovesSameHostBlocksInTheEngineAndStagesOnlyCrossHostOnes) {
  for (const Layout& layout : layouts())
    for (size_t count : kCounts)
      for (bool inPlace : {false, true}) {
        checkAllToAll(layout, count, inPlace);
        if (::testing::Test::HasFatalFailure()) return;
      }
}

// The path is chosen per pair, so hosts need not be of one size.
TEST(EngineAcrossHosts, AllToAllOnHostsOfDifferentSizes) {
  for (bool inPlace : {false, true}) {
    checkAllToAll(Layout{{{0, 1, 2}, {3}}}, 1001, inPlace);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// One op of a rank's batch: a message to or from `peer`.
struct Msg {
  int peer;
  bool send;
  size_t bytes;
};
using Batch = std::vector<Msg>;

// Message `seq` (counted per ordered pair) from `from` to `to`, byte i.
unsigned char byteOf(int from, int to, int seq, size_t i) {
  return static_cast<unsigned char>((static_cast<size_t>(from * 37 + to * 11 + seq * 5) + i) % 251);
}

// Each rank runs its batches in order (an empty batch: no call); every
// received message is checked against the sender's pattern on the spot.
P2PResult runBatches(const Layout& layout, const std::vector<std::vector<Batch>>& perRank, double seconds = 30) {
  const int n = layout.nranks();
  P2PResult res(n);
  Wire wire;
  withRanks(layout, &res.errors, [&](CommDevices& devices, LocalBootstrap&, int rank) {
    const size_t me = static_cast<size_t>(rank);
    std::map<int, int> sent, received;  // per peer
    for (size_t k = 0; k < perRank[me].size(); ++k) {
      const Batch& batch = perRank[me][k];
      if (batch.empty()) continue;
      std::vector<std::vector<unsigned char>> bufs;
      std::vector<algo::P2POp> ops;
      std::vector<int> seqs;
      for (const Msg& m : batch) {
        const int seq = (m.send ? sent : received)[m.peer]++;
        seqs.push_back(seq);
        bufs.emplace_back(m.bytes, static_cast<unsigned char>(0xEE));
        if (m.send)
          for (size_t i = 0; i < m.bytes; ++i) bufs.back()[i] = byteOf(rank, m.peer, seq, i);
      }
      for (size_t i = 0; i < batch.size(); ++i)
        ops.push_back(batch[i].send ? algo::P2POp::send(batch[i].peer, bufs[i].data(), batch[i].bytes)
                                    : algo::P2POp::recv(batch[i].peer, bufs[i].data(), batch[i].bytes));
      bool handled = false;
      Status s = devices.runP2P(ops, waitFor(seconds), hostSendRecv(wire, rank, &res.hostOps[me]), &handled);
      res.paths[me].push_back(devices.lastPath());
      if (!s.isOk() || !handled) {
        res.errors[me] = strprintf("batch %zu: %s", k, s.isOk() ? "not handled" : s.message().c_str());
        return;
      }
      for (size_t i = 0; i < batch.size(); ++i) {
        if (batch[i].send) continue;
        for (size_t b = 0; b < batch[i].bytes; ++b)
          if (bufs[i][b] != byteOf(batch[i].peer, rank, seqs[i], b)) {
            res.errors[me] = strprintf("batch %zu, message %d from rank %d: byte %zu is %d, expected %d", k, seqs[i],
                                       batch[i].peer, b, bufs[i][b], byteOf(batch[i].peer, rank, seqs[i], b));
            return;
          }
      }
    }
  });
  return res;
}

// Bytes each rank sends and receives across hosts in `perRank`.
std::vector<size_t> crossHostBytes(const Layout& layout, const std::vector<std::vector<Batch>>& perRank) {
  std::vector<size_t> bytes(perRank.size());
  for (size_t r = 0; r < perRank.size(); ++r)
    for (const Batch& b : perRank[r])
      for (const Msg& m : b)
        if (!sameHost(layout, static_cast<int>(r), m.peer)) bytes[r] += m.bytes;
  return bytes;
}

// A group where every rank sends to every rank (itself included), twice to
// its next rank (two rounds of the engine's batch), in sizes from one byte
// to 160000, and receives to match; one rank only talks across hosts and
// takes the staged path alone.
std::vector<std::vector<Batch>> mixedGroup(const Layout& layout) {
  const int n = layout.nranks();
  const size_t sizes[] = {4, 12, 4004, 160000, 1};
  const int loner = n - 1;  // sends and receives only across hosts
  auto size = [&](int from, int to) { return sizes[static_cast<size_t>(from * 3 + to) % 5]; };
  auto talks = [&](int a, int b) { return !((a == loner || b == loner) && sameHost(layout, a, b)); };
  std::vector<std::vector<Batch>> perRank(static_cast<size_t>(n), std::vector<Batch>(1));
  for (int r = 0; r < n; ++r) {
    Batch& b = perRank[static_cast<size_t>(r)][0];
    for (int q = 0; q < n; ++q) {
      if (!talks(r, q)) continue;
      b.push_back({q, true, size(r, q)});
      b.push_back({q, false, size(q, r)});
    }
    const int next = (r + 1) % n, prev = (r - 1 + n) % n;
    if (talks(r, next)) b.push_back({next, true, 777});
    if (talks(r, prev)) b.push_back({prev, false, 777});
  }
  return perRank;
}

TEST(EngineAcrossHosts, SendRecvGroupTakesTheEngineForHostPeersAndStagesOnlyTheOthers) {
  for (const Layout& layout : layouts()) {
    SCOPED_TRACE(std::to_string(layout.nranks()) + " ranks");
    const auto perRank = mixedGroup(layout);
    const P2PResult res = runBatches(layout, perRank);
    const int n = layout.nranks();
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(res.errors[static_cast<size_t>(r)], "") << "rank " << r;
      // The loner has no engine op: all of its batch is staged.
      EXPECT_EQ(res.paths[static_cast<size_t>(r)][0], r == n - 1 ? DataPath::kStaged : DataPath::kEngineAcrossHosts)
          << "rank " << r;
    }
    expectOnlyCrossHostStaged(layout, res, crossHostBytes(layout, perRank));
  }
}

// Rank 0 sends to its host peer 1 (more than the engine's FIFOs hold, so
// the send waits for the receive) and to rank 2 on the other host in one
// group; rank 1 receives from 2 before it receives from 0, and rank 2 sends
// to 1 only after it received from 0. As one fused operation this
// completes; it would not if the engine's share had to finish before the
// staged share started (0 waits for 1, 1 for 2, 2 for 0).
TEST(EngineAcrossHosts, EngineAndStagedSharesOfOneGroupRunSideBySide) {
  const Layout layout{{{0, 1}, {2, 3}}};
  const size_t big = 160000;
  std::vector<std::vector<Batch>> perRank = {
      {{{1, true, big}, {2, true, 64}}},
      {{{2, false, 64}}, {{0, false, big}}},
      {{{0, false, 64}}, {{1, true, 64}}},
      {},
  };
  const P2PResult res = runBatches(layout, perRank, 10);
  for (int r = 0; r < 3; ++r) ASSERT_EQ(res.errors[static_cast<size_t>(r)], "") << "rank " << r;
  EXPECT_EQ(res.paths[0][0], DataPath::kEngineAcrossHosts);
  EXPECT_EQ(res.paths[1][0], DataPath::kStaged);
  EXPECT_EQ(res.paths[1][1], DataPath::kEngineAcrossHosts);
  expectOnlyCrossHostStaged(layout, res, crossHostBytes(layout, perRank));
}

}  // namespace
}  // namespace loom::cuda
