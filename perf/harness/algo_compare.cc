#include "perf/harness/algo_compare.h"

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "perf/harness/algo_table.h"
#include "perf/harness/datatypes.h"

namespace loom::perf {
namespace {

[[noreturn]] void fail(int rank, const std::string& call, loomResult_t result, loomComm_t comm) {
  std::fprintf(stderr, "rank %d: %s failed: %s: %s\n", rank, call.c_str(), loomGetErrorString(result),
               loomGetLastError(comm));
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(1);
}

// Zeroed, page-aligned host memory (no page fault inside a timed call).
class AlignedBuffer {
 public:
  explicit AlignedBuffer(size_t bytes) : bytes_(std::max<size_t>((bytes + 4095) / 4096 * 4096, 4096)) {
    data_.reset(static_cast<std::byte*>(std::aligned_alloc(4096, bytes_)));
    if (!data_) {
      std::fprintf(stderr, "perf --algos: cannot allocate %zu bytes of host memory\n", bytes_);
      std::_Exit(1);
    }
    std::memset(data_.get(), 0, bytes_);
  }
  std::byte* data() const { return data_.get(); }

 private:
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  size_t bytes_;
  std::unique_ptr<std::byte, Free> data_;
};

// LOOM_ALGO and LOOM_PROTO as the process started, restored once every
// communicator exists.
class LoomAlgoEnv {
 public:
  LoomAlgoEnv() {
    if (const char* v = std::getenv("LOOM_ALGO")) algo_ = v;
    if (const char* v = std::getenv("LOOM_PROTO")) proto_ = v;
  }
  // "auto" lets the tuner choose among everything: LOOM_ALGO unset (LOOM_PROTO
  // as the user set it). "ring/ll" forces LOOM_ALGO=ring and LOOM_PROTO=ll.
  void force(const std::string& name) const {
    const size_t slash = name.find('/');
    if (name == "auto") unsetenv("LOOM_ALGO");
    else setenv("LOOM_ALGO", name.substr(0, slash).c_str(), 1);
    if (slash != std::string::npos) setenv("LOOM_PROTO", name.substr(slash + 1).c_str(), 1);
    else set("LOOM_PROTO", proto_);
  }
  void restore() const {
    set("LOOM_ALGO", algo_);
    set("LOOM_PROTO", proto_);
  }

 private:
  static void set(const char* variable, const std::optional<std::string>& value) {
    if (value) setenv(variable, value->c_str(), 1);
    else unsetenv(variable);
  }
  std::optional<std::string> algo_;
  std::optional<std::string> proto_;
};

// What the threads of this process share.
struct ProcessShared {
  const PerfOptions& options;
  const LoomCollective& collective;
  const loomUniqueId& id;
  int firstRank;
  int nranks;
  std::barrier<>& threads;  // the process's rank threads: environment changes happen between two waits
  LoomAlgoEnv& env;
};

// One rank: its control communicator and one communicator per listed name.
class ComparisonRank {
 public:
  ComparisonRank(const ProcessShared& p, int thread) : p_(p), thread_(thread), rank_(p.firstRank + thread) {
    check("loomCommInitRank (control)", loomCommInitRank(&control_, p.nranks, p.id, rank_));
    check("loomStreamCreate", loomStreamCreate(&stream_));
    p_.threads.arrive_and_wait();  // every thread has read its configuration
    for (const std::string& name : p.options.algos) comms_.push_back(createForced(name));
    p_.threads.arrive_and_wait();
    if (thread_ == 0) p_.env.restore();
  }
  ~ComparisonRank() {
    for (loomComm_t c : comms_) check("loomCommDestroy", loomCommDestroy(c), c);
    check("loomStreamDestroy", loomStreamDestroy(stream_));
    check("loomCommDestroy (control)", loomCommDestroy(control_));
  }
  ComparisonRank(const ComparisonRank&) = delete;
  ComparisonRank& operator=(const ComparisonRank&) = delete;

