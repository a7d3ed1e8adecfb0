// What a perf tool knows about its collective (the descriptor each
// <collective>.cc fills) and what the sweep needs from the library that runs
// it (RankExecutor: Loom in loom_main.cc, Open MPI in perf/mpi/).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <loom/loom.h>

#include "perf/harness/test_data.h"

namespace loom::perf {

// Element counts of one size, as nccl-tests' getCollByteCount computes them.
struct BufferLayout {
  size_t sendCount = 0;          // elements of sendbuff read by the call
  size_t recvCount = 0;          // elements of recvbuff written by the call
  size_t paramCount = 0;         // the count argument of the call
  size_t sendInPlaceOffset = 0;  // in place, sendbuff = buffer + rank * this (elements)
  size_t recvInPlaceOffset = 0;  // in place, recvbuff = buffer + rank * this (elements)
  size_t reportedCount = 0;      // the "count" column; the "size" column is this x type size
};

// The arguments of one collective call.
struct CollArgs {
  const void* sendbuff = nullptr;
  void* recvbuff = nullptr;
  size_t count = 0;
  loomDataType_t type = loomFloat32;
  loomRedOp_t op = loomSum;
  int root = 0;
};

// What the data functions of a descriptor see.
struct DataContext {
  DataSpec spec;  // spec.op is loomNumOps for collectives without reduction
  int rank = 0;
  int root = 0;
};

struct CollectiveShape {
  const char* toolName;  // "all_reduce_perf": the last footer line
  bool usesOp;           // false: redop column prints "none" and -o is ignored
  bool usesRoot;         // false: root column prints -1
  BufferLayout (*layout)(size_t bytes, size_t typeSize, int nranks);
  // Writes this rank's input (sendCount elements; may ignore ranks whose
  // input the collective does not read, like broadcast's non-roots).
  void (*fillInput)(const DataContext& context, void* sendbuff, size_t sendCount);
  // Elements of this rank's recvbuff (recvCount elements) that are wrong.
  int64_t (*countWrong)(const DataContext& context, const void* recvbuff, size_t recvCount);
  double (*busBwFactor)(int nranks);
  // Bytes a one-copy implementation must move through host memory (reads
  // plus writes, summed over ranks) per byte of the size column; all-reduce:
  // 3n-1 (see memory_bound.h). nullptr: no memory-traffic bound is reported.
  double (*memTrafficFactor)(int nranks) = nullptr;
};

// Who a rank is, for the "# Using devices" lines. Fixed size, so that it can
// be all-gathered as bytes.
struct RankInfo {
  int32_t rank = 0;
  int32_t pid = 0;
  int32_t device = 0;
  int32_t group = 0;
  char host[64] = {};
  char where[96] = {};  // "[cpu] host memory", "[0000:1b:00.0] NVIDIA H100 80GB HBM3"
};

// One rank's handle on the library under test. Every method that fails
// prints the call and the library's message and ends the process (status 1):
// a perf tool cannot continue after a failed collective.
class RankExecutor {
 public:
  virtual ~RankExecutor() = default;
  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  // Starts one collective; it may complete later (see synchronize).
  virtual void launch(const CollArgs& args) = 0;
  // Brackets the -m operations of one iteration.
  virtual void groupStart() = 0;
  virtual void groupEnd() = 0;
  // Waits until every launched collective has completed.
  virtual void synchronize() = 0;
  // Returns once every rank has entered it.
  virtual void barrier() = 0;
  // The sum/min/max (op) of `value` over ranks, on every rank.
  virtual double allReduceDouble(double value, loomRedOp_t op) = 0;
  virtual int64_t allReduceSum(int64_t value) = 0;
  // Everyone's RankInfo, indexed by rank, on every rank.
  virtual std::vector<RankInfo> allGatherInfo(const RankInfo& mine) = 0;
  // The algorithm/protocol that ran this rank's last collective, as the
  // library names it (no spaces); "-" when the library does not say.
  virtual std::string lastAlgorithm() { return "-"; }
  // -G (device buffers only): what launch() enqueues between beginCapture
  // and endCapture becomes a CUDA graph; replayCapture enqueues it once
  // more. False from beginCapture: this executor cannot capture.
  virtual bool beginCapture() { return false; }
  virtual void endCapture() {}
  virtual void replayCapture() {}
};

}  // namespace loom::perf
