#include "src/device/comm_devices.h"

#include <algorithm>
#include <cstdlib>

#include "common/format.h"
#include "src/device/gdr_availability.h"

namespace loom::cuda {
namespace {

// "8M", "512K", "1G" or plain bytes; false if it does not parse.
bool parseSize(const char* text, size_t* out) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (end == text) return false;
  unsigned shift = 0;
  if (*end == 'K' || *end == 'k') shift = 10, ++end;
  else if (*end == 'M' || *end == 'm') shift = 20, ++end;
  else if (*end == 'G' || *end == 'g') shift = 30, ++end;
  if (*end != '\0' || v > (~0ull >> shift)) return false;
  *out = static_cast<size_t>(v << shift);
  return true;
}

std::string bufferWhat(const char* name, const void* ptr, int rank) {
  return strprintf("%s %p on rank %d", name, ptr, rank);
}

// Whether every rank says yes: one bootstrap all-gather of a byte each.
Result<bool> everyRankSays(bootstrap::Bootstrap& boot, int rank, int nranks, bool mine, const WaitContext& wait) {
  std::vector<uint8_t> said(static_cast<size_t>(nranks), 0);
  said[static_cast<size_t>(rank)] = mine ? 1 : 0;
  LOOM_TRY(boot.allGather(said.data(), 1, wait));
  for (uint8_t yes : said)
    if (!yes) return false;
  return true;
}

}  // namespace

DeviceSettings DeviceSettings::fromConfig(const Config& config, std::vector<std::string>* warnings) {
  DeviceSettings s;
  if (const char* v = config.cudaEngine.c_str(); *v) {
    if (std::string(v) == "0") s.engine = false;
    else if (std::string(v) != "1" && warnings)
      warnings->push_back(strprintf("LOOM_CUDA_ENGINE='%s': expected 0 or 1", v));
  }
  if (const char* v = config.cudaP2P.c_str(); *v) {
    if (std::string(v) == "1") s.directP2P = true;
    else if (std::string(v) != "0" && warnings) warnings->push_back(strprintf("LOOM_CUDA_P2P='%s': expected 0 or 1", v));
  }
  if (const char* v = config.netGdr.c_str(); *v) {
    if (std::string(v) == "1") s.netGdr = true;
    else if (std::string(v) != "0" && warnings) warnings->push_back(strprintf("LOOM_NET_GDR='%s': expected 0 or 1", v));
  }
  if (const char* v = config.cudaCopyChunk.c_str(); *v) {
    size_t bytes = 0;
    if (parseSize(v, &bytes) && bytes >= 4096) s.copyChunkBytes = bytes;
    else if (warnings)
      warnings->push_back(strprintf("LOOM_CUDA_COPY_CHUNK='%s': expected bytes >= 4K (K/M/G suffixes)", v));
  }
  if (const char* v = config.cudaChannels.c_str(); *v) {
    char* end = nullptr;
    const long channels = std::strtol(v, &end, 10);
    if (end != v && *end == '\0' && channels >= 1 && channels <= kernels::cuda::engine::kMaxChannels)
      s.engineChannels = static_cast<int>(channels);
    else if (warnings)
      warnings->push_back(strprintf("LOOM_CUDA_CHANNELS='%s': expected 1..%d", v, kernels::cuda::engine::kMaxChannels));
  }
  return s;
}