  // Measures every size for one type and op; rank 0 prints the table.
  // Returns the wrong values of the checked calls, summed over ranks and communicators.
  int64_t run(loomDataType_t type, loomRedOp_t op, uint64_t seed, std::byte* send, std::byte* recv) {
    const std::vector<size_t> sizes = sweepSizes(p_.options);
    std::vector<AlgoRow> rows;
    std::vector<int64_t> wrongPerComm(comms_.size(), 0);
    for (size_t i = 0; i < sizes.size(); ++i)
      rows.push_back(measureSize(sizes[i], type, op, seed + i, send, recv, &wrongPerComm));
    int64_t wrong = 0;
    for (int64_t w : wrongPerComm) wrong += w;
    if (rank_ == 0) {
      const auto& shape = p_.collective.shape;
      std::printf("#\n# %s %s\n", typeName(type), shape.usesOp ? opName(op) : "(no op)");
      printAlgoTable(stdout, p_.options.algos, rows);
      if (!p_.options.check) {
        std::printf("# results not checked (-c 0)\n");
      } else {
        std::string perComm;
        for (size_t k = 0; k < comms_.size(); ++k)
          perComm += (k ? ", " : "") + p_.options.algos[k] + " " + std::to_string(wrongPerComm[k]);
        std::printf("# wrong values: %lld (%s)%s\n", static_cast<long long>(wrong), perComm.c_str(),
                    wrong ? "  <-- WRONG" : "");
      }
      std::fflush(stdout);
    }
    return wrong;
  }

 private:
  void check(const std::string& call, loomResult_t r, loomComm_t comm = nullptr) {
    if (r != loomSuccess) fail(rank_, call, r, comm ? comm : control_);
  }

  // A fresh unique id from rank 0 (broadcast over the control communicator),
  // LOOM_ALGO set while every thread of this process creates its communicator.
  loomComm_t createForced(const std::string& name) {
    loomUniqueId id{};
    if (rank_ == 0) check("loomGetUniqueId", loomGetUniqueId(&id));
    check("loomBroadcast (unique id)", loomBroadcast(&id, &id, sizeof id, loomUint8, 0, control_, nullptr));
    p_.threads.arrive_and_wait();
    if (thread_ == 0) p_.env.force(name);
    p_.threads.arrive_and_wait();
    loomComm_t comm = nullptr;
    check("loomCommInitRank (" + name + ")", loomCommInitRank(&comm, p_.nranks, id, rank_));
    p_.threads.arrive_and_wait();  // every thread has read LOOM_ALGO before the next name is set
    return comm;
  }

  void controlBarrier() {
    const int32_t one = 1;
    int32_t sum = 0;
    check("loomAllReduce (barrier)", loomAllReduce(&one, &sum, 1, loomInt32, loomSum, control_, nullptr));
  }

  void launch(loomComm_t comm, const CollArgs& args) {
    loomStream_t stream = p_.options.blocking ? nullptr : stream_;
    check(p_.collective.callName, p_.collective.run(args, comm, stream), comm);
  }

  void iteration(loomComm_t comm, const CollArgs& args) {
    const int agg = p_.options.aggIters;
    if (agg > 1) check("loomGroupStart", loomGroupStart());
    for (int i = 0; i < agg; ++i) launch(comm, args);
    if (agg > 1) check("loomGroupEnd", loomGroupEnd());
  }

  void sync(loomComm_t comm) { check("loomStreamSynchronize", loomStreamSynchronize(stream_), comm); }

  // Seconds per call of -n timed iterations on this rank.
  double timeBlock(loomComm_t comm, const CollArgs& args) {
    controlBarrier();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < p_.options.iters; ++i) iteration(comm, args);
    sync(comm);
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    return elapsed.count() / (static_cast<double>(p_.options.iters) * p_.options.aggIters);
  }

