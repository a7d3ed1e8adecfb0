#include "perf/harness/loom_main.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "perf/harness/algo_compare.h"
#include "perf/harness/perf_options.h"
#include "perf/harness/sweep.h"

namespace loom::perf {
namespace {

// Prints a failed call with Loom's own message and ends the process: a perf
// tool has nothing sensible to do after a failed collective, and other rank
// threads may be blocked in that collective.
[[noreturn]] void fail(int rank, const char* call, loomResult_t result, loomComm_t comm) {
  std::fprintf(stderr, "rank %d: %s failed: %s: %s\n", rank, call, loomGetErrorString(result),
               loomGetLastError(comm));
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(1);
}

class LoomExecutor final : public RankExecutor {
 public:
  // blocking (-z 1): collectives go on the NULL stream, so each call returns
  // when done (Loom runs it on the calling thread, as MPI's blocking calls do).
  LoomExecutor(const LoomCollective& collective, const loomUniqueId& id, int rank, int nranks, bool blocking)
      : collective_(collective), rank_(rank), nranks_(nranks), blocking_(blocking) {
    check("loomCommInitRank", loomCommInitRank(&comm_, nranks, id, rank));
    check("loomStreamCreate", loomStreamCreate(&stream_));
  }
  ~LoomExecutor() override {
    check("loomStreamDestroy", loomStreamDestroy(stream_));
    check("loomCommDestroy", loomCommDestroy(comm_));
  }
  LoomExecutor(const LoomExecutor&) = delete;
  LoomExecutor& operator=(const LoomExecutor&) = delete;

  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  void launch(const CollArgs& args) override {
    check(collective_.callName, collective_.run(args, comm_, blocking_ ? nullptr : stream_));
  }
  void groupStart() override { check("loomGroupStart", loomGroupStart()); }
  void groupEnd() override { check("loomGroupEnd", loomGroupEnd()); }
  // Blocking: every call already returned when done and stream_ holds no
  // work, so there is nothing to wait for (MPI's executor waits for nothing either).
  void synchronize() override {
    if (!blocking_) check("loomStreamSynchronize", loomStreamSynchronize(stream_));
  }

  void barrier() override {
    const int32_t one = 1;
    int32_t sum = 0;
    check("loomAllReduce (barrier)", loomAllReduce(&one, &sum, 1, loomInt32, loomSum, comm_, stream_));
    waitStream();
  }

  double allReduceDouble(double value, loomRedOp_t op) override {
    double result = 0;
    check("loomAllReduce (time)", loomAllReduce(&value, &result, 1, loomFloat64, op, comm_, stream_));
    waitStream();
    return result;
  }

  int64_t allReduceSum(int64_t value) override {
    int64_t result = 0;
    check("loomAllReduce (error count)", loomAllReduce(&value, &result, 1, loomInt64, loomSum, comm_, stream_));
    waitStream();
    return result;
  }

  std::vector<RankInfo> allGatherInfo(const RankInfo& mine) override {
    std::vector<RankInfo> all(nranks_);
    check("loomAllGather (rank info)", loomAllGather(&mine, all.data(), sizeof(RankInfo), loomUint8, comm_, stream_));
    waitStream();
    return all;
  }

  std::string lastAlgorithm() override {
    char name[128] = "";
    check("loomCommGetLastAlgorithm", loomCommGetLastAlgorithm(comm_, name, sizeof name));
    return name[0] ? name : "-";
  }

 private:
  // The harness's own calls (barrier, timing and error-count reductions) go
  // on stream_ in both modes: wait for them.
  void waitStream() { check("loomStreamSynchronize", loomStreamSynchronize(stream_)); }
  void check(const char* call, loomResult_t result) {
    if (result != loomSuccess) fail(rank_, call, result, comm_);
  }

  const LoomCollective& collective_;
  int rank_;
  int nranks_;
  bool blocking_;
  loomComm_t comm_ = nullptr;
  loomStream_t stream_ = nullptr;
};

// How this process fits into the job.
struct ProcessPlace {
  int process = 0;    // RANK
  int processes = 1;  // WORLD_SIZE
  loomUniqueId id{};
};

void readProcessPlace(const char* tool, ProcessPlace* place) {
  const char* worldSize = std::getenv("WORLD_SIZE");
  const bool launched = worldSize && *worldSize;
  const loomResult_t r = launched ? loomGetUniqueIdFromEnv(&place->id, &place->process, &place->processes)
                                  : loomGetUniqueId(&place->id);
  if (r == loomSuccess) return;
  std::fprintf(stderr, "%s: %s failed: %s: %s\n", tool, launched ? "loomGetUniqueIdFromEnv" : "loomGetUniqueId",
               loomGetErrorString(r), loomGetLastError(nullptr));
  std::fflush(stderr);
  std::_Exit(1);
}

}  // namespace

int loomPerfMain(int argc, char** argv, const LoomCollective& collective) {
  PerfOptions options;
  switch (parseOptions(argc, argv, &options)) {
    case ParseOutcome::kHelp: return 0;
    case ParseOutcome::kError: return 2;
    case ParseOutcome::kRun: break;
  }
  if (options.timeoutSeconds > 0) setenv("LOOM_TIMEOUT", std::to_string(options.timeoutSeconds).c_str(), 1);

  ProcessPlace place;
  readProcessPlace(argv[0], &place);
  const int nranks = place.processes * options.threads;
  if (collective.shape.usesRoot && options.root >= nranks) {
    if (place.process == 0) std::fprintf(stderr, "%s: -r %d is not a rank (there are %d)\n", argv[0], options.root, nranks);
    return 2;
  }

  if (!options.algos.empty())
    return runAlgoComparison(options, collective, place.id, place.process * options.threads, options.threads, nranks);

  std::vector<SweepOutcome> outcomes(options.threads);
  std::vector<std::thread> threads;
  for (int t = 0; t < options.threads; ++t) {
    threads.emplace_back([&, t] {
      LoomExecutor executor(collective, place.id, place.process * options.threads + t, nranks, options.blocking);
      outcomes[t] = runSweep(options, collective.shape, executor, SweepIdentity{"loom", "host memory", t});
    });
  }
  for (std::thread& thread : threads) thread.join();

  int status = 0;
  for (const SweepOutcome& o : outcomes)
    if (o.wrong != 0 || o.outOfBounds != 0 || !o.reportWritten) status = 1;
  return status;
}

}  // namespace loom::perf
