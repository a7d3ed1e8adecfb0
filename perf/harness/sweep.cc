#include "perf/harness/sweep.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "perf/harness/datatypes.h"
#include "perf/harness/device_buffers.h"
#include "perf/harness/memory_bound.h"
#include "perf/harness/memory_usage.h"
#include "perf/harness/nccl_json.h"
#include "perf/harness/report.h"

namespace loom::perf {
namespace {

constexpr size_t kGuardBytes = 64;  // checked past the end of every region a call may touch
constexpr unsigned char kGuardByte = 0xa5;
constexpr size_t kPageBytes = 4096;

// Page-aligned host memory, zeroed on allocation so that no page fault lands
// inside a timed iteration.
class HostBuffer {
 public:
  explicit HostBuffer(size_t bytes) {
    const size_t rounded = std::max<size_t>((bytes + kPageBytes - 1) / kPageBytes * kPageBytes, kPageBytes);
    data_.reset(static_cast<std::byte*>(std::aligned_alloc(kPageBytes, rounded)));
    if (!data_) {
      std::fprintf(stderr, "perf: cannot allocate %zu bytes of host memory\n", rounded);
      std::fflush(stderr);
      std::_Exit(1);
    }
    std::memset(data_.get(), 0, rounded);
  }
  std::byte* data() const { return data_.get(); }

 private:
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::unique_ptr<std::byte, Free> data_;
};

// One of the sweep's two buffers. The collective gets data(); the harness
// writes inputs and reads results in host(). With device buffers host() is
// a mirror that upload() and download() copy to and from the device; with
// host buffers both are the same memory and the copies do nothing.
class SweepBuffer {
 public:
  SweepBuffer(size_t bytes, const RankDevice* gpu) : host_(bytes), gpu_(gpu) {
    if (gpu_) device_ = std::make_unique<DeviceBuffer>(*gpu_, bytes);
  }
  std::byte* data() const { return device_ ? static_cast<std::byte*>(device_->data()) : host_.data(); }
  std::byte* host() const { return host_.data(); }
  void upload(size_t bytes) const {
    if (device_ && bytes) gpu_->upload(device_->data(), host_.data(), bytes);
  }
  void download(size_t bytes) const {
    if (device_ && bytes) gpu_->download(host_.data(), device_->data(), bytes);
  }