  std::string lastAlgorithm(loomComm_t comm) {
    char name[128] = "";
    check("loomCommGetLastAlgorithm", loomCommGetLastAlgorithm(comm, name, sizeof name), comm);
    return name;
  }

  // Combines every rank's times as -a says (one all-reduce for the whole size).
  void combine(std::vector<double>* seconds) {
    if (p_.options.combine == TimeCombine::kRank0) return;
    const loomRedOp_t op = p_.options.combine == TimeCombine::kMin   ? loomMin
                           : p_.options.combine == TimeCombine::kMax ? loomMax
                                                                     : loomSum;
    check("loomAllReduce (times)",
          loomAllReduce(seconds->data(), seconds->data(), seconds->size(), loomFloat64, op, control_, nullptr));
    if (op == loomSum)
      for (double& s : *seconds) s /= p_.nranks;
  }

  AlgoRow measureSize(size_t bytes, loomDataType_t type, loomRedOp_t op, uint64_t seed, std::byte* send,
                      std::byte* recv, std::vector<int64_t>* wrongPerComm) {
    const auto& shape = p_.collective.shape;
    const BufferLayout layout = shape.layout(bytes, typeSize(type), p_.nranks);
    const CollArgs args{send, recv, layout.paramCount, type, shape.usesOp ? op : loomSum, p_.options.root};
    const DataContext data{DataSpec{type, op, p_.nranks, seed}, rank_, p_.options.root};
    shape.fillInput(data, send, layout.sendCount);

    const size_t n = comms_.size();
    const int reps = p_.options.algoReps;
    for (loomComm_t comm : comms_) {
      for (int i = 0; i < p_.options.warmupIters; ++i) iteration(comm, args);
      sync(comm);
    }
    std::vector<double> seconds(n * static_cast<size_t>(reps));  // [comm][round]
    std::vector<std::set<std::string>> ran(n);
    std::vector<int> timed(n, 0);  // rounds timed: a prefix, since a comm once skipped stays skipped
    auto ranItself = [&](size_t k) {
      for (const std::string& s : ran[k])
        if (!ranForced(p_.options.algos[k], s)) return false;
      return true;
    };
    for (int r = 0; r < reps; ++r)
      for (size_t j = 0; j < n; ++j) {
        const size_t k = (j + static_cast<size_t>(r)) % n;  // each round starts one further along
        // A forced algorithm that fell back (it does not apply at this size)
        // shows n/a whatever its time: one round says so. Every rank sees the
        // same choice, so all skip alike.
        if (r > 0 && !ranItself(k)) continue;
        seconds[k * reps + r] = timeBlock(comms_[k], args);
        ++timed[k];
        ran[k].insert(lastAlgorithm(comms_[k]));
      }
    combine(&seconds);

    AlgoRow row{layout.reportedCount * typeSize(type), {}};
    for (size_t k = 0; k < n; ++k) {
      std::vector<double> mine(seconds.begin() + static_cast<long>(k * reps),
                               seconds.begin() + static_cast<long>(k * reps + timed[k]));
      const size_t half = mine.size() / 2;
      std::nth_element(mine.begin(), mine.begin() + static_cast<long>(half), mine.end());
      double median = mine[half];
      if (mine.size() % 2 == 0)
        median = (median + *std::max_element(mine.begin(), mine.begin() + static_cast<long>(half))) / 2;
      AlgoCell cell{median * 1e6, "", std::vector<double>(static_cast<size_t>(reps), -1)};
      for (int r = 0; r < timed[k]; ++r) cell.roundsUs[static_cast<size_t>(r)] = seconds[k * reps + r] * 1e6;
      for (const std::string& s : ran[k]) cell.ran += (cell.ran.empty() ? "" : "|") + s;
      row.cells.push_back(cell);
    }
    if (p_.options.check) checkResults(layout, args, data, wrongPerComm);
    return row;
  }

