// A communicator: one rank's membership in a group of ranks, with everything
// needed to run collectives among them.
//
// It owns, in creation order: a Config snapshot and Logger, the bootstrap
// (kept for later out-of-band needs), the peer table, one Transport per
// backend in use, the Links table (peer -> connection) that algorithms see,
// and the Executor that runs operations in order.
//
// Errors: an invalid argument is reported to the caller and leaves the
// communicator usable. Any other failure of an operation is sticky (as in
// NCCL): later operations fail at once with the first error, which
// asyncError() reports, until the communicator is destroyed or aborted.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "algorithms/algorithm.h"
#include "algorithms/patterns/host_layout.h"
#include "algorithms/p2p.h"
#include "bootstrap/bootstrap.h"
#include "src/comm/algorithm_selection.h"
#include "src/tuner/online_tuner.h"
#include "src/tuner/tuner.h"
#include "common/completion.h"
#include "src/diagnostics/diagnostics.h"
#include "src/comm/executor.h"
#include "src/comm/op_runner.h"
#include "common/config.h"
#include "common/log.h"
#include "transports/transport.h"

namespace loom {

class Stream;
namespace cuda {
class CommDevices;
class PriorWork;
}  // namespace cuda

// Settings of one communicator that replace the environment's
// (loomConfig_t); 0 keeps the environment's value. Validated by the caller.
struct CommOverrides {
  double timeoutSeconds = 0;  // LOOM_TIMEOUT
  size_t chunkBytes = 0;      // LOOM_CHUNK_SIZE (isValidChunkBytes)
};

class Communicator {
  // The runner carries out operations with this communicator's state.
  friend class OpRunner;

 public:
  using Overrides = CommOverrides;
  // Collective over all `nranks` ranks of the job named by `id`.
  static Result<std::unique_ptr<Communicator>> create(const bootstrap::UniqueId& id, int nranks,
                                                      int rank, Overrides overrides = {});
  ~Communicator();

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  const Logger& log() const { return log_; }

  // Checks `args` against this communicator (dtype, op, root, buffers,
  // overflow); the message names the argument and this rank.
  Status validate(const algo::CollArgs& args) const;

  // Queues a validated collective. With a stream, returns at once and the
  // stream tracks completion; without one, returns when the collective is done.
  Status enqueue(const algo::CollArgs& args, Stream* stream);
  // Submits for the worker thread and returns the completion (group calls).
  // A call the device engine runs is on the CUDA stream once this returns:
  // its completion is then the launch's.
  CompletionPtr enqueueAsync(const algo::CollArgs& args, Stream* stream);

  // First error of asynchronous work, or ok.
  Status asyncError() const;
  // Fails every waiting and queued operation at once.
  void abort();
  // Waits for queued operations to finish.
  void flush();

  void setLastError(const std::string& message);
  std::string lastError() const;

  // "algo/proto" of the last collective this communicator ran ("" before
  // the first). Thread-safe.
  std::string lastAlgorithm() const;

  // ---- Point to point, all-to-all, barrier and split: comm/comm_p2p.cc ----
  // Checks one send or recv: datatype, peer, count overflow, and that `buf`
  // (named bufName in the message, with `call` and this rank) is set if count > 0.
  Status validateP2P(const char* call, const char* bufName, const void* buf, size_t count, DataType dtype,
                     int peer) const;
  // Checks an all-to-all: datatype, overflow of nranks*count, NULL buffers,
  // and overlap of the two buffers unless they are the same (in place).
  Status validateAllToAll(const void* sendbuf, const void* recvbuf, size_t count, DataType dtype) const;
  // The fused send/recv operation that is an all-to-all (self block included).
  std::vector<algo::P2POp> allToAllOps(const void* sendbuf, void* recvbuf, size_t count, DataType dtype) const;
  // Queue one fused send/recv operation (ops in call order) or a barrier;
  // stream semantics as enqueue() and enqueueAsync().
  // `collective`: what the ops implement (all-to-all: LOOM_CHECK compares it);
  // null for plain send/recv.
  Status enqueueP2P(std::vector<algo::P2POp> ops, Stream* stream, const OpDescriptor* collective = nullptr);
  CompletionPtr enqueueP2PAsync(std::vector<algo::P2POp> ops, Stream* stream,
                                const OpDescriptor* collective = nullptr);
  Status enqueueBarrier(Stream* stream);
  CompletionPtr enqueueBarrierAsync(Stream* stream);
  // MPI_Comm_split (loomCommSplit): collective over this communicator, after
  // its queued work. Null for a negative color.
  Result<std::unique_ptr<Communicator>> split(int color, int key);

