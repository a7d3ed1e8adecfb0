// The device engine of one communicator: collectives on device buffers run
// by one kernel per call (kernels/cuda/engine) that moves and reduces the
// data between the ranks' GPU memory directly, through connection FIFOs that
// each rank allocated once and its peers mapped once.
//
// A call is enqueued on the caller's CUDA stream like any other kernel: no
// host thread takes part in it, so it is ordered after the stream's earlier
// work and before its later work by the stream itself, a thread that
// synchronizes a device never waits for a Loom thread, and the launch can be
// captured into a CUDA graph (the kernel keeps its step counters in device
// memory, so a replay continues where the last call left them).
//
// Set up once, collectively, when the communicator is created, if every rank
// is on this host and every rank's device reaches every other's (the same
// device, or peer access over NVLink/PCIe):
//   1. each rank allocates its side of every connection (zeroed) and exports it;
//   2. one bootstrap all-gather of those records, then one of verdicts
//      ("I reach every peer"); unless all say yes, no rank uses the engine;
//   3. each rank maps its peers' allocations (the pointer itself within one
//      process, CUDA IPC across processes) and publishes its kernel's view.
// Afterwards a call exchanges nothing: user buffers are read and written
// only by their owner's kernel, so they need no registration.
//
// Every rank must then pass device buffers of its engine device to the calls
// the engine runs (as NCCL requires device buffers): a rank that passes host
// memory takes the staged path while its peers' kernels wait for it, which
// ends in LOOM_TIMEOUT naming the waiting rank rather than in a silent hang.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/algorithm.h"
#include "algorithms/p2p.h"
#include "bootstrap/bootstrap.h"
#include "common/status.h"
#include "common/wait.h"
#include "src/device/engine_backend.h"
#include "src/device/memory_kind.h"

namespace loom::cuda {

// Which of the engine's algorithms and protocols each collective may take:
// LOOM_ALGO ("ring", "tree") and LOOM_PROTO ("simple", "ll") as the ranks of
// the communicator agreed on them, so every rank's choice stays the same.
// A call that no allowed pair can run (LL for send/recv, the tree for a
// broadcast) ignores the rule, as the tuner ignores a filter that leaves
// nothing.
struct EngineChoiceRules {
  // Bit (1 << EngineAlgorithm / EngineProtocol) per collective; all set by default.
  uint8_t algorithms[algo::kNumCollTypes];
  uint8_t protocols[algo::kNumCollTypes];
  EngineChoiceRules() {
    for (int c = 0; c < algo::kNumCollTypes; ++c) algorithms[c] = protocols[c] = 0xff;
  }
  bool allows(algo::CollType coll, kernels::cuda::engine::EngineAlgorithm a) const {
    return (algorithms[static_cast<int>(coll)] >> static_cast<int>(a)) & 1;
  }
  bool allows(algo::CollType coll, kernels::cuda::engine::EngineProtocol p) const {
    return (protocols[static_cast<int>(coll)] >> static_cast<int>(p)) & 1;
  }
};

struct EngineSettings {
  // The most channels a call may use (engineChannelsFor picks per call).
  // Ring collectives run one block per channel and rank; every rank's
  // blocks must be resident at once (ranks may share one GPU): 32 channels
  // x 8 ranks of 256 threads are 256 blocks, well below a Hopper GPU's
  // ~1000 resident ones.
  int channels = kernels::cuda::engine::kMaxChannels;
  int slots = 4;                     // FIFO slots per connection
  size_t slotBytes = size_t{128} << 10;
  // LL slots per connection: as many as FIFO slots, each this many bytes of
  // 8-byte lines (half of it data). 8 KiB carries 4 KiB per step, so the
  // largest LL all-reduce (kLLMaxBytes, 64 KiB, over 8 channels and 2
  // ranks) moves each ring block in one step; 2 MiB per rank at 8 x 8.
  size_t llSlotBytes = size_t{8} << 10;
  double timeoutSeconds = 0;         // LOOM_TIMEOUT: a kernel wait longer than this fails the call
  EngineChoiceRules rules = {};
};

struct EngineSetup {
  int rank = 0;    // in the communicator
  int nranks = 1;  // of the communicator: every one joins the setup's exchanges
  // The ranks this engine connects, in order, this rank among them: the
  // ranks of this rank's host in a communicator that spans hosts (each host
  // then has an engine of its own), empty for all. The kernels see ranks as
  // indices into this list.
  std::vector<int> members;
  bootstrap::Bootstrap* bootstrap = nullptr;
  WaitContext wait = {};
  EngineSettings settings = {};
};

class DeviceEngine {
 public:
  // Collective: every rank of the communicator calls it with its backend.
  // Null (and *whyNot says why, alike on every rank where it is a shared
  // fact) when the ranks cannot all use the engine.
  static Result<std::unique_ptr<DeviceEngine>> create(const EngineSetup& setup, std::unique_ptr<EngineBackend> backend,
                                                      std::string* whyNot);
  ~DeviceEngine();