  // One call per communicator on fresh data over a poisoned output.
  void checkResults(const BufferLayout& layout, const CollArgs& args, const DataContext& data,
                    std::vector<int64_t>* wrongPerComm) {
    const auto& shape = p_.collective.shape;
    std::vector<int64_t> wrong(comms_.size(), 0);
    for (size_t k = 0; k < comms_.size(); ++k) {
      fillPoison(args.type, args.recvbuff, layout.recvCount);
      shape.fillInput(data, const_cast<void*>(args.sendbuff), layout.sendCount);
      launch(comms_[k], args);
      sync(comms_[k]);
      wrong[k] = shape.countWrong(data, args.recvbuff, layout.recvCount);
    }
    check("loomAllReduce (wrong counts)",
          loomAllReduce(wrong.data(), wrong.data(), wrong.size(), loomInt64, loomSum, control_, nullptr));
    for (size_t k = 0; k < wrong.size(); ++k) (*wrongPerComm)[k] += wrong[k];
  }

  const ProcessShared& p_;
  int thread_;
  int rank_;
  loomComm_t control_ = nullptr;
  loomStream_t stream_ = nullptr;
  std::vector<loomComm_t> comms_;
};

size_t bufferBytes(const PerfOptions& o, const CollectiveShape& shape, int nranks) {
  size_t bytes = 0;
  for (loomDataType_t type : o.types) {
    const BufferLayout l = shape.layout(o.maxBytes, typeSize(type), nranks);
    bytes = std::max(bytes, std::max(l.sendCount, l.recvCount) * typeSize(type));
  }
  return bytes;
}

void printComparisonHeader(const PerfOptions& o, const LoomCollective& c, int nranks, int threads) {
  std::string names;
  for (const auto& n : o.algos) names += (names.empty() ? "" : ",") + n;
  static const char* const kCombine[] = {"rank 0's", "the average over ranks", "the minimum over ranks",
                                         "the maximum over ranks"};
  std::printf("# %s --algos %s: %d ranks (%d per process), sizes %zu..%zu B\n", c.shape.toolName, names.c_str(),
              nranks, threads, o.minBytes, o.maxBytes);
  std::printf("# one communicator per name (LOOM_ALGO=name while it was created; auto: unset), measured\n"
              "# interleaved: per size -w %d warm-up calls each, then %d rounds; in each round every communicator\n"
              "# in turn (order rotated per round) times -n %d calls after a barrier%s. Time per call (us):\n"
              "# median over rounds of %s; out of place; n/a: the forced algorithm did not run.\n",
              o.warmupIters, o.algoReps, o.iters, o.blocking ? " (blocking: NULL stream)" : "",
              kCombine[static_cast<int>(o.combine)]);
  std::fflush(stdout);
}

}  // namespace

int runAlgoComparison(const PerfOptions& options, const LoomCollective& collective, const loomUniqueId& id,
                      int firstRank, int threads, int nranks) {
  if (firstRank == 0) printComparisonHeader(options, collective, nranks, threads);
  std::barrier<> sync(threads);
  LoomAlgoEnv env;
  const ProcessShared shared{options, collective, id, firstRank, nranks, sync, env};
  const std::vector<loomRedOp_t> ops =
      collective.shape.usesOp ? options.ops : std::vector<loomRedOp_t>{loomNumOps};
  std::vector<int64_t> wrong(static_cast<size_t>(threads), 0);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      ComparisonRank rank(shared, t);
      const size_t bytes = bufferBytes(options, collective.shape, nranks);
      AlignedBuffer send(bytes), recv(bytes);
      for (loomDataType_t type : options.types)
        for (loomRedOp_t op : ops)
          wrong[t] += rank.run(type, op, (static_cast<uint64_t>(type) << 40) ^ (static_cast<uint64_t>(op) << 32),
                               send.data(), recv.data());
    });
  for (auto& w : workers) w.join();
  for (int64_t w : wrong)
    if (w != 0) return 1;
  return 0;
}

}  // namespace loom::perf
