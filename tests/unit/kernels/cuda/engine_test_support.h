// Test support for the device engine's host emulation: ranks as threads over
// host "device memory", Memory policies that delay or break the protocol,
// and references for every collective computed independently (sequential
// loops over the ranks, through tests/unit/kernels/reference.h, sharing no
// code with the engine).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/types.h"
#include "kernels/cuda/engine/engine_emulation.h"
#include "kernels/cuda/engine/engine_layout.h"
#include "kernels/cuda/engine/memory_layer.h"

namespace loom::kernels::cuda::engine::testing {

// ---- Memory policies ----------------------------------------------------------

// The real memory layer plus random delays (yields, short sleeps) before
// every flag operation and fence, so ranks and blocks interleave in many
// orders. Each thread seeds its generator from setDelaySeed()'s value.
struct DelayingMemory : SystemMemory {
  static void delay();
  static uint64_t loadAcquire(const uint64_t* flag) {
    delay();
    return SystemMemory::loadAcquire(flag);
  }
  static void storeRelease(uint64_t* flag, uint64_t value) {
    delay();
    SystemMemory::storeRelease(flag, value);
  }
  static void fenceRelease() {
    delay();
    SystemMemory::fenceRelease();
  }
  static uint64_t loadLine(const uint64_t* line) {
    delay();
    return SystemMemory::loadLine(line);
  }
  static void storeLine(uint64_t* line, uint64_t value) {
    delay();
    SystemMemory::storeLine(line, value);
  }
};
void setDelaySeed(uint64_t seed);

// Mutant (c), for LL: a line's data and flag go out as two separate 4-byte
// stores, in either order (a weak memory may reorder them), with a delay
// between, so a receiver can see a new flag beside old data.
void storeLineInHalves(uint64_t* line, uint64_t value);
struct SplitLineMemory : DelayingMemory {
  static void storeLine(uint64_t* line, uint64_t value) { storeLineInHalves(line, value); }
};

// Mutant (a): the receiver reads its FIFO slot without waiting for the flag.
struct NoReceiverWaitMemory : DelayingMemory {
  static constexpr bool kReceiverWaits = false;
};

// A weak memory model for plain stores: every storeData is buffered in the
// storing thread and becomes visible only at that thread's release fence
// (or when its block ends, as a kernel's end publishes everything). A
// release store publishes only the flag itself: the protocol must fence
// before it. x86 never reorders stores, so without this layer a missing
// fence would go unnoticed. Use with one thread per block (the buffer is per
// thread; on a GPU the fence is cumulative over the block's synced stores).
void bufferStore(void* dst, const void* src, size_t bytes);
void flushStores();
template <bool kFence>
struct BufferedStoreMemory : SystemMemory {
  static constexpr bool kFenceBeforeFlag = kFence;
  template <class V>
  static void storeData(void* dst, const V& value) {
    bufferStore(dst, &value, sizeof(V));
  }
  static void fenceRelease() {
    flushStores();
    SystemMemory::fenceRelease();
  }
  static void flushAtExit() { flushStores(); }
};
// ---- Ranks as threads ------------------------------------------------------------

// Every rank's engine memory (zero-filled, 256-byte aligned) and view.
class EngineRanks {
 public:
  EngineRanks(int nranks, int nchannels, int slots, size_t slotBytes, size_t llSlotBytes = 64);
  int nranks() const { return layout_.nranks; }
  const EngineLayout& layout() const { return layout_; }
  const EngineView& view(int rank) const { return views_[static_cast<size_t>(rank)]; }

  // Runs calls[r] on rank r, one thread per rank, all at once.
  template <class Memory, class Instantiations = EveryInstantiation>
  std::vector<EngineStatus> run(const std::vector<EngineCall>& calls, int threadsPerBlock = 1);