std::unique_ptr<CommDevices> CommDevices::create(const CommDeviceSetup& setup, const Logger& log) {
  const Config fallback;
  const Config& config = setup.config ? *setup.config : fallback;
  std::vector<std::string> warnings;
  DeviceSettings settings = DeviceSettings::fromConfig(config, &warnings);
  // GDR across hosts: every rank joins the agreement, with or without a
  // device of its own (src/device/gdr_availability.h).
  bool gdr = false;
  if (settings.netGdr && setup.nranks > 1 && !setup.singleHost && setup.bootstrap) {
    bool ibDisabled = false;
    for (const auto& t : config.disabledTransports) ibDisabled = ibDisabled || t == "ib";
    const std::string why = setup.rdma ? gdrLocalReason(probeGdrLocalFacts(config.transport, ibDisabled, *setup.rdma))
                                       : "the communicator was given no RDMA network";
    auto agreed = agreeOnGdr(*setup.bootstrap, why, setup.wait, log);
    if (!agreed.isOk())
      LOOM_WARN(log, kSubsysInit, "GDR: %s; device buffers are staged", agreed.status().message().c_str());
    gdr = agreed.isOk() && agreed.value();
  }
  // Across hosts, engines are set up per host, and collectives then take a
  // path that every rank must take alike: every rank joins these exchanges,
  // with or without a device, so that either every host has an engine or
  // none uses one.
  const bool acrossHosts =
      settings.engine && !setup.singleHost && !setup.hostRanks.empty() && setup.bootstrap && setup.nranks > 1;
  bool everyRankHasDevices = false;
  if (acrossHosts) {
    auto all = everyRankSays(*setup.bootstrap, setup.rank, setup.nranks, devicesUsable(), setup.wait);
    everyRankHasDevices = all.isOk() && all.value();
  }
  if (!devicesUsable()) return nullptr;
  for (const auto& w : warnings) LOOM_WARN(log, kSubsysEnv, "%s", w.c_str());
  auto devices = std::make_unique<CommDevices>(setup, settings, classifyPointer, nullptr);
  // The device engine: collective over the communicator (every rank of one
  // host gets here: a host without a usable device has none on any rank).
  std::string engineWhy;
  if (!settings.engine) {
    engineWhy = "LOOM_CUDA_ENGINE=0";
  } else if (!setup.singleHost && !acrossHosts) {
    engineWhy = "ranks on several hosts, and no host layout";
  } else if (!setup.singleHost && !everyRankHasDevices) {
    engineWhy = "a rank on another host has no usable CUDA device";
  } else if (setup.bootstrap) {
    // A rank without a backend still joins the setup's exchanges (and says
    // no). Across hosts each host gets an engine of its own ranks.
    auto backend = makeCudaEngineBackend();
    if (!backend.isOk()) engineWhy = backend.status().message();
    EngineSetup engineSetup;
    engineSetup.rank = setup.rank;
    engineSetup.nranks = setup.nranks;
    if (!setup.singleHost) engineSetup.members = setup.hostRanks;
    engineSetup.bootstrap = setup.bootstrap;
    engineSetup.wait = setup.wait;
    engineSetup.settings.timeoutSeconds = config.timeoutSeconds;
    engineSetup.settings.channels = settings.engineChannels;
    engineSetup.settings.rules = setup.engineRules;
    auto made = DeviceEngine::create(engineSetup, backend.isOk() ? std::move(backend).value() : nullptr,
                                     engineWhy.empty() ? &engineWhy : nullptr);
    if (made.isOk()) devices->useEngine(std::move(made).value());
    else engineWhy = made.status().message();
    if (acrossHosts) {
      // Each host decided for itself; keep the host engines only if every host has one.
      auto all = everyRankSays(*setup.bootstrap, setup.rank, setup.nranks, devices->hostEngine_ != nullptr,
                               setup.wait);
      if (!all.isOk() || !all.value()) {
        devices->hostEngine_.reset();
        if (engineWhy.empty()) engineWhy = "a host has no device engine, so collectives stage whole on every host";
      }
    }
  }
  if (devices->engine_)
    LOOM_INFO(log, kSubsysInit, "CUDA: device engine on device %d (%d channels): collectives on device buffers run "
              "as kernels between the GPUs", devices->engine_->device(), devices->engine_->channels());
  else if (devices->hostEngine_)
    LOOM_INFO(log, kSubsysInit, "CUDA: device engine of this host's %d ranks on device %d: collectives on device "
              "buffers run in it within the host and are staged only between hosts",
              static_cast<int>(devices->hostEngine_->members().size()), devices->hostEngine_->device());
  else
    LOOM_INFO(log, kSubsysInit, "CUDA: no device engine (%s)", engineWhy.c_str());
  if (settings.directP2P && directPathBuilt() && setup.singleHost)
    devices->direct_ = makeDirectPath(setup.rank, setup.nranks, setup.bootstrap);
  if (settings.netGdr && setup.singleHost && setup.nranks > 1)
    LOOM_INFO(log, kSubsysInit, "GDR: LOOM_NET_GDR=1 has no effect on a single host (LOOM_CUDA_P2P=1 is its direct path)");
  if (gdr) {
    GdrPathOptions options;
    options.rank = setup.rank;
    options.nranks = setup.nranks;
    options.bootstrap = setup.bootstrap;
    options.network = setup.rdma;
    options.makeReducer = makeCudaReducer;
    options.log = log;
    devices->gdr_ = std::make_unique<GdrPath>(std::move(options));
    devices->gdrKernels_ = directPathBuilt();
  }
  LOOM_INFO(log, kSubsysInit, "CUDA: %s; device buffers staged through pinned memory (copies of %zu B)%s%s",
            availability().describe().c_str(), settings.copyChunkBytes,
            devices->direct_ ? ", same-host all-reduce direct over CUDA IPC when every rank can" : "",
            devices->gdr_ ? ", cross-host all-reduce over GPUDirect RDMA when every rank can" : "");
  return devices;
}

