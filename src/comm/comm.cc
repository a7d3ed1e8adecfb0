#include "src/comm/comm.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "src/comm/host_identity.h"
#include "src/comm/start_placement.h"
#include "src/comm/stream.h"
#include "src/device/comm_devices.h"
#include "src/comm/transport_policy.h"
#include "src/comm/transport_registry.h"
#include "algorithms/registry.h"
#include "common/asymmetric_fence.h"
#include "common/clock.h"
#include "common/format.h"
#include "kernels/reduce.h"
#include "loom/loom.h"
#include "src/topology/topology_log.h"
#include "transports/verbs/verbs_rdma_memory.h"


namespace loom {

// Peer rank -> the connection of the transport that serves that peer.
class Communicator::LinkTable final : public algo::Links {
 public:
  LinkTable(int nranks, transport::Protocol proto) : proto_(proto), byPeer_(static_cast<size_t>(nranks), nullptr) {}
  void set(int peer, transport::Transport* t) { byPeer_[static_cast<size_t>(peer)] = t; }
  transport::Transport* transportOf(int peer) const { return byPeer_[static_cast<size_t>(peer)]; }
  transport::SendConnection& sendTo(int peer) override {
    return byPeer_[static_cast<size_t>(peer)]->sendTo(peer, proto_);
  }
  transport::RecvConnection& recvFrom(int peer) override {
    return byPeer_[static_cast<size_t>(peer)]->recvFrom(peer, proto_);
  }