  int device() const { return backend_->device(); }
  // The ranks it connects (EngineSetup::members; all of them when that was empty).
  const std::vector<int>& members() const { return members_; }
  bool spansCommunicator() const { return nranks_ == commRanks_; }
  const char* backendName() const { return backend_->name(); }
  int channels() const { return layout_.nchannels; }
  // What the last call enqueued ran: "ring/LL", "tree/Simple", "p2p/Simple",
  // "copy" (one rank); empty before the first.
  std::string lastChoice() const;

  // Whether this call is the engine's: both buffers are device memory of
  // the engine's device (the same test on every rank when the ranks pass
  // device buffers, as they must).
  bool accepts(const algo::CollArgs& args, const PointerInfo& send, const PointerInfo& recv) const;
  // The point-to-point batch of one group (send/recv, all-to-all); `kinds`
  // gives each op's buffer kind, in the order of `ops`.
  bool acceptsP2P(const std::vector<algo::P2POp>& ops, const std::vector<PointerInfo>& kinds) const;

  // Enqueue the call on `stream` (a cudaStream_t; null: the engine's own
  // stream, then the caller waits with waitIdle). Fails at once, without
  // launching, once a kernel of this engine has reported a failure.
  Status enqueue(const algo::CollArgs& args, void* stream);
  Status enqueueP2P(const std::vector<algo::P2POp>& ops, void* stream);
  Status waitIdle(const WaitContext& wait) { return backend_->waitIdle(wait); }

  // A failure a kernel reported (timeout, abort), naming this rank; ok if none.
  Status kernelError() const;
  // Makes every waiting and later kernel of this engine stop (loomCommAbort).
  void abort();
  // Peers' kernels write into this rank's connection memory until their
  // last step (a receiver acknowledges a sender's slot there), so it may be
  // freed only once every member's kernels are done: the communicator
  // learns that with a barrier at destruction. Without it (an abort, a
  // barrier that failed) the memory is left allocated rather than freed
  // under a peer that may still write to it.
  void keepMemoryAtDestruction() { keepMemory_ = true; }

  // A buffer of at least `bytes` on the engine's device, this rank's own (no
  // peer maps it), kept for later calls and grown when a call needs more:
  // room beside the user's buffers for callers that rearrange data between
  // engine calls. Grow it only while no enqueued call uses it. A buffer
  // outgrown is freed only with the engine: cudaFree waits for the whole
  // device, where a peer sharing the GPU may have a kernel waiting for this
  // rank. enqueueP2P takes it too, for a batch whose receives overwrite
  // its sends: a caller's scratch data must not be in such a batch.
  Result<void*> scratch(size_t bytes);

 private:
  // What each rank tells the others at setup.
  struct SetupRecord {
    uint32_t ready = 0;     // allocated and exported
    uint32_t channels = 0;  // its LOOM_CUDA_CHANNELS: all use the smallest
    EngineExport exported;
  };
  DeviceEngine(const EngineSetup& setup, std::unique_ptr<EngineBackend> backend);
  // Maps the peers' allocations and publishes this rank's view.
  Status prepare(const std::vector<SetupRecord>& records, int rank);
  Status launch(const kernels::cuda::engine::EngineCall& call, void* stream, const char* what);
  // `ops` with each send that a receive of theirs overwrites read from a
  // copy in scratch instead, the copies enqueued on `stream`.
  Status copyOverwrittenSends(const std::vector<algo::P2POp>& ops, void* stream, std::vector<algo::P2POp>* batch);
  kernels::cuda::engine::EngineCall baseCall() const;
  // The protocol and algorithm of a collective call (its op, type and
  // count set), by the defaults of engine_layout.h within settings_.rules.
  void choose(algo::CollType coll, kernels::cuda::engine::EngineCall* call) const;
  int p2pChannels() const;

  int rank_;        // index in members_
  int nranks_;      // members_.size()
  int commRank_;    // in the communicator, for messages
  int commRanks_;
  std::vector<int> members_;
  EngineSettings settings_;
  std::unique_ptr<EngineBackend> backend_;
  kernels::cuda::engine::EngineLayout layout_{};
  void* local_ = nullptr;             // this rank's allocation
  std::vector<void*> mappedPeers_;    // peers' allocations mapped here (to unmap)
  const kernels::cuda::engine::EngineView* view_ = nullptr;
  uint32_t* words_ = nullptr;         // [0] abort, [1] status (kernel-written)
  // The last call's choice: kNoChoice, kCopyChoice, or algorithm * 16 + protocol.
  static constexpr int kNoChoice = -1, kCopyChoice = -2, kP2PChoice = -3;
  std::atomic<int> lastChoice_{kNoChoice};
  bool keepMemory_ = false;
  void* scratch_ = nullptr;
  size_t scratchBytes_ = 0;
  std::vector<void*> outgrown_;  // earlier scratch buffers, freed at destruction
};

}  // namespace loom::cuda