CommDevices::CommDevices(const CommDeviceSetup& setup, DeviceSettings settings, Classifier classify,
                         std::function<Result<CopyEngine*>(int device)> copies)
    : setup_(setup), settings_(settings), classify_(std::move(classify)), copies_(std::move(copies)) {
  if (!copies_) copies_ = [this](int device) { return cudaCopies(device); };
}

Result<CopyEngine*> CommDevices::cudaCopies(int device) {
  auto& engine = cudaCopies_[device];
  if (!engine) {
    auto made = makeCudaCopyEngine(device);
    LOOM_TRY(made.status());
    engine = std::move(made).value();
  }
  return engine.get();
}

Result<PinnedPool::Lease*> CommDevices::staging(size_t bytes) {
  if (staging_.bytes() < bytes) {
    staging_ = PinnedPool::Lease();  // back to the pool before taking a bigger one
    auto lease = PinnedPool::instance().acquire(bytes);
    LOOM_TRY(lease.status().withContext(strprintf("rank %d: ", setup_.rank)));
    staging_ = std::move(lease).value();
  }
  return &staging_;
}

Status CommDevices::runCollective(const algo::CollArgs& args, const WaitContext& wait, const HostCollective& runHost,
                                  bool* handled, const HostSubgroupCollective& runOnRail) {
  *handled = false;
  // runHost may come back here with the staged (host) buffers: run them as host memory.
  if (running_) return Status::ok();
  running_ = true;
  struct Leave {
    bool* flag;
    ~Leave() { *flag = false; }
  } leave{&running_};
  auto send = classify_(args.sendbuf, bufferWhat("sendbuff", args.sendbuf, setup_.rank));
  LOOM_TRY(send.status());
  auto recv = classify_(args.recvbuf, bufferWhat("recvbuff", args.recvbuf, setup_.rank));
  LOOM_TRY(recv.status());
  const bool sendStaged = needsStaging(send.value().kind), recvStaged = needsStaging(recv.value().kind);
  const size_t es = dataTypeSize(args.dtype);
  if (engine_ && engine_->accepts(args, send.value(), recv.value())) {
    // A blocking call: the engine's own stream, then wait for it.
    *handled = true;
    lastPath_ = DataPath::kEngine;
    LOOM_TRY(engine_->enqueue(args, nullptr));
    LOOM_TRY(engine_->waitIdle(wait));
    return engine_->kernelError();
  }
  if (runOnRail && acrossHostsEligible(args, send.value(), recv.value())) {
    *handled = true;
    lastPath_ = DataPath::kEngineAcrossHosts;
    return runAcrossHosts(args, wait, runOnRail);
  }

  DirectFacts facts;
  facts.enabled = direct_ != nullptr;
  facts.kernelsBuilt = directPathBuilt();
  facts.devicesUsable = devicesUsable();
  facts.singleHost = setup_.singleHost;
  facts.nranks = setup_.nranks;
  facts.type = args.type;
  facts.bytes = args.count * es;
  const bool eligible = directEligible(facts);
  bool ranDirect = false;
  if (eligible) {
    *handled = true;
    LOOM_TRY(direct_->allReduce(args, send.value(), recv.value(), wait, &ranDirect));
  }
  GdrFacts gdrFacts;
  gdrFacts.agreed = gdr_ != nullptr && !gdr_->unavailable();
  gdrFacts.kernelsBuilt = gdrKernels_;
  gdrFacts.singleHost = setup_.singleHost;
  gdrFacts.nranks = setup_.nranks;
  gdrFacts.type = args.type;
  gdrFacts.bytes = facts.bytes;
  const bool gdrOk = !eligible && gdrEligible(gdrFacts);
  bool ranGdr = false;
  if (gdrOk) {
    *handled = true;
    LOOM_TRY(gdr_->allReduce(args, send.value(), recv.value(), wait, &ranGdr));
  }
  lastPath_ = gdrOk ? choosePath(true, ranGdr, sendStaged || recvStaged, DataPath::kDirectGdr)
                    : choosePath(eligible, ranDirect, sendStaged || recvStaged);
  if (lastPath_ == DataPath::kDirectP2P || lastPath_ == DataPath::kDirectGdr) return Status::ok();
  if (lastPath_ == DataPath::kHost) return eligible || gdrOk ? runHost(args) : Status::ok();
  *handled = true;

  StagingInputs in;
  in.type = args.type;
  in.count = args.count;
  in.elemBytes = es;
  in.nranks = setup_.nranks;
  in.rank = setup_.rank;
  in.root = args.root;
  in.inPlace = isInPlace(args, setup_.rank);
  in.sendStaged = sendStaged;
  in.recvStaged = recvStaged;
  in.copyChunkBytes = settings_.copyChunkBytes;
  const StagingPlan plan = planStaging(in);
  const int device = sendStaged ? send.value().device : recv.value().device;
  auto copies = copies_(device);
  LOOM_TRY(copies.status().withContext(strprintf("rank %d, device %d: ", setup_.rank, device)));
  auto buffer = staging(plan.stagingBytes);
  LOOM_TRY(buffer.status());
  return runStagedCollective(args, plan, buffer.value()->data(), *copies.value(), wait, runHost);
}

