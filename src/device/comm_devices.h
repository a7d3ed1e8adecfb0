// Device memory in one communicator: classifies each call's buffers and runs
// calls on device memory staged through pinned host memory (any transport),
// or, for same-host all-reduce with LOOM_CUDA_P2P=1, directly between the
// devices (cuda/p2p_direct.h), and, across hosts with LOOM_NET_GDR=1,
// between device buffers through the RDMA NIC (src/device/gdr_path.h). Host
// buffers never get here in a process
// without a usable CUDA device (the communicator then has no CommDevices).
//
// Runs on the communicator's executor thread, one call at a time.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/algorithm.h"
#include "algorithms/p2p.h"
#include "bootstrap/bootstrap.h"
#include "common/config.h"
#include "common/log.h"
#include "src/device/device_engine.h"
#include "src/device/engine_across_hosts.h"
#include "src/device/gdr_path.h"
#include "src/device/p2p_across_hosts.h"
#include "src/device/p2p_direct.h"
#include "src/device/path_selection.h"
#include "src/device/runtime.h"
#include "src/device/staged_run.h"
#include "transports/rdma_memory.h"

namespace loom::cuda {

struct CommDeviceSetup {
  int rank = 0;
  int nranks = 1;
  bool singleHost = false;
  bootstrap::Bootstrap* bootstrap = nullptr;
  const Config* config = nullptr;  // create() only: the device knobs; LOOM_TRANSPORT, LOOM_IB_DISABLE for the GDR decision
  WaitContext wait = {};           // create() only: the GDR agreement's exchange
  // create() only: the network GDR registers device memory with and writes
  // over (the verbs transport's, transports/verbs/verbs_rdma_memory.h); null: no GDR.
  std::shared_ptr<transport::RdmaNetwork> rdma = nullptr;
  EngineChoiceRules engineRules = {};  // create() only: LOOM_ALGO / LOOM_PROTO for the device engine
  // Which ranks share a host (from the communicator's host layout): this
  // rank's host's ranks, ascending; its rail, the rank with its local index
  // on every host in host order (empty unless every host has as many
  // ranks); and the number of hosts. Across hosts they give each host an
  // engine of its own and each rank the rail of its inter-host step.
  std::vector<int> hostRanks = {};
  std::vector<int> rail = {};
  int nHosts = 1;
  // Every host's ranks, ascending, by host index (the order of `rail`).
  std::vector<std::vector<int>> hosts = {};
};

// The device knobs of the communicator's Config, parsed.
struct DeviceSettings {
  bool engine = true;                       // LOOM_CUDA_ENGINE (0: no device engine, stage instead)
  bool directP2P = false;                   // LOOM_CUDA_P2P=1
  bool netGdr = false;                      // LOOM_NET_GDR=1 (alike on every rank: create() joins an exchange)
  size_t copyChunkBytes = size_t{8} << 20;  // LOOM_CUDA_COPY_CHUNK
  int engineChannels = EngineSettings{}.channels;  // LOOM_CUDA_CHANNELS
  static DeviceSettings fromConfig(const Config& config, std::vector<std::string>* warnings);
};

class CommDevices {
 public:
  // Null when this process has no usable CUDA device: every buffer is host memory.
  static std::unique_ptr<CommDevices> create(const CommDeviceSetup& setup, const Logger& log);
  // For tests: any process, any copy engine and pointer classifier.
  using Classifier = std::function<Result<PointerInfo>(const void* ptr, const std::string& what)>;
  CommDevices(const CommDeviceSetup& setup, DeviceSettings settings, Classifier classify,
              std::function<Result<CopyEngine*>(int device)> copies);

  // Runs a collective whose buffers include device memory; *handled false
  // (nothing done) when all are host memory, and the caller runs it as usual.
  // `runOnRail` (optional) serves the path that stages only between hosts.
  Status runCollective(const algo::CollArgs& args, const WaitContext& wait, const HostCollective& runHost,
                       bool* handled, const HostSubgroupCollective& runOnRail = {});
  // The same for a fused send/recv operation.
  Status runP2P(const std::vector<algo::P2POp>& ops, const WaitContext& wait, const HostP2P& runHost,
                bool* handled);
  // The GDR path (create() makes it when every rank agreed; tests inject
  // one over the emulated fabric). It brings its own reducer, so calls are
  // eligible whatever kernels this build has.
  void useGdrPath(std::unique_ptr<GdrPath> gdr) {
    gdr_ = std::move(gdr);
    gdrKernels_ = true;
  }
  // The path of the last call (tests, logs).
  DataPath lastPath() const { return lastPath_.load(std::memory_order_relaxed); }

