#include "perf/harness/loom_main.h"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "perf/harness/algo_compare.h"
#include "perf/harness/device_buffers.h"
#include "perf/harness/memory_usage.h"
#ifdef LOOM_PERF_WITH_MPI
#include "perf/harness/mpi_bootstrap.h"
#endif
#include "perf/harness/perf_options.h"
#include "perf/harness/rank_layout.h"
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
  // Host buffers (gpu null): collectives go on a Loom stream, or with
  // blocking (-z 1) on the NULL stream, so each call returns when done (Loom
  // runs it on the calling thread, as MPI's blocking calls do).
  // Device buffers: collectives go on the Loom stream bound to the rank's
  // CUDA stream (loomStreamFromCuda), and synchronize() is a CUDA stream
  // synchronize, as in nccl-tests; -z 1 adds one after every call.
  LoomExecutor(const LoomCollective& collective, const loomUniqueId& id, int rank, int nranks, bool blocking,
               RankDevice* gpu)
      : collective_(collective), rank_(rank), nranks_(nranks), blocking_(blocking), gpu_(gpu) {
    check("loomCommInitRank", loomCommInitRank(&comm_, nranks, id, rank));
    check("loomStreamCreate", loomStreamCreate(&stream_));
    if (gpu_) {
      check("loomStreamFromCuda", loomStreamFromCuda(gpu_->cudaStream(), &cudaBound_));
      if (!cudaBound_) {
        std::fprintf(stderr, "rank %d: loomStreamFromCuda returned no stream: Loom finds no usable CUDA device although"
                     " the CUDA runtime lists device %d (use --host-mem for host buffers)\n", rank_, gpu_->device());
        std::fflush(stderr);
        std::_Exit(1);
      }
    }
  }
  ~LoomExecutor() override {
    if (cudaBound_) check("loomStreamDestroy", loomStreamDestroy(cudaBound_));  // before its CUDA stream
    check("loomStreamDestroy", loomStreamDestroy(stream_));
    check("loomCommDestroy", loomCommDestroy(comm_));
  }
  LoomExecutor(const LoomExecutor&) = delete;
  LoomExecutor& operator=(const LoomExecutor&) = delete;

  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  void launch(const CollArgs& args) override {
    loomStream_t stream = gpu_ ? cudaBound_ : blocking_ ? nullptr : stream_;
    check(collective_.callName, collective_.run(args, comm_, stream));
  }
  void groupStart() override { check("loomGroupStart", loomGroupStart()); }
  void groupEnd() override { check("loomGroupEnd", loomGroupEnd()); }
  // Blocking: every call already returned when done and stream_ holds no
  // work, so there is nothing to wait for (MPI's executor waits for nothing either).
  void synchronize() override {
    if (gpu_) gpu_->synchronize();
    else if (!blocking_) check("loomStreamSynchronize", loomStreamSynchronize(stream_));
  }

  bool beginCapture() override {
    if (!gpu_) return false;
    gpu_->beginCapture();
    capturing_ = true;
    return true;
  }
  void endCapture() override {
    capturing_ = false;
    gpu_->endCapture();
  }
  void replayCapture() override { gpu_->launchGraph(); }

  // On the thread and path the timed calls take: a blocking run's barrier on
  // the stream would end on the worker thread, and each rank's caller would
  // start the timed loop only once woken from its wait, a wake-up that, with
  // more ranks than cores, can take longer than a short loop of mid-sized calls.
  void barrier() override {
    const int32_t one = 1;
    int32_t sum = 0;
    loomStream_t stream = gpu_ || !blocking_ ? stream_ : nullptr;
    check("loomAllReduce (barrier)", loomAllReduce(&one, &sum, 1, loomInt32, loomSum, comm_, stream));
    if (stream) waitStream();
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
    if (result != loomSuccess && capturing_) {
      std::fprintf(stderr, "rank %d: -G: %s failed while the timed iterations were being captured into a CUDA graph"
                   " (Loom refuses this capture; run without -G): %s: %s\n", rank_, call, loomGetErrorString(result),
                   loomGetLastError(comm_));
      std::fflush(stdout);
      std::fflush(stderr);
      std::_Exit(1);
    }
    if (result != loomSuccess) fail(rank_, call, result, comm_);
  }

  const LoomCollective& collective_;
  int rank_;
  int nranks_;
  bool blocking_;
  RankDevice* gpu_;
  loomComm_t comm_ = nullptr;
  loomStream_t stream_ = nullptr;     // the harness's own calls, on host memory
  loomStream_t cudaBound_ = nullptr;  // device buffers: bound to gpu_'s CUDA stream
  bool capturing_ = false;
};

// How this process fits into the job.
struct ProcessPlace {
  int process = 0;       // this process's rank in the launcher's job
  int processes = 1;     // processes in the job
  int localProcess = 0;  // among this host's processes: which devices its ranks start at
  loomUniqueId id{};
};