 private:
  transport::Protocol proto_;
  std::vector<transport::Transport*> byPeer_;
};

Communicator::Communicator(Config config, int rank, int nranks, std::vector<std::string>* warnings)
    : config_(std::move(config)),
      rank_(rank),
      nranks_(nranks),
      log_(config_.log, rank) {}

Communicator::~Communicator() {
  if (executor_) executor_->shutdown();
  if (devices_ && bootstrap_) {
    // The device engine's memory is written by peers' kernels until their
    // last step: free it only once every rank got here (an aborted
    // communicator skips the barrier and leaves the memory allocated).
    WaitContext wait = makeWait();
    wait.deadline = Deadline::after(config_.timeoutSeconds > 0 ? std::min(config_.timeoutSeconds, 30.0) : 30.0);
    devices_->retireEngines(wait, [&] { return !abort_.load() && bootstrap_->barrier(wait).isOk(); });
  }
}

Result<std::unique_ptr<Communicator>> Communicator::create(const bootstrap::UniqueId& id, int nranks,
                                                           int rank, Overrides overrides) {
  std::vector<std::string> warnings;
  Config config = Config::fromEnv(&warnings);
  if (overrides.timeoutSeconds > 0) config.timeoutSeconds = overrides.timeoutSeconds;
  if (overrides.chunkBytes > 0) {
    // As if LOOM_CHUNK_SIZE were given: every backend then uses it (TCP's
    // preference for larger chunks included).
    config.chunkBytes = overrides.chunkBytes;
    config.chunkBytesSet = true;
  }
  std::unique_ptr<Communicator> comm(new Communicator(std::move(config), rank, nranks, &warnings));
  for (const auto& w : warnings) LOOM_WARN(comm->log_, kSubsysEnv, "%s", w.c_str());
  // From here on this process's writers leave WaitSignal's fence to sleepers.
  const bool asymmetric = asymmetric_fence::enable();
  LOOM_INFO(comm->log_, kSubsysInit, "wake-ups: %s", asymmetric ? "sleepers fence for writers (membarrier)"
                                                                 : "writers fence (no membarrier here)");
  LOOM_TRY(comm->connectPeers(id).withContext(strprintf("init of rank %d of %d: ", rank, nranks)));
  topology::logTopologyOnce(comm->log_);
  comm->diag_ = std::make_unique<Diagnostics>(comm->config_, rank, nranks,
                                              comm->peers_[static_cast<size_t>(rank)].hostName, comm->log_);
  LOOM_TRY(comm->diag_->agreeOnCheck(*comm->bootstrap_, comm->makeWait()));
  comm->devices_ = cuda::CommDevices::create(
      {rank, nranks, comm->singleHost_, comm->bootstrap_.get(), &comm->config_, comm->makeWait(),
       transport::defaultVerbsRdmaNetwork(), engineChoiceRules(*comm->tuner_), comm->hostLayout_->localRanks(), comm->hostLayout_->rail,
       comm->hostLayout_->nHosts(), comm->hostLayout_->ranksOn},
      comm->log_);
  comm->executor_ = std::make_unique<Executor>();
  comm->runner_.setOneStepRecords(!comm->devices_ && comm->diag_->recordsInOneStep() &&
                                  !comm->log_.enabled(LogLevel::kTrace, kSubsysColl));
  comm->placeCreatingThread();
  if (rank == 0)
    LOOM_INFO(comm->log_, kSubsysInit, "Loom %d.%d.%d, reduction kernels: %s", LOOM_MAJOR,
              LOOM_MINOR, LOOM_PATCH, kernels::isaName(kernels::activeIsa()));
  LOOM_INFO(comm->log_, kSubsysInit, "comm %p rank %d nranks %d ready (chunk %zu B x %d slots, timeout %.0f s)",
            static_cast<void*>(comm.get()), rank, nranks, comm->config_.chunkBytes, comm->config_.fifoSlots,
            comm->config_.timeoutSeconds);
  return comm;
}

WaitContext Communicator::makeWait() const {
  // The coarse clock serves deadlines of a second or more (Deadline::after).
  return makeWait(config_.timeoutSeconds >= 1.0 ? coarseMonotonicNanos() : 0);
}

Status Communicator::connectPeers(const bootstrap::UniqueId& id) {
  auto boot = bootstrap::Bootstrap::connect(id, rank_, nranks_, makeWait(), log_);
  LOOM_TRY(boot.status());
  bootstrap_ = std::move(boot).value();

  peers_.assign(static_cast<size_t>(nranks_), transport::PeerInfo{});
  peers_[static_cast<size_t>(rank_)] = localPeerInfo(rank_, config_.hostId);
  LOOM_TRY(bootstrap_->allGather(peers_.data(), sizeof(transport::PeerInfo), makeWait()));
  for (int r = 0; r < nranks_; ++r) {
    peers_[static_cast<size_t>(r)].hostName[sizeof(peers_[0].hostName) - 1] = '\0';
    LOOM_ENFORCE(peers_[static_cast<size_t>(r)].rank == r, Code::kInternalError,
                 "bootstrap returned the peer table out of order at slot %d", r);
  }

  adaptWaitsToHost();
  std::vector<uint64_t> hostKeys;  // PeerInfo::hostHash (LOOM_HOST_ID sets it): equal => same host
  hostKeys.reserve(peers_.size());
  for (const auto& p : peers_) hostKeys.push_back(p.hostHash);
  hostLayout_ = std::make_unique<const algo::HostLayout>(algo::HostLayout::fromHostKeys(hostKeys, rank_));

  // Tuner options: every rank must pick the same algorithm for a call, so all
  // use rank 0's (one small bootstrap exchange when they already agree).
  std::vector<std::string> tunerWarnings;
  auto local = localTunerOptions(config_, &tunerWarnings);
  auto agreed = agreeOnTunerOptions(local, *bootstrap_, makeWait(), log_);
  LOOM_TRY(agreed.status());
  tuner_ = std::make_unique<tuner::Tuner>(agreed.value(), nranks_, algo::allAlgorithms(), log_, &tunerWarnings);
  // A forced choice (LOOM_ALGO, LOOM_PROTO) is never second-guessed.
  if (agreed.value().online && agreed.value().algo.empty() && agreed.value().proto.empty())
    online_ = std::make_unique<tuner::OnlineTuner>();
  for (const auto& w : tunerWarnings) tuner::logOnce(log_, LogLevel::kWarn, w);

  // Every rank instantiates every backend and calls connect() on each, in
  // registry order, because connect() is collective (it may use the bootstrap).
  links_ = std::make_unique<LinkTable>(nranks_, transport::Protocol::kSimple);
  auto served = choosePeerTransports();
  LOOM_TRY(served.status());
  // The Simple chunk: the smallest that a backend serving any pair prefers
  // (TCP prefers larger ones); usedByAnyPair is the same on every rank, so all agree.
  size_t simpleChunk = 0;
  for (size_t t = 0; t < transportRegistry().size(); ++t) {
    const auto* factory = transportRegistry()[t];
    if (!served->usedByAnyPair[t]) continue;
    const size_t want = factory->preferredChunkBytes ? factory->preferredChunkBytes(config_) : config_.chunkBytes;
    simpleChunk = simpleChunk ? std::min(simpleChunk, want) : want;
  }
  if (simpleChunk) config_.chunkBytes = simpleChunk;
  std::vector<transport::Transport*> inUse;
  transport::SetupContext setup;
  setup.rank = rank_;
  setup.nranks = nranks_;
  setup.peers = &peers_;
  setup.jobTag = id.jobTag();
  setup.config = &config_;
  setup.log = log_;
  setup.bootstrap = bootstrap_.get();
  setup.wait = makeWait();
  for (size_t t = 0; t < transportRegistry().size(); ++t) {
    const auto& mine = served->peers[t];
    auto backend = transportRegistry()[t]->create();
    setup.usedByAnyPair = served->usedByAnyPair[t];
    LOOM_TRY(backend->connect(setup, mine));
    for (int peer : mine) links_->set(peer, backend.get());
    if (!mine.empty() && backend->health()) health_ = backend->health();
    if (!mine.empty()) inUse.push_back(backend.get());
    if (!mine.empty()) {
      std::string list;
      for (int peer : mine) list += strprintf("%s%d", list.empty() ? "" : ",", peer);
      LOOM_INFO(log_, kSubsysTransport, "%s serves %zu peer(s): %s", backend->name(), mine.size(), list.c_str());
    }
    transports_.push_back(std::move(backend));
  }
  connectProtocols(inUse);
  return agreeOnBulletin(inUse);
}

// An algorithm takes the bulletin (or windows) path on every rank or on
// none (a rank on the other path would wait forever), and a backend offers
// them only where it serves all of a rank's peers, which need not hold for
// every rank alike: hence one exchange of who has which.
Status Communicator::agreeOnBulletin(const std::vector<transport::Transport*>& inUse) {
  constexpr int32_t kHasBulletin = 1, kHasWindows = 2, kCopiesPeers = 4, kCopiesInProcess = 8;
  transport::Bulletin* mine = nullptr;
  transport::SharedWindows* myWindows = nullptr;
  if (inUse.size() == 1 && llLinks_) mine = inUse.front()->bulletin();
  if (inUse.size() == 1) myWindows = inUse.front()->windows();
  std::vector<int32_t> has(static_cast<size_t>(nranks_), 0);
  has[static_cast<size_t>(rank_)] = (mine != nullptr ? kHasBulletin : 0) | (myWindows != nullptr ? kHasWindows : 0) |
                                    (myWindows != nullptr && myWindows->peerCopies() ? kCopiesPeers : 0) |
                                    (myWindows != nullptr && myWindows->peerCopiesInProcess() ? kCopiesInProcess : 0);
  if (nranks_ > 1) LOOM_TRY(bootstrap_->allGather(has.data(), sizeof(int32_t), makeWait()));
  int32_t all = nranks_ > 1 ? kHasBulletin | kHasWindows | kCopiesPeers | kCopiesInProcess : 0;
  for (int32_t h : has) all &= h;
  bulletin_ = (all & kHasBulletin) ? mine : nullptr;
  windows_ = (all & kHasWindows) ? myWindows : nullptr;
  peerCopies_ = windows_ != nullptr && (all & kCopiesPeers) != 0;
  peerCopiesInProcess_ = peerCopies_ && (all & kCopiesInProcess) != 0;
  if (bulletin_)
    LOOM_INFO(log_, kSubsysTransport, "bulletin of %zu bytes for one-shot LL all-reduce", bulletin_->capacity());
  if (windows_)
    LOOM_INFO(log_, kSubsysTransport, "shared windows of %zu bytes for windowed all-reduce; direct copies %s",
              windows_->bytes(),
              peerCopiesInProcess_ ? "with every rank (threads of one process: memcpy)"
              : peerCopies_        ? "with every rank"
                                   : "off (not every rank can make them)");
  return Status::ok();
}

// Which registry backend serves each peer (src/comm/transport_policy.h). Every
// rank judges each peer (its own settings, build and devices), the judgments
// are all-gathered, and every rank applies the same symmetric rule to every
// pair: so both ends of a pair agree, and every rank knows whether a backend
// serves any pair at all (a backend no pair uses skips its collective setup).
Result<Communicator::PeerTransports> Communicator::choosePeerTransports() const {
  namespace policy = transport_policy;
  const auto& registry = transportRegistry();
  std::vector<int> slotToBackend(policy::kNumSlots, -1);
  for (size_t t = 0; t < registry.size(); ++t) {
    const int slot = policy::slotOf(registry[t]->name);
    LOOM_ENFORCE(slot >= 0, Code::kInternalError, "transport '%s' is not in the transport policy's preference list",
                 registry[t]->name);
    slotToBackend[static_cast<size_t>(slot)] = static_cast<int>(t);
  }
  const auto n = static_cast<size_t>(nranks_);
  std::vector<policy::Verdicts> verdicts(n * n, 0);  // row r: rank r's verdicts on each peer
  const auto& self = peers_[static_cast<size_t>(rank_)];
  for (size_t peer = 0; peer < n; ++peer)
    if (static_cast<int>(peer) != rank_)
      verdicts[static_cast<size_t>(rank_) * n + peer] = policy::localVerdicts(self, peers_[peer], config_, registry);
  if (nranks_ > 1) LOOM_TRY(bootstrap_->allGather(verdicts.data(), n, makeWait()));

  PeerTransports out;
  out.peers.assign(registry.size(), {});
  out.usedByAnyPair.assign(registry.size(), false);
  for (size_t a = 0; a < n; ++a) {
    for (size_t b = a + 1; b < n; ++b) {
      const policy::Verdicts aOnB = verdicts[a * n + b], bOnA = verdicts[b * n + a];
      const int slot = policy::choosePair(aOnB, bOnA);
      if (slot < 0) {
        // Every rank finds the same first failing pair and fails with it.
        const bool selfIsA = static_cast<int>(a) == rank_, selfIsB = static_cast<int>(b) == rank_;
        return policy::explainRejection(peers_[a], aOnB, selfIsA ? &config_ : nullptr, peers_[b], bOnA,
                                        selfIsB ? &config_ : nullptr, registry)
            .withContext(strprintf("creating the communicator on rank %d: ", rank_));
      }
      const auto t = static_cast<size_t>(slotToBackend[static_cast<size_t>(slot)]);
      out.usedByAnyPair[t] = true;
      if (static_cast<int>(a) == rank_) out.peers[t].push_back(static_cast<int>(b));
      if (static_cast<int>(b) == rank_) out.peers[t].push_back(static_cast<int>(a));
    }
  }
  for (auto& list : out.peers) std::sort(list.begin(), list.end());
  return out;
}

void Communicator::connectProtocols(const std::vector<transport::Transport*>& inUse) {
  const auto& self = peers_[static_cast<size_t>(rank_)];
  singleHost_ = true;
  for (const auto& p : peers_) singleHost_ = singleHost_ && p.hostHash == self.hostHash;

  // LL only if every transport serving a peer offers it: an algorithm runs
  // over one protocol on all its links. The same on every rank, since each
  // backend's support follows from the (shared) config.
  bool ll = true;
  for (auto* t : inUse) ll = ll && t->supports(transport::Protocol::kLL);
  if (!ll) return;
  llLinks_ = std::make_unique<LinkTable>(nranks_, transport::Protocol::kLL);
  llChunkBytes_ = config_.chunkBytes;
  for (int peer = 0; peer < nranks_; ++peer) {
    if (peer == rank_) continue;
    transport::Transport* t = links_->transportOf(peer);
    llLinks_->set(peer, t);
    llChunkBytes_ = std::min({llChunkBytes_, t->sendTo(peer, transport::Protocol::kLL).chunkBytes(),
                              t->recvFrom(peer, transport::Protocol::kLL).chunkBytes()});
  }
  LOOM_INFO(log_, kSubsysTuner, "protocols: Simple (%zu B chunks), LL (%zu B chunks)%s", config_.chunkBytes,
            llChunkBytes_, singleHost_ ? ", single host" : "");
}

void Communicator::adaptWaitsToHost() {
  // With more ranks than cores on this host a peer we wait for is often not
  // running, and spinning only delays it: yield at once instead (measured
  // with 4 ranks on 2 cores: 8 B all-reduce 6-9 us instead of 13-36 us).
  const auto& self = peers_[static_cast<size_t>(rank_)];
  int localRanks = 0;
  for (const auto& p : peers_) localRanks += p.hostHash == self.hostHash ? 1 : 0;
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  int cores = sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
  // Under loomrun --bind each rank's mask holds only its own cores; loomrun
  // then says how many the host's ranks have between them.
  if (config_.localCores > 0) cores = config_.localCores;
  if (localRanks > cores && !config_.spinMicrosSet) config_.spinMicros = 0;
  // The same for a small stream call's poll for its peers (runInline): with
  // 4 ranks on 2 cores an 8-byte stream all-reduce took a median 11.4 us with
  // the 20 us poll and 7.5 us with none (blocking: 4.5 us).
  if (localRanks > cores && !config_.asyncInlineMicrosSet) config_.asyncInlineMicros = 0;
  LOOM_INFO(log_, kSubsysInit,
            "%d local ranks on %d cores: waits spin %d us, yield %d us, then sleep; small stream calls poll %d us "
            "for their peers",
            localRanks, cores, config_.spinMicros, config_.yieldMicros, config_.asyncInlineMicros);
}

void Communicator::placeCreatingThread() {
  // Last in init: the exchanges before it end in socket waits, whose wake-ups
  // could put the ranks back together.
  if (!config_.placeRanks || nranks_ < 2) return;
  const auto& self = peers_[static_cast<size_t>(rank_)];
  int localIndex = -1, localRanks = 0;
  for (const auto& p : peers_) {
    if (p.hostHash != self.hostHash) continue;
    if (p.rank != rank_ && p.pid == self.pid) return;  // ranks as threads of one process: one thread made them all
    if (p.rank == rank_) localIndex = localRanks;
    ++localRanks;
  }
  const std::string what = startOnOwnCore(localIndex, localRanks);
  if (!what.empty()) LOOM_INFO(log_, kSubsysInit, "rank %d (local %d of %d): %s", rank_, localIndex, localRanks, what.c_str());
}

int Communicator::algorithmRecord(const algo::AlgorithmInfo& algorithm, transport::Protocol proto) {
  const auto index = static_cast<int>(&algorithm - algo::allAlgorithms().data());
  return index * transport::kNumProtocols + static_cast<int>(proto);
}

algo::Links& Communicator::simpleLinks() const { return *links_; }

bool Communicator::contextFor(transport::Protocol proto, const WaitContext& wait, algo::AlgoContext* ctx) const {
  LinkTable* links = proto == transport::Protocol::kLL ? llLinks_.get() : links_.get();
  if (!links) return false;
  ctx->rank = rank_;
  ctx->nranks = nranks_;
  ctx->links = links;
  ctx->wait = wait;
  ctx->chunkBytes = proto == transport::Protocol::kLL ? llChunkBytes_ : config_.chunkBytes;
  ctx->proto = proto;
  ctx->bulletin = proto == transport::Protocol::kLL ? bulletin_ : nullptr;
  ctx->windows = windows_;
  ctx->peerCopies = peerCopies_;
  ctx->peerCopiesInProcess = peerCopiesInProcess_;
  ctx->singleHost = singleHost_;
  ctx->hosts = hostLayout_.get();
  return true;
}

tuner::Choice Communicator::chooseAlgorithm(const algo::CollArgs& args, const WaitContext& wait) {
  ChoiceMemo& m = choiceMemo_;
  if (m.matches(args)) return m.choice;
  // One context per protocol the communicator has links for; the tuner picks
  // the algorithm and the protocol together.
  algo::AlgoContext ctxs[transport::kNumProtocols];
  tuner::ProtoContexts available{};
  for (int p = 0; p < transport::kNumProtocols; ++p)
    if (contextFor(static_cast<transport::Protocol>(p), wait, &ctxs[p])) available[static_cast<size_t>(p)] = &ctxs[p];
  tuner::Choice choice = tuner_->choose(args, available);
  m.online = choice.algorithm ? onlineSlotFor(args, available) : nullptr;
  if (m.online && m.online->settled()) choice = m.online->winner();
  m.valid = choice.algorithm != nullptr;
  m.type = args.type;
  m.count = args.count;
  m.dtype = args.dtype;
  m.op = args.op;
  m.root = args.root;
  m.inPlace = args.sendbuf == args.recvbuf;
  m.choice = choice;
  m.hasContext = m.valid && contextFor(choice.proto, wait, &m.context);
  m.context.progress = diag_->progress();
  m.algorithmRecord = m.valid ? algorithmRecord(*choice.algorithm, choice.proto) : -1;
  const algo::SplitRun* split = m.hasContext ? choice.algorithm->split : nullptr;
  m.split = split && split->applies(args, m.context) ? split : nullptr;
  return choice;
}

std::string Communicator::lastAlgorithm() const {
  const int last = lastAlgorithm_.load(std::memory_order_relaxed);
  if (last == kEngineAcrossHostsRecord) return "engine+staged/hier";
  if (last == kEngineRecord) {
    const std::string choice = devices_ && devices_->engine() ? devices_->engine()->lastChoice() : "";
    return "engine/" + choice;
  }
  if (last < 0) return "";
  const auto& algorithm = algo::allAlgorithms()[static_cast<size_t>(last / transport::kNumProtocols)];
  return strprintf("%s/%s", algorithm.name,
                   transport::protocolName(static_cast<transport::Protocol>(last % transport::kNumProtocols)));
}

void Communicator::recordError(const Status& status) {
  {
    std::lock_guard<std::mutex> lock(errorMu_);
    if (asyncError_.isOk()) asyncError_ = status;
  }
  failed_.store(true);
  LOOM_WARN(log_, kSubsysColl, "%s", status.message().c_str());
}

Status Communicator::enqueue(const algo::CollArgs& args, Stream* stream) {
  if (!stream) return runner_.runBlocking(args);
  // Only a CUDA-bound stream can take the engine's path; a host stream goes
  // straight on (a small call here costs a fraction of a microsecond).
  if (stream->device())
    if (Status engine; enqueueOnEngine(args, stream, &engine)) return engine;
  if (runner_.runInline(args, *stream)) return Status::ok();
  stream->waitForRoom();
  (void)runner_.enqueueAsync(args, stream);
  return Status::ok();
}

CompletionPtr Communicator::enqueueAsync(const algo::CollArgs& args, Stream* stream) {
  if (Status engine; enqueueOnEngine(args, stream, &engine)) return completedWith(std::move(engine));
  return runner_.enqueueAsync(args, stream);
}

bool Communicator::enqueueOnEngine(const algo::CollArgs& args, Stream* stream, Status* status) {
  // The device engine's kernel goes straight onto the CUDA stream: the
  // stream orders it, no Loom thread runs it.
  if (!devices_ || !devices_->engine() || !stream || !stream->device()) return false;
  if (abort_.load() || failed_.load()) return false;  // the executor refuses it with the error
  // The same turn as the executor's enqueues on this stream: one order for both.
  std::unique_lock<std::mutex> turn = stream->enqueueTurn();
  if (!devices_->enqueueOnEngine(args, stream->device()->cudaStream(), status)) return false;
  lastAlgorithm_.store(kEngineRecord, std::memory_order_relaxed);
  if (!status->isOk()) recordError(*status);
  return true;
}

bool Communicator::enqueueP2POnEngine(const std::vector<algo::P2POp>& ops, Stream* stream, Status* status) {
  if (!devices_ || !devices_->engine() || !stream || !stream->device()) return false;
  if (abort_.load() || failed_.load()) return false;
  std::unique_lock<std::mutex> turn = stream->enqueueTurn();
  if (!devices_->enqueueP2POnEngine(ops, stream->device()->cudaStream(), status)) return false;
  if (!status->isOk()) recordError(*status);
  return true;
}

bool Communicator::engineTakes(const algo::CollArgs& args, const Stream* stream) const {
  return devices_ && devices_->engine() && stream && stream->device() && devices_->engineTakes(args);
}

bool Communicator::engineTakesP2P(const std::vector<algo::P2POp>& ops, const Stream* stream) const {
  return devices_ && devices_->engine() && stream && stream->device() && devices_->engineTakesP2P(ops);
}

CompletionPtr Communicator::completedWith(Status status) {
  auto done = std::make_shared<Completion>();
  done->complete(std::move(status));
  return done;
}

Status Communicator::asyncError() const {
  if (devices_) {
    // A kernel of the device engine that timed out or stopped at an abort.
    if (Status kernel = devices_->engineError(); !kernel.isOk()) {
      std::lock_guard<std::mutex> lock(errorMu_);
      return asyncError_.isOk() ? kernel : asyncError_;
    }
  }
  std::lock_guard<std::mutex> lock(errorMu_);
  return asyncError_;
}

void Communicator::abort() {
  abort_.store(true);
  {
    std::lock_guard<std::mutex> lock(errorMu_);
    if (asyncError_.isOk()) asyncError_ = makeError(Code::kRemoteError, "communicator of rank %d was aborted", rank_);
  }
  failed_.store(true);
  if (devices_) devices_->abortEngine();
  LOOM_INFO(log_, kSubsysInit, "comm %p rank %d aborted", static_cast<void*>(this), rank_);
  if (diag_) diag_->onAbort();
}

void Communicator::flush() {
  auto marker = std::make_shared<Completion>();
  executor_->submit({[] { return Status::ok(); }, marker}, false);
  executor_->runUntil(marker);
}

void Communicator::setLastError(const std::string& message) {
  std::lock_guard<std::mutex> lock(errorMu_);
  lastError_ = message;
}

std::string Communicator::lastError() const {
  std::lock_guard<std::mutex> lock(errorMu_);
  return lastError_;
}

}  // namespace loom