 private:
  // Device buffers on a CUDA stream with the device engine: launched at once
  // on the stream (true; *status the launch's); false: the executor's.
  bool enqueueOnEngine(const algo::CollArgs& args, Stream* stream, Status* status);
  bool enqueueP2POnEngine(const std::vector<algo::P2POp>& ops, Stream* stream, Status* status);
  // lastAlgorithm_ after a call the device engine ran ("engine/" + its choice: "engine/ring/LL").
  static constexpr int kEngineRecord = -2;
  // ... and after an all-reduce run by each host's engine and staged between hosts.
  static constexpr int kEngineAcrossHostsRecord = -3;
  static CompletionPtr completedWith(Status status);

 public:
  // Whether a call on `stream` would go to the device engine (a call that
  // does may be made while the stream is captured into a CUDA graph).
  bool engineTakes(const algo::CollArgs& args, const Stream* stream) const;
  bool engineTakesP2P(const std::vector<algo::P2POp>& ops, const Stream* stream) const;

 private:
  // The operation of fused send/recv `ops` (descriptor: `collective`, else send/recv).
  OpWork p2pWork(std::vector<algo::P2POp> ops, const OpDescriptor* collective);
  // ---- end of comm_p2p.cc ----

 private:
  Communicator(Config config, int rank, int nranks, std::vector<std::string>* warnings);
  Status connectPeers(const bootstrap::UniqueId& id);
  // Builds the LL link table (if every transport in use supports LL) and
  // notes whether all peers share this host.
  void connectProtocols(const std::vector<transport::Transport*>& inUse);
  // Sets bulletin_ and windows_ where every rank has them from a single backend (collective).
  Status agreeOnBulletin(const std::vector<transport::Transport*>& inUse);
  // Per registry backend: the peers it serves for this rank, and whether it
  // serves any pair of the communicator (transport_policy.h).
  struct PeerTransports {
    std::vector<std::vector<int>> peers;
    std::vector<bool> usedByAnyPair;
  };
  Result<PeerTransports> choosePeerTransports() const;
  void adaptWaitsToHost();
  // Starts the creating thread on a core of its own (start_placement.h) when
  // LOOM_PLACE_RANKS allows and this host's ranks are separate processes.
  void placeCreatingThread();
  // The Simple protocol's links (LOOM_CHECK's exchange runs over them);
  // defined in comm.cc, where LinkTable is complete.
  algo::Links& simpleLinks() const;
  // lastAlgorithm_'s value for `algorithm` over `proto`.
  static int algorithmRecord(const algo::AlgorithmInfo& algorithm, transport::Protocol proto);
  // The context an algorithm runs in over `proto`'s links; false if the
  // communicator has no links for that protocol.
  bool contextFor(transport::Protocol proto, const WaitContext& wait, algo::AlgoContext* ctx) const;
  // The tuner's choice for `args` (memoized: a loop repeats the same call).
  // With online tuning, the settled winner of the call's slot.
  tuner::Choice chooseAlgorithm(const algo::CollArgs& args, const WaitContext& wait);
  // Online tuning (comm_online.cc): the call's slot (null: none); the choice
  // for a call of a slot (an exploring call runs a candidate and reports its
  // time to the slot; a due agreement runs first, on every rank alike).
  tuner::OnlineSlot* onlineSlotFor(const algo::CollArgs& args, const tuner::ProtoContexts& available);
  Status onlineChoice(const algo::CollArgs& args, tuner::OnlineSlot& slot, const WaitContext& wait,
                      tuner::Choice* choice, bool* exploring, bool* timed);
  Status agreeOnline(const algo::CollArgs& call, tuner::OnlineSlot& slot, const WaitContext& wait);
  WaitContext makeWait() const;
  // The same with a coarse clock reading already taken (no second read).
  WaitContext makeWait(int64_t coarseNowNanos) const {
    WaitContext wait;
    wait.deadline = Deadline::afterCoarse(coarseNowNanos, config_.timeoutSeconds);
    wait.abort = &abort_;
    wait.health = health_;
    wait.spinMicros = config_.spinMicros;
    wait.yieldMicros = config_.yieldMicros;
    return wait;
  }
  void recordError(const Status& status);
  // Runs fused send/recv ops, staging device buffers (src/device).
  Status runP2POps(const std::vector<algo::P2POp>& ops, const algo::AlgoContext& ctx);