Status CommDevices::runP2P(const std::vector<algo::P2POp>& ops, const WaitContext& wait, const HostP2P& runHost,
                           bool* handled) {
  *handled = false;
  if (running_) return Status::ok();
  running_ = true;
  struct Leave {
    bool* flag;
    ~Leave() { *flag = false; }
  } leave{&running_};
  auto kinds = classifyP2P(ops);
  LOOM_TRY(kinds.status());
  if (engine_ && engine_->acceptsP2P(ops, kinds.value())) {
    *handled = true;
    lastPath_ = DataPath::kEngine;
    LOOM_TRY(engine_->enqueueP2P(ops, nullptr));
    LOOM_TRY(engine_->waitIdle(wait));
    return engine_->kernelError();
  }
  if (hostEngine_ && setup_.nHosts > 1) {
    // Across hosts, per peer pair: same-host peers through this host's
    // engine, the others staged (p2p_across_hosts.h).
    P2PSplit split = splitP2PByHost(ops, kinds.value(), hostEngine_->members(), hostEngine_->device());
    if (!split.engine.empty()) {
      *handled = true;
      lastPath_ = DataPath::kEngineAcrossHosts;
      return runP2PAcrossHosts(split, wait, runHost);
    }
  }
  std::vector<bool> staged(ops.size(), false);
  int device = -1;
  for (size_t i = 0; i < ops.size(); ++i) {
    staged[i] = needsStaging(kinds.value()[i].kind);
    if (staged[i] && device < 0) device = kinds.value()[i].device;
  }
  if (device < 0) {
    lastPath_ = DataPath::kHost;
    return Status::ok();
  }
  *handled = true;
  lastPath_ = DataPath::kStaged;
  const P2PStagingPlan plan = planP2PStaging(ops, staged, settings_.copyChunkBytes);
  auto copies = copies_(device);
  LOOM_TRY(copies.status().withContext(strprintf("rank %d, device %d: ", setup_.rank, device)));
  auto buffer = staging(plan.stagingBytes);
  LOOM_TRY(buffer.status());
  return runStagedP2P(ops, plan, buffer.value()->data(), *copies.value(), wait, runHost);
}

Result<std::vector<PointerInfo>> CommDevices::classifyP2P(const std::vector<algo::P2POp>& ops) {
  std::vector<PointerInfo> kinds(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    const bool isSend = ops[i].kind == algo::P2POp::kSend;
    const void* buf = isSend ? ops[i].src : ops[i].dst;
    auto info = classify_(buf, strprintf("%s buffer %p (peer %d) on rank %d", isSend ? "send" : "recv", buf,
                                         ops[i].peer, setup_.rank));
    LOOM_TRY(info.status());
    kinds[i] = info.value();
  }
  return kinds;
}