  // ---- The device engine (device_engine.h): calls on the caller's CUDA stream ----
  // Null when the ranks could not all use it (or LOOM_CUDA_ENGINE=0), and
  // in a communicator that spans hosts (see hostEngine()).
  DeviceEngine* engine() const { return engine_.get(); }
  // Across hosts: this host's engine (its ranks' devices reach each other).
  // Collectives on device buffers then run in it within each host and are
  // staged only between hosts (engine_across_hosts.h); send/recv and
  // all-to-all take it for their same-host pairs and stage the others
  // (p2p_across_hosts.h).
  DeviceEngine* hostEngine() const { return hostEngine_.get(); }
  // Tests: an engine over any backend (the host's when it spans fewer ranks
  // than the communicator).
  void useEngine(std::unique_ptr<DeviceEngine> engine) {
    (engine && !engine->spansCommunicator() ? hostEngine_ : engine_) = std::move(engine);
  }
  // Enqueues `args` on the CUDA stream `cudaStream` if the engine runs it
  // (true, *status its launch); false: not the engine's, nothing was done.
  bool enqueueOnEngine(const algo::CollArgs& args, void* cudaStream, Status* status);
  bool enqueueP2POnEngine(const std::vector<algo::P2POp>& ops, void* cudaStream, Status* status);
  // Whether those would take the engine (nothing is launched).
  bool engineTakes(const algo::CollArgs& args);
  bool engineTakesP2P(const std::vector<algo::P2POp>& ops);
  // A failure the engine's kernels reported; ok if none or no engine.
  Status engineError() const {
    if (engine_) return engine_->kernelError();
    return hostEngine_ ? hostEngine_->kernelError() : Status::ok();
  }
  // Before destruction: waits for this rank's engine kernels, then asks
  // `everyRankDone` (a barrier of the communicator) whether every peer's are
  // done too; if not, the engine keeps its memory (DeviceEngine::keepMemoryAtDestruction).
  void retireEngines(const WaitContext& wait, const std::function<bool()>& everyRankDone);
  void abortEngine() {
    if (engine_) engine_->abort();
    if (hostEngine_) hostEngine_->abort();
  }

 private:
  Result<CopyEngine*> cudaCopies(int device);
  Result<PinnedPool::Lease*> staging(size_t bytes);
  // staging() as the across-hosts steps take it: the pinned bytes.
  std::function<Result<void*>(size_t)> stagingBytes();
  // The classification of each op's buffer, in the order of `ops`.
  Result<std::vector<PointerInfo>> classifyP2P(const std::vector<algo::P2POp>& ops);
  // Whether `args` takes kEngineAcrossHosts (the same on every rank that
  // passes device buffers: hosts of equal size, an engine on each host).
  bool acrossHostsEligible(const algo::CollArgs& args, const PointerInfo& send, const PointerInfo& recv) const;
  Status runAcrossHosts(const algo::CollArgs& args, const WaitContext& wait, const HostSubgroupCollective& runOnRail);
  Status runP2PAcrossHosts(const P2PSplit& split, const WaitContext& wait, const HostP2P& runHost);

  CommDeviceSetup setup_;
  DeviceSettings settings_;
  Classifier classify_;
  std::function<Result<CopyEngine*>(int device)> copies_;
  std::map<int, std::unique_ptr<CopyEngine>> cudaCopies_;  // per device, created on first use
  PinnedPool::Lease staging_;  // kept between calls: the next one of the same size reuses it
  std::unique_ptr<DirectPath> direct_;
  std::unique_ptr<DeviceEngine> engine_;
  std::unique_ptr<DeviceEngine> hostEngine_;
  std::unique_ptr<GdrPath> gdr_;
  bool gdrKernels_ = false;  // the GDR path's reducer has kernels to run (GdrFacts::kernelsBuilt)
  // Written by the executor and, for engine calls, by the enqueuing thread.
  std::atomic<DataPath> lastPath_{DataPath::kHost};
  bool running_ = false;  // inside runCollective/runP2P: a nested call is the host step
};

}  // namespace loom::cuda