  class LinkTable;

  Config config_;  // fixed once connectPeers() has adapted it to the host
  const int rank_;
  const int nranks_;
  Logger log_;
  std::unique_ptr<tuner::Tuner> tuner_;  // built in connectPeers() from options all ranks agreed on
  // Online tuning (LOOM_TUNER_ONLINE, not with LOOM_ALGO or LOOM_PROTO); null: off.
  // Only the thread running operations touches it.
  std::unique_ptr<tuner::OnlineTuner> online_;
  // Index into algo::allAlgorithms() x kNumProtocols + protocol of the last
  // collective run, -1 before the first (one word, so readers never see a torn pair).
  std::atomic<int> lastAlgorithm_{-1};
  // The last call's shape and the tuner's choice for it. Only the thread
  // running operations (one at a time) touches it; the tuner's inputs
  // besides the call are fixed when the communicator is created.
  struct ChoiceMemo {
    bool valid = false;
    algo::CollType type{};
    size_t count = 0;
    DataType dtype{};
    RedOp op{};
    int root = 0;
    bool inPlace = false;
    tuner::Choice choice;
    // The context of choice.proto's links, progress counter included, and
    // lastAlgorithm_'s value for the choice: a call of the same shape only
    // sets the deadline. hasContext is false where the links are missing.
    bool hasContext = false;
    algo::AlgoContext context;
    int algorithmRecord = -1;
    // The choice's split run (algorithm.h's SplitRun) when it applies to
    // calls of this shape, else null: whether it applies depends only on the
    // shape and the context, so it is decided once per shape.
    const algo::SplitRun* split = nullptr;
    // The call's online-tuning slot (null: none); while it explores, a call
    // runs the slot's candidate instead of `choice`.
    tuner::OnlineSlot* online = nullptr;

    bool matches(const algo::CollArgs& args) const {
      return valid && type == args.type && count == args.count && dtype == args.dtype && op == args.op &&
             root == args.root && inPlace == (args.sendbuf == args.recvbuf);
    }
  } choiceMemo_;
  std::unique_ptr<bootstrap::Bootstrap> bootstrap_;
  std::vector<transport::PeerInfo> peers_;
  std::vector<std::unique_ptr<transport::Transport>> transports_;
  // Liveness of the peers (from the shm transport): every wait fails as soon
  // as a peer process dies, and a timeout names the peers that stalled.
  PeerHealth* health_ = nullptr;
  std::unique_ptr<LinkTable> links_;  // Simple protocol (point-to-point uses these)
  // LL protocol links; null unless every transport in use supports LL.
  std::unique_ptr<LinkTable> llLinks_;
  size_t llChunkBytes_ = 0;  // min(config chunk, every LL connection's chunkBytes())
  // The tiny-message exchange among all ranks (transport.h), for LL one-shot
  // all-reduce; null unless every rank has one, so all take the same path.
  transport::Bulletin* bulletin_ = nullptr;
  transport::SharedWindows* windows_ = nullptr;  // the same for the shared windows
  bool peerCopies_ = false;  // windows_->peerCopies() holds on every rank
  bool peerCopiesInProcess_ = false;  // and every rank is a thread of one process
  bool singleHost_ = true;   // every peer on this host
  std::unique_ptr<const algo::HostLayout> hostLayout_;  // from the peer table, for AlgoContext::hosts
  std::atomic<bool> abort_{false};
  std::atomic<bool> failed_{false};
  mutable std::mutex errorMu_;
  Status asyncError_;
  std::string lastError_;
  // Flight recorder, LOOM_CHECK, LOOM_TRACE, LOOM_DUMP_ON_SIGNAL (src/diagnostics/diagnostics.h).
  std::unique_ptr<Diagnostics> diag_;
  // Device buffers: null in a process without a usable CUDA device.
  std::unique_ptr<cuda::CommDevices> devices_;
  // Runs every operation (src/comm/op_runner.h); holds only a reference.
  OpRunner runner_{*this};
  std::unique_ptr<Executor> executor_;  // last: its worker uses everything above
};

}  // namespace loom