 private:
  EngineLayout layout_;
  std::vector<std::unique_ptr<unsigned char[], void (*)(void*)>> memory_;
  std::vector<EngineView> views_;
};

void runRankThreads(int nranks, const std::function<void(int)>& body);

template <class Memory, class Instantiations>
std::vector<EngineStatus> EngineRanks::run(const std::vector<EngineCall>& calls, int threadsPerBlock) {
  std::vector<EngineStatus> status(calls.size(), EngineStatus::kOk);
  runRankThreads(nranks(), [&](int r) {
    status[static_cast<size_t>(r)] = runEngineEmulatedWith<Memory, Instantiations>(
        views_[static_cast<size_t>(r)], calls[static_cast<size_t>(r)], threadsPerBlock);
  });
  return status;
}

// The instantiations of the protocol tests that swap the memory layer: int32
// sum, and bytes for the copy-only collectives. Anything else is refused
// (kInvalidCall), so a case outside the set fails loudly instead of passing.
struct Int32SumInstantiations {
  template <class F>
  static bool dispatch(const EngineCall& call, int nranks, F&& f) {
    if (!engineRunsTyped(call, nranks)) {
      f.template operator()<uint8_t, RedOp::kSum>();
      return true;
    }
    if (call.type != DataType::kInt32 || (call.redOp != RedOp::kSum && call.redOp != RedOp::kAvg)) return false;
    f.template operator()<int32_t, RedOp::kSum>();
    return true;
  }
};

// ---- One collective, its buffers and its reference ---------------------------------

struct CollectiveCase {
  EngineOp op = EngineOp::kAllReduce;
  DataType type = DataType::kFloat32;
  RedOp redOp = RedOp::kSum;
  PostOp post = PostOp::kNone;
  double scalar = 1;  // kMultiplyByScalar
  size_t count = 0;
  int root = 0;
  bool inPlace = false;
  int channels = 0;
  EngineProtocol protocol = EngineProtocol::kSimple;
  EngineAlgorithm algorithm = EngineAlgorithm::kRing;  // kTree: all-reduce only
  size_t misalign = 0;  // elements the user buffers start past a 16-byte boundary
  // Input values: small integers (exact in every type, so every reduction
  // order gives the same result) or random bit patterns (NaNs, huge values).
  bool exactData = true;
  uint64_t seed = 1;
  std::string describe(int nranks) const;
};

// Buffers of every rank for one case, the calls, and the check.
class CollectiveRun {
 public:
  CollectiveRun(const CollectiveCase& c, int nranks);
  const std::vector<EngineCall>& calls() const { return calls_; }
  // Empty when every rank's output matches the reference, else the first difference.
  std::string check() const;
  // Rank r's output bytes (its recv buffer's meaningful part).
  std::vector<unsigned char> output(int rank) const;
  void setTimeout(uint64_t ns);
  // Rank r's host buffers (send and recv lie inside): a GPU test mirrors them
  // in device memory, rebases the calls' pointers and copies the result back.
  std::vector<unsigned char>& storage(int rank) { return ranks_[static_cast<size_t>(rank)].storage; }

 private:
  struct RankBuffers {
    std::vector<unsigned char> storage;  // send and recv (or one buffer in place), with room to misalign
    unsigned char* send = nullptr;
    unsigned char* recv = nullptr;
    size_t sendBytes = 0, recvBytes = 0;
    std::vector<unsigned char> input;     // a copy of the send data as it was before the call
    std::vector<unsigned char> recvInit;  // recv as it was before the call
  };
  std::vector<unsigned char> expected(int rank) const;

  CollectiveCase c_;
  int n_;
  std::vector<RankBuffers> ranks_;
  std::vector<EngineCall> calls_;
};

// A batch of point-to-point transfers: rank r sends sizes[k] bytes to
// (r + shifts[k]) mod n and receives from (r - shifts[k]) mod n.
class SendRecvRun {
 public:
  SendRecvRun(int nranks, const std::vector<int>& shifts, const std::vector<size_t>& bytes, int channels,
              uint64_t seed);
  const std::vector<EngineCall>& calls() const { return calls_; }
  std::string check() const;

 private:
  int n_;
  std::vector<int> shifts_;
  std::vector<size_t> bytes_;
  std::vector<std::vector<std::vector<unsigned char>>> sendData_, recvData_;  // [rank][transfer]
  std::vector<EngineCall> calls_;
};

}  // namespace loom::kernels::cuda::engine::testing