 private:
  HostBuffer host_;
  const RankDevice* gpu_;
  std::unique_ptr<DeviceBuffer> device_;
};

// The elements, from the start of the in-place buffer, that an in-place call may touch.
size_t inPlaceExtent(const BufferLayout& l, int nranks) {
  const size_t last = static_cast<size_t>(nranks - 1);
  return std::max(l.sendInPlaceOffset * last + l.sendCount, l.recvInPlaceOffset * last + l.recvCount);
}

size_t bufferBytes(const PerfOptions& o, const CollectiveShape& shape, int nranks) {
  size_t bytes = 0;
  for (loomDataType_t type : o.types) {
    const BufferLayout l = shape.layout(o.maxBytes, typeSize(type), nranks);
    const size_t elements = std::max({l.sendCount, l.recvCount, inPlaceExtent(l, nranks)});
    bytes = std::max(bytes, elements * typeSize(type));
  }
  return bytes + kGuardBytes;
}

// Where one placement's call reads and writes, and the guard bytes past it.
struct Placement {
  CollArgs args;
  size_t sendCount = 0;
  size_t recvCount = 0;
  std::vector<std::byte*> guards;
  size_t sendExtent = 0;  // bytes from the start of each buffer up to the end of its guard
  size_t recvExtent = 0;
};

// Out of place the call uses both buffers from their start; in place it uses
// the receive buffer at nccl-tests' offsets (all-gather sends from
// recvbuff + rank*count, reduce-scatter receives at sendbuff + rank*count).
// Guards sit past everything the call may touch, so none of them overlaps
// another rank's legitimate part of an in-place buffer.
Placement placementFor(const BufferLayout& l, const CollArgs& base, bool inPlace, int rank, int nranks,
                       std::byte* send, std::byte* recv) {
  const size_t ts = typeSize(base.type);
  Placement p{base, l.sendCount, l.recvCount, {}};
  if (inPlace) {
    p.args.sendbuff = recv + l.sendInPlaceOffset * rank * ts;
    p.args.recvbuff = recv + l.recvInPlaceOffset * rank * ts;
    p.guards = {recv + inPlaceExtent(l, nranks) * ts};
    p.recvExtent = inPlaceExtent(l, nranks) * ts + kGuardBytes;
  } else {
    p.args.sendbuff = send;
    p.args.recvbuff = recv;
    p.guards = {send + l.sendCount * ts, recv + l.recvCount * ts};
    p.sendExtent = l.sendCount * ts + kGuardBytes;
    p.recvExtent = l.recvCount * ts + kGuardBytes;
  }
  return p;
}

struct Measurement {
  const PerfOptions& options;
  const CollectiveShape& shape;
  RankExecutor& executor;
  const SweepBuffer& send;
  const SweepBuffer& recv;
};

// A placement twice: `call` points into the buffers the collective gets,
// `host` to the same places in the host memory the harness fills and checks
// (the same pointers with host buffers).
struct PlacedCall {
  Placement call;
  Placement host;
};

void runIteration(const Measurement& m, const CollArgs& args) {
  if (m.options.aggIters > 1) m.executor.groupStart();
  for (int i = 0; i < m.options.aggIters; ++i) m.executor.launch(args);
  if (m.options.aggIters > 1) m.executor.groupEnd();
}

[[noreturn]] void cannotCapture(const Measurement& m) {
  std::fprintf(stderr, "rank %d: -G: this library's executor cannot capture CUDA graphs\n", m.executor.rank());
  std::fflush(stderr);
  std::_Exit(1);
}

// -G: the -n iterations captured once as a graph, then the graph launched
// -G times; seconds per operation. Like nccl-tests, the capture itself is
// not timed.
double timeGraph(const Measurement& m, const CollArgs& args) {
  if (!m.executor.beginCapture()) cannotCapture(m);
  for (int i = 0; i < m.options.iters; ++i) runIteration(m, args);
  m.executor.endCapture();
  m.executor.barrier();
  const auto start = std::chrono::steady_clock::now();
  for (int g = 0; g < m.options.graphLaunches; ++g) {
    m.executor.replayCapture();
    if (m.options.blocking) m.executor.synchronize();
  }
  m.executor.synchronize();
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  return elapsed.count() /
         (static_cast<double>(m.options.graphLaunches) * m.options.iters * m.options.aggIters);
}

// Seconds per operation on this rank: warm-up, align the ranks, then time.
double timeOperation(const Measurement& m, const CollArgs& args) {
  for (int i = 0; i < m.options.warmupIters; ++i) {
    runIteration(m, args);
    if (m.options.blocking) m.executor.synchronize();  // -z 1: never more than one call in flight
  }
  m.executor.synchronize();
  if (m.options.graphLaunches > 0) return timeGraph(m, args);
  m.executor.barrier();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < m.options.iters; ++i) {
    runIteration(m, args);
    if (m.options.blocking) m.executor.synchronize();
  }
  m.executor.synchronize();
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  return elapsed.count() / (static_cast<double>(m.options.iters) * m.options.aggIters);
}

double combineTime(const Measurement& m, double seconds) {
  switch (m.options.combine) {
    case TimeCombine::kRank0: return seconds;  // only rank 0 prints, and it has its own time
    case TimeCombine::kMin: return m.executor.allReduceDouble(seconds, loomMin);
    case TimeCombine::kMax: return m.executor.allReduceDouble(seconds, loomMax);
    default: return m.executor.allReduceDouble(seconds, loomSum) / m.executor.nranks();
  }
}

// Poisons what the call must write, then writes this rank's input (in place,
// the input may overlap the poisoned region, as the call expects), in host
// memory; then copies what the call may touch, guards included, to the device.
void prepareData(const Measurement& m, const PlacedCall& p, const DataContext& data, bool setGuards) {
  fillPoison(p.host.args.type, p.host.args.recvbuff, p.host.recvCount);
  m.shape.fillInput(data, const_cast<void*>(p.host.args.sendbuff), p.host.sendCount);
  if (setGuards)
    for (std::byte* guard : p.host.guards) std::memset(guard, kGuardByte, kGuardBytes);
  m.send.upload(p.host.sendExtent);
  m.recv.upload(p.host.recvExtent);
}

struct CheckCounts {
  int64_t wrong = 0;
  int64_t outOfBounds = 0;
};

// One more call on fresh data, then its result and guard bytes, summed over ranks.
CheckCounts checkOperation(const Measurement& m, const PlacedCall& p, const DataContext& data) {
  prepareData(m, p, data, /*setGuards=*/true);
  m.executor.launch(p.call.args);
  m.executor.synchronize();
  m.send.download(p.host.sendExtent);
  m.recv.download(p.host.recvExtent);
  CheckCounts local;
  local.wrong = m.shape.countWrong(data, p.host.args.recvbuff, p.host.recvCount);
  for (const std::byte* guard : p.host.guards)
    for (size_t i = 0; i < kGuardBytes; ++i) local.outOfBounds += guard[i] != std::byte{kGuardByte};
  return {m.executor.allReduceSum(local.wrong), m.executor.allReduceSum(local.outOfBounds)};
}

}  // namespace