[[noreturn]] void failPlace(const char* tool, const char* call, loomResult_t r) {
  std::fprintf(stderr, "%s: %s failed: %s: %s\n", tool, call, loomGetErrorString(r), loomGetLastError(nullptr));
  std::fflush(stderr);
  std::_Exit(1);
}

// Any launcher loomGetLaunchEnv knows gives one job of all its processes:
// MPI's launchers through MPI when the tools link it (as nccl-tests do), the
// others (and MPI's without MPI here) through loomGetUniqueIdFromEnv. A
// wrong or partial launcher environment ends the process naming the
// variable; only without any launcher is this process a job of its own.
void readProcessPlace(const char* tool, ProcessPlace* place) {
  int localProcess = 0;
  const char* launcher = "";
  loomResult_t r = loomGetLaunchEnv(&place->process, &place->processes, &localProcess, &launcher);
  if (r != loomSuccess) failPlace(tool, "loomGetLaunchEnv", r);
  if (place->processes == 0) {
    place->process = 0;
    place->processes = 1;
    r = loomGetUniqueId(&place->id);
    if (r != loomSuccess) failPlace(tool, "loomGetUniqueId", r);
    return;
  }
  place->localProcess = localProcess;
#ifdef LOOM_PERF_WITH_MPI
  if (isMpiLauncher(launcher)) {
    if (!mpiShareUniqueId(tool, place->processes, &place->id, &place->process, &place->processes)) {
      std::fflush(stderr);
      std::_Exit(1);
    }
    return;
  }
#endif
  r = loomGetUniqueIdFromEnv(&place->id, &place->process, &place->processes);
  if (r != loomSuccess) failPlace(tool, "loomGetUniqueIdFromEnv", r);
}

}  // namespace

int loomPerfMain(int argc, char** argv, const LoomCollective& collective) {
  noteStartOfRun();  // -M's "Initialization" counts from here
  PerfOptions options;
  switch (parseOptions(argc, argv, &options)) {
    case ParseOutcome::kHelp: return 0;
    case ParseOutcome::kError: return 2;
    case ParseOutcome::kRun: break;
  }
  if (options.timeoutSeconds > 0) setenv("LOOM_TIMEOUT", std::to_string(options.timeoutSeconds).c_str(), 1);

  ProcessPlace place;
  readProcessPlace(argv[0], &place);
  const int nranks = place.processes * options.threads * options.gpus;
  if (collective.shape.usesRoot && options.root >= nranks) {
    if (place.process == 0) std::fprintf(stderr, "%s: -r %d is not a rank (there are %d)\n", argv[0], options.root, nranks);
    return 2;
  }

  // --host-mem and --algos never touch the CUDA runtime.
  const DeviceInventory devices = options.hostMemory || !options.algos.empty() ? DeviceInventory{} : findDevices();
  const MemoryChoice memory = chooseMemory(options, devices.count, devices.whyNone);
  if (!memory.error.empty()) {
    if (place.process == 0) std::fprintf(stderr, "%s: %s\n", argv[0], memory.error.c_str());
    return 2;
  }
  if (!options.algos.empty()) {
    if (place.process == 0) {
      std::printf("%s\n", memory.note.c_str());
      std::fflush(stdout);
    }
    return runAlgoComparison(options, collective, place.id, place.process * options.threads, options.threads, nranks);
  }
  // nccl-tests' first header line names the headers' and the library's versions.
  int libraryVersion = 0;
  if (loomGetVersion(&libraryVersion) != loomSuccess) libraryVersion = 0;
  const HeaderVersions versions{LOOM_VERSION_CODE, libraryVersion};

  // One thread per rank: -t threads x -g ranks each (nccl-tests drives a
  // thread's -g GPUs from that one thread; here each has its own, which
  // gives the same ranks, devices and streams).
  const int ranksHere = options.threads * options.gpus;
  std::vector<SweepOutcome> outcomes(ranksHere);
  std::vector<std::thread> threads;
  for (int t = 0; t < options.threads; ++t)
    for (int g = 0; g < options.gpus; ++g) {
      const int local = t * options.gpus + g;
      threads.emplace_back([&, t, g, local] {
        std::unique_ptr<RankDevice> gpu;
        const int rank = globalRank(place.process, t, g, options);
        if (memory.device)
          gpu = std::make_unique<RankDevice>(rank, deviceOf(place.localProcess, t, g, options, devices.count));
        LoomExecutor executor(collective, place.id, rank, nranks, options.blocking, gpu.get());
        const SweepIdentity identity{"loom", "host memory", local, versions, memory.note};
        outcomes[local] = runSweep(options, collective.shape, executor, identity, gpu.get());
      });
    }
  for (std::thread& thread : threads) thread.join();

  int status = 0;
  for (const SweepOutcome& o : outcomes)
    if (o.wrong != 0 || o.outOfBounds != 0 || !o.reportWritten || o.belowMinBusBw) status = 1;
  return status;
}

}  // namespace loom::perf