bool CommDevices::engineTakes(const algo::CollArgs& args) {
  if (!engine_) return false;
  auto send = classify_(args.sendbuf, bufferWhat("sendbuff", args.sendbuf, setup_.rank));
  auto recv = classify_(args.recvbuf, bufferWhat("recvbuff", args.recvbuf, setup_.rank));
  // A buffer CUDA cannot describe is reported by the executor's path.
  return send.isOk() && recv.isOk() && engine_->accepts(args, send.value(), recv.value());
}

bool CommDevices::engineTakesP2P(const std::vector<algo::P2POp>& ops) {
  if (!engine_) return false;
  auto kinds = classifyP2P(ops);
  return kinds.isOk() && engine_->acceptsP2P(ops, kinds.value());
}

bool CommDevices::enqueueOnEngine(const algo::CollArgs& args, void* cudaStream, Status* status) {
  if (!engineTakes(args)) return false;
  lastPath_ = DataPath::kEngine;
  *status = engine_->enqueue(args, cudaStream);
  return true;
}

bool CommDevices::enqueueP2POnEngine(const std::vector<algo::P2POp>& ops, void* cudaStream, Status* status) {
  if (!engineTakesP2P(ops)) return false;
  lastPath_ = DataPath::kEngine;
  *status = engine_->enqueueP2P(ops, cudaStream);
  return true;
}

void CommDevices::retireEngines(const WaitContext& wait, const std::function<bool()>& everyRankDone) {
  DeviceEngine* eng = engine_ ? engine_.get() : hostEngine_.get();
  if (!eng) return;
  const bool idle = eng->waitIdle(wait).isOk();
  if (!idle || !everyRankDone()) eng->keepMemoryAtDestruction();
}

bool CommDevices::acrossHostsEligible(const algo::CollArgs& args, const PointerInfo& send,
                                      const PointerInfo& recv) const {
  // hostEngine_ is on every rank or on none (create() agreed on it), and
  // the rest is the same on every rank that passes device buffers, as the
  // ranks must: the path is taken alike everywhere. Rails need hosts of
  // equal size. With LOOM_NET_GDR=1 agreed, the NIC moves device data
  // between hosts instead (gdr_path.h).
  return hostEngine_ && !gdr_ && !setup_.rail.empty() && setup_.nHosts > 1 &&
         acrossHostsLayoutFits(setup_.hosts, setup_.rank) && hostEngine_->accepts(args, send, recv);
}

std::function<Result<void*>(size_t)> CommDevices::stagingBytes() {
  return [this](size_t bytes) -> Result<void*> {
    auto lease = staging(bytes);
    LOOM_TRY(lease.status());
    return lease.value()->data();
  };
}

Status CommDevices::runAcrossHosts(const algo::CollArgs& args, const WaitContext& wait,
                                   const HostSubgroupCollective& runOnRail) {
  const std::string where = strprintf("%s across hosts on rank %d: ", algo::collTypeName(args.type), setup_.rank);
  auto copies = copies_(hostEngine_->device());
  LOOM_TRY(copies.status().withContext(where));
  AcrossHosts ctx;
  ctx.engine = hostEngine_.get();
  ctx.copies = copies.value();
  ctx.staging = stagingBytes();
  ctx.runOnRail = runOnRail;
  ctx.hosts = &setup_.hosts;
  ctx.rank = setup_.rank;
  ctx.nranks = setup_.nranks;
  ctx.wait = wait;
  return loom::cuda::runAcrossHosts(args, ctx);
}

Status CommDevices::runP2PAcrossHosts(const P2PSplit& split, const WaitContext& wait, const HostP2P& runHost) {
  auto copies = copies_(hostEngine_->device());
  LOOM_TRY(copies.status().withContext(strprintf("send/recv across hosts on rank %d: ", setup_.rank)));
  P2PAcrossHosts ctx;
  ctx.engine = hostEngine_.get();
  ctx.copies = copies.value();
  ctx.staging = stagingBytes();
  ctx.runHost = runHost;
  ctx.rank = setup_.rank;
  ctx.copyChunkBytes = settings_.copyChunkBytes;
  ctx.wait = wait;
  return loom::cuda::runP2PAcrossHosts(split, ctx);
}

}  // namespace loom::cuda