namespace {

// Sweep-wide state: the buffers, the printing rank's rows and the totals.
// streamBytesPerSecond > 0 turns on the memory-bound shares.
class Sweep {
 public:
  Sweep(const PerfOptions& o, const CollectiveShape& shape, RankExecutor& executor, double streamBytesPerSecond,
        const RankDevice* gpu)
      : residentBeforeBuffers_(residentBytes()),
        capacity_(bufferBytes(o, shape, executor.nranks())),
        send_(capacity_, gpu),
        recv_(capacity_, gpu),
        m_{o, shape, executor, send_, recv_},
        gpu_(gpu),
        printing_(executor.rank() == 0),
        streamBytesPerSecond_(streamBytesPerSecond),
        trafficFactor_(streamBytesPerSecond > 0 ? shape.memTrafficFactor(executor.nranks()) : 0.0),
        residentAfterBuffers_(residentBytes()) {}

  void runSizes(loomDataType_t type, loomRedOp_t op, uint64_t seedBase) {
    const std::vector<size_t> sizes = sweepSizes(m_.options);
    for (size_t i = 0; i < sizes.size(); ++i) runSize(sizes[i], type, op, seedBase + 2 * i);
  }

  // Every rank calls this (the -M figures are the largest over ranks).
  SweepOutcome finish(const SweepIdentity& identity, NcclJsonReport* json, FILE* jsonFile) {
    SweepOutcome outcome{wrong_, outOfBounds_, true, false};
    const MemoryUsage usage = m_.options.memoryReport ? memoryUsage() : MemoryUsage{};
    if (!printing_) return outcome;
    const char* minBw = std::getenv("NCCL_TESTS_MIN_BW");
    RunSummary summary{m_.shape.toolName, identity.library, m_.executor.nranks(), streamBytesPerSecond_ / 1e9,
                       outOfBounds_, wrong_, busBwCount_ ? busBwSum_ / busBwCount_ : 0.0,
                       minBw && *minBw ? std::atof(minBw) : -1.0};
    outcome.belowMinBusBw = summary.minBusBw >= 0 && summary.avgBusBw < 0.9 * summary.minBusBw;
    printFooter(stdout, summary);
    if (m_.options.memoryReport) printMemoryUsage(stdout, usage.initialization, usage.userAllocated, usage.collective);
    printEnd(stdout);
    if (jsonFile) {
      json->rows = rows_;
      json->summary = summary;
      outcome.reportWritten = writeNcclJson(jsonFile, *json);
    } else if (!m_.options.jsonPath.empty()) {
      outcome.reportWritten = false;  // createNcclJson said why
    }
    if (!m_.options.loomJsonPath.empty())
      outcome.reportWritten = writeJson(m_.options.loomJsonPath, m_.options, rows_, summary) && outcome.reportWritten;
    return outcome;
  }

 private:
  void runSize(size_t bytes, loomDataType_t type, loomRedOp_t op, uint64_t seed) {
    const int nranks = m_.executor.nranks();
    const int rank = m_.executor.rank();
    const size_t ts = typeSize(type);
    const BufferLayout layout = m_.shape.layout(bytes, ts, nranks);
    const CollArgs base{nullptr, nullptr, layout.paramCount, type, m_.shape.usesOp ? op : loomSum,
                        m_.options.root};
    ResultRow row{layout.reportedCount * ts, layout.reportedCount, type,
                  m_.shape.usesOp ? opName(op) : "none", m_.shape.usesRoot ? m_.options.root : -1, {}, {}, {}};
    if (m_.options.memcpyBaseline && gpu_) row.copy = copyBaseline(row.bytes);
    for (int inPlace = 0; inPlace < 2; ++inPlace) {
      const PlacedCall p{placementFor(layout, base, inPlace, rank, nranks, send_.data(), recv_.data()),
                         placementFor(layout, base, inPlace, rank, nranks, send_.host(), recv_.host())};
      const DataContext data{DataSpec{type, op, nranks, seed + inPlace}, rank, m_.options.root};
      (inPlace ? row.inPlace : row.outOfPlace) = measure(p, data, row.bytes);
    }
    if (printing_) {
      printRow(stdout, row, ExtraColumns{streamBytesPerSecond_ > 0, m_.options.memcpyBaseline && gpu_,
                                         m_.options.algoColumn});
      rows_.push_back(row);
    }
  }

  // --memcpy-baseline: rank 0 alone copies `bytes` device to device, with the
  // collective's -w and -n, while the other ranks wait, so that the copy has
  // the GPU to itself as a 1-rank collective would. Printed by rank 0 only.
  CopyBaseline copyBaseline(size_t bytes) {
    CopyBaseline copy;
    m_.executor.barrier();
    if (printing_ && bytes > 0 && bytes <= capacity_) {
      const double seconds = gpu_->timeCopy(recv_.data(), send_.data(), bytes, m_.options.warmupIters, m_.options.iters);
      copy.timeUs = seconds * 1e6;
      copy.bw = seconds > 0 ? static_cast<double>(bytes) / 1e9 / seconds : 0.0;
    }
    m_.executor.barrier();
    return copy;
  }

  PlacementResult measure(const PlacedCall& p, const DataContext& data, size_t bytes) {
    prepareData(m_, p, data, /*setGuards=*/false);
    PlacementResult r;
    const double mine = timeOperation(m_, p.call.args);
    // Before combineTime: its all-reduce would become the last collective.
    if (printing_) r.algorithm = m_.executor.lastAlgorithm();
    const double seconds = combineTime(m_, mine);
    r.timeUs = seconds * 1e6;
    r.algBw = seconds > 0 ? static_cast<double>(bytes) / 1e9 / seconds : 0.0;
    r.busBw = r.algBw * m_.shape.busBwFactor(m_.executor.nranks());
    r.memShare = memoryBoundShare(trafficFactor_, bytes, seconds, streamBytesPerSecond_);
    busBwSum_ += r.busBw;
    ++busBwCount_;
    // -c N: N checked calls, each on inputs of its own seed.
    if (m_.options.check > 0) r.wrong = 0;
    for (int c = 0; c < m_.options.check; ++c) {
      DataContext fresh = data;
      fresh.spec.seed += static_cast<uint64_t>(c) << 24;
      const CheckCounts counts = checkOperation(m_, p, fresh);
      r.wrong += counts.wrong;
      wrong_ += counts.wrong;
      outOfBounds_ += counts.outOfBounds;
    }
    return r;
  }

  struct MemoryUsage {
    int64_t initialization = 0;
    int64_t userAllocated = 0;
    int64_t collective = 0;
  };
  // -M, in nccl-tests' three parts, each the largest over ranks: the
  // process's resident growth from the start of the run to the buffers
  // (communicator setup), this rank's two buffers, and the resident growth
  // from the buffers to the end of the sweep (what the collectives kept).
  MemoryUsage memoryUsage() {
    const int64_t start = residentAtStartOfRun();
    const auto largest = [&](int64_t v) {
      return static_cast<int64_t>(m_.executor.allReduceDouble(static_cast<double>(std::max<int64_t>(v, 0)), loomMax));
    };
    MemoryUsage usage;
    usage.initialization = largest(start > 0 ? residentBeforeBuffers_ - start : 0);
    usage.userAllocated = largest(static_cast<int64_t>(2 * capacity_));
    usage.collective = largest(residentBytes() - residentAfterBuffers_);
    return usage;
  }

  int64_t residentBeforeBuffers_;
  size_t capacity_;
  SweepBuffer send_;
  SweepBuffer recv_;
  Measurement m_;
  const RankDevice* gpu_;
  bool printing_;
  std::vector<ResultRow> rows_;
  int64_t wrong_ = 0;
  int64_t outOfBounds_ = 0;
  double busBwSum_ = 0;
  int busBwCount_ = 0;
  double streamBytesPerSecond_;
  double trafficFactor_;
  int64_t residentAfterBuffers_;
};

RankInfo describeRank(int rank, const SweepIdentity& identity, const RankDevice* gpu) {
  RankInfo info;
  info.rank = rank;
  info.pid = static_cast<int32_t>(getpid());
  info.device = gpu ? gpu->device() : identity.device;
  if (gethostname(info.host, sizeof info.host - 1) != 0) std::snprintf(info.host, sizeof info.host, "unknown");
  if (gpu) std::snprintf(info.where, sizeof info.where, "%s", gpu->description().c_str());
  else std::snprintf(info.where, sizeof info.where, "[cpu] %s", identity.deviceText);
  return info;
}

}  // namespace

SweepOutcome runSweep(const PerfOptions& options, const CollectiveShape& shape, RankExecutor& executor,
                      const SweepIdentity& identity, const RankDevice* gpu) {
  const bool printing = executor.rank() == 0;
  NcclJsonReport json{&options, localTimeNow(), identity.versions.library, {}, {}, {}};
  // nccl-tests says which file it writes before anything else.
  FILE* jsonFile = printing && !options.jsonPath.empty() ? createNcclJson(options.jsonPath, stdout) : nullptr;
  if (printing) printHeader(stdout, options, shape.toolName, identity.versions);
  const std::vector<RankInfo> ranks = executor.allGatherInfo(describeRank(executor.rank(), identity, gpu));
  if (printing) printDevices(stdout, ranks);
  json.devices = ranks;
  // Loom's own notes, as "#" lines between the devices and the table.
  if (printing && !identity.note.empty()) std::printf("%s\n", identity.note.c_str());
  StreamBandwidth stream;
  if (gpu) {
    // The bound is about host memory; a device's own bound is its copy.
    if (printing && options.memoryBound == 1)
      std::printf("# --mem-bound 1: the memory-traffic bound is measured in host memory; with device buffers"
                  " --memcpy-baseline compares with the device's copy instead\n");
  } else if (options.memoryBound == 1 && shape.memTrafficFactor) {
    stream = measureStreamBandwidth(executor, streamBufferBytes(executor.nranks()));
    if (printing) printMemoryBound(stdout, stream, shape.memTrafficFactor(executor.nranks()), executor.nranks());
  } else if (printing && options.memoryBound == 1) {
    std::printf("# --mem-bound 1: no memory-traffic bound is defined for %s; not measured\n", shape.toolName);
  }
  if (printing && gpu && options.memcpyBaseline)
    std::printf("# copy: device-to-device cudaMemcpyAsync of the size on rank 0's GPU, alone, -w %d then -n %d"
                " back to back; copybw = size / time; %%copy = out-of-place algbw / copybw\n",
                options.warmupIters, options.iters);
  if (printing)
    printTableHeader(stdout,
                     ExtraColumns{stream.bytesPerSecond > 0, options.memcpyBaseline && gpu, options.algoColumn});
  Sweep sweep(options, shape, executor, stream.bytesPerSecond, gpu);
  const std::vector<loomRedOp_t> ops = shape.usesOp ? options.ops : std::vector<loomRedOp_t>{loomNumOps};
  for (loomDataType_t type : options.types)
    for (loomRedOp_t op : ops) sweep.runSizes(type, op, (static_cast<uint64_t>(type) << 40) ^ (static_cast<uint64_t>(op) << 32));
  return sweep.finish(identity, &json, jsonFile);
}

}  // namespace loom::perf
