#include "src/device/device_engine.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "common/format.h"

namespace loom::cuda {
namespace engine = kernels::cuda::engine;

namespace {

engine::EngineOp engineOpOf(algo::CollType type) {
  switch (type) {
    case algo::CollType::kAllReduce: return engine::EngineOp::kAllReduce;
    case algo::CollType::kBroadcast: return engine::EngineOp::kBroadcast;
    case algo::CollType::kReduce: return engine::EngineOp::kReduce;
    case algo::CollType::kReduceScatter: return engine::EngineOp::kReduceScatter;
    case algo::CollType::kAllGather: return engine::EngineOp::kAllGather;
  }
  return engine::EngineOp::kAllReduce;
}

bool onDevice(const PointerInfo& info, int device) {
  return info.kind == MemoryKind::kDevice && info.device == device;
}

}  // namespace

DeviceEngine::DeviceEngine(const EngineSetup& setup, std::unique_ptr<EngineBackend> backend)
    : rank_(setup.rank), nranks_(setup.nranks), commRank_(setup.rank), commRanks_(setup.nranks),
      members_(setup.members), settings_(setup.settings), backend_(std::move(backend)) {
  if (members_.empty()) {
    for (int r = 0; r < setup.nranks; ++r) members_.push_back(r);
  }
  nranks_ = static_cast<int>(members_.size());
  for (int i = 0; i < nranks_; ++i)
    if (members_[static_cast<size_t>(i)] == setup.rank) rank_ = i;
}

DeviceEngine::~DeviceEngine() {
  if (!backend_) return;
  // Kernels still queued read the connections: let them finish before the
  // memory goes, or, past LOOM_TIMEOUT, stop them at the abort word.
  WaitContext wait;
  wait.deadline = Deadline::after(settings_.timeoutSeconds > 0 ? settings_.timeoutSeconds : 30.0);
  if (!backend_->waitIdle(wait).isOk() && words_) {
    abort();
    wait.deadline = Deadline::after(10.0);
    (void)backend_->waitIdle(wait);
  }
  for (void* peer : mappedPeers_) backend_->unmapPeer(peer);
  if (local_ && !keepMemory_) backend_->freeShared(local_);
  if (scratch_ && !keepMemory_) backend_->freeShared(scratch_);
  for (void* old : outgrown_)
    if (!keepMemory_) backend_->freeShared(old);
}

Result<void*> DeviceEngine::scratch(size_t bytes) {
  if (scratch_ && scratchBytes_ >= bytes) return scratch_;
  // Powers of two from 64 KiB: a loop of growing calls reallocates rarely.
  size_t want = size_t{64} << 10;
  while (want < bytes) want *= 2;
  if (scratch_) outgrown_.push_back(scratch_);
  scratch_ = nullptr;
  scratchBytes_ = 0;
  EngineExport unused;
  auto made = backend_->allocShared(want, &unused);
  LOOM_TRY(made.status().withContext(strprintf("rank %d, device engine scratch of %zu B: ", commRank_, want)));
  scratch_ = made.value();
  scratchBytes_ = want;
  return scratch_;
}

Result<std::unique_ptr<DeviceEngine>> DeviceEngine::create(const EngineSetup& setup,
                                                           std::unique_ptr<EngineBackend> backend,
                                                           std::string* whyNot) {
  const int world = setup.nranks;
  for (int m : setup.members)
    if (m < 0 || m >= world)
      return makeError(Code::kInternalError, "device engine setup on rank %d: member %d out of range", setup.rank, m);
  if (!setup.members.empty() &&
      std::find(setup.members.begin(), setup.members.end(), setup.rank) == setup.members.end())
    return makeError(Code::kInternalError, "device engine setup on rank %d: not among the members", setup.rank);
  std::unique_ptr<DeviceEngine> eng(new DeviceEngine(setup, std::move(backend)));
  const std::vector<int>& members = eng->members_;
  const int n = eng->nranks_;
  const EngineSettings& s = setup.settings;
  eng->layout_ = engine::engineLayout(n, s.channels, s.slots, s.slotBytes, s.llSlotBytes);

  // 1. Allocate and export; a rank that cannot says so in its record. Every
  // rank of the communicator joins each exchange (one engine per host takes
  // the records of its own members only).
  std::vector<DeviceEngine::SetupRecord> records(static_cast<size_t>(world));
  DeviceEngine::SetupRecord& mine = records[static_cast<size_t>(setup.rank)];
  mine.channels = static_cast<uint32_t>(eng->layout_.nchannels);
  std::string localWhy;
  if (!eng->backend_) {
    localWhy = "this rank has no device for the engine";
  } else if (n > engine::kMaxRanks) {
    localWhy = strprintf("%d ranks (the engine runs up to %d on one host)", n, engine::kMaxRanks);
  } else if (eng->layout_.bytes == 0) {
    localWhy = engine::engineLayoutError(n, s.channels, s.slots, s.slotBytes, s.llSlotBytes);
  } else {
    auto base = eng->backend_->allocShared(eng->layout_.bytes, &mine.exported);
    if (base.isOk()) {
      eng->local_ = base.value();
      mine.ready = 1;
    } else {
      localWhy = base.status().message();
    }
  }
  LOOM_TRY(setup.bootstrap->allGather(records.data(), sizeof(DeviceEngine::SetupRecord), setup.wait)
               .withContext(strprintf("device engine setup on rank %d, exchanging connection memory: ", setup.rank)));

  // 2. Verdicts: every member ready, and this rank's device reaches every other member's.
  std::vector<uint8_t> verdicts(static_cast<size_t>(world), 0);
  bool ok = mine.ready != 0;
  for (int r : members) {
    if (!ok) break;
    const DeviceEngine::SetupRecord& rec = records[static_cast<size_t>(r)];
    if (!rec.ready) {
      ok = false;
      if (localWhy.empty()) localWhy = strprintf("rank %d has no connection memory for the engine", r);
      break;
    }
    if (r == setup.rank) continue;
    // Kernels of different processes on one GPU take turns (time slices)
    // unless MPS merges them: peers spinning on each other's flags would
    // crawl from slice to slice. Such ranks stage instead.
    if (mine.exported.busId[0] && std::strncmp(rec.exported.busId, mine.exported.busId, sizeof rec.exported.busId) == 0 &&
        rec.exported.pid != mine.exported.pid) {
      ok = false;
      localWhy = strprintf("rank %d is another process on the same GPU (%.32s): their kernels cannot run at the "
                           "same time",
                           r, mine.exported.busId);
      break;
    }
    auto reach = eng->backend_->reaches(rec.exported);
    ok = reach.isOk() && reach.value();
    if (!ok && localWhy.empty())
      localWhy = reach.isOk() ? strprintf("device %d cannot access rank %d's device", eng->device(), r)
                              : reach.status().message();
  }
  verdicts[static_cast<size_t>(setup.rank)] = ok ? 1 : 0;
  LOOM_TRY(setup.bootstrap->allGather(verdicts.data(), 1, setup.wait)
               .withContext(strprintf("device engine setup on rank %d, exchanging verdicts: ", setup.rank)));
  for (int r : members) {
    if (verdicts[static_cast<size_t>(r)]) continue;
    // This rank's own reason names the rank at fault when it has one.
    if (whyNot) *whyNot = !ok ? localWhy : strprintf("rank %d cannot reach every peer's device", r);
    return std::unique_ptr<DeviceEngine>();
  }

  // Every member allocated for its own channel count: all take the smallest,
  // which fits every allocation (a layout only grows with its channels).
  int channels = eng->layout_.nchannels;
  for (int r : members) channels = std::min(channels, static_cast<int>(records[static_cast<size_t>(r)].channels));
  if (channels != eng->layout_.nchannels) eng->layout_ = engine::engineLayout(n, channels, s.slots, s.slotBytes, s.llSlotBytes);

  // 3. Map the peers and publish this rank's view; then agree once more, so
  // that a rank that failed here leaves no peer using the engine alone.
  std::vector<SetupRecord> memberRecords;
  for (int r : members) memberRecords.push_back(records[static_cast<size_t>(r)]);
  Status prepared = eng->prepare(memberRecords, eng->rank_);
  std::vector<uint8_t> preparedEverywhere(static_cast<size_t>(world), 0);
  preparedEverywhere[static_cast<size_t>(setup.rank)] = prepared.isOk() ? 1 : 0;
  LOOM_TRY(setup.bootstrap->allGather(preparedEverywhere.data(), 1, setup.wait)
               .withContext(strprintf("device engine setup on rank %d, confirming: ", setup.rank)));
  for (int r : members) {
    if (preparedEverywhere[static_cast<size_t>(r)]) continue;
    if (whyNot) *whyNot = !prepared.isOk() ? prepared.message() : strprintf("rank %d could not map its peers", r);
    return std::unique_ptr<DeviceEngine>();
  }
  return eng;
}

Status DeviceEngine::prepare(const std::vector<SetupRecord>& records, int rank) {
  const int n = static_cast<int>(records.size());
  std::vector<void*> bases(static_cast<size_t>(n), nullptr);
  for (int r = 0; r < n; ++r) {
    if (r == rank) {
      bases[static_cast<size_t>(r)] = local_;
      continue;
    }
    auto mapped = backend_->mapPeer(records[static_cast<size_t>(r)].exported);
    LOOM_TRY(mapped.status().withContext(
        strprintf("device engine setup on rank %d, mapping rank %d's connection memory: ", commRank_,
                  members_[static_cast<size_t>(r)])));
    bases[static_cast<size_t>(r)] = mapped.value();
    mappedPeers_.push_back(mapped.value());
  }
  const engine::EngineView view = engine::makeEngineView(layout_, rank, bases.data());
  auto published = backend_->publishView(view);
  LOOM_TRY(published.status().withContext(strprintf("device engine setup on rank %d: ", commRank_)));
  view_ = published.value();
  auto words = backend_->mappedWords(2);
  LOOM_TRY(words.status().withContext(strprintf("device engine setup on rank %d: ", commRank_)));
  words_ = words.value();
  words_[0] = 0;
  words_[1] = 0;
  return Status::ok();
}

bool DeviceEngine::accepts(const algo::CollArgs& args, const PointerInfo& send, const PointerInfo& recv) const {
  return onDevice(send, device()) && onDevice(recv, device());
}

bool DeviceEngine::acceptsP2P(const std::vector<algo::P2POp>& ops, const std::vector<PointerInfo>& kinds) const {
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].peer < 0 || ops[i].peer >= nranks_) return false;
    // An empty transfer may name no buffer at all.
    if (ops[i].bytes > 0 && !onDevice(kinds[i], device())) return false;
  }
  return true;
}

int DeviceEngine::p2pChannels() const {
  // A batch runs one block per transfer and channel: up to 2 x nranks x
  // channels per rank, times the ranks sharing a GPU. Fewer channels keep
  // every rank's blocks resident together (the ranks' choice is the same).
  const int wanted = 16 / (2 * nranks_);
  return wanted < 1 ? 1 : (wanted > layout_.nchannels ? layout_.nchannels : wanted);
}

engine::EngineCall DeviceEngine::baseCall() const {
  engine::EngineCall call{};
  call.abortFlag = words_;
  call.status = words_ + 1;
  call.timeoutNs = settings_.timeoutSeconds > 0 ? static_cast<uint64_t>(settings_.timeoutSeconds * 1e9) : 0;
  return call;
}

void DeviceEngine::choose(algo::CollType coll, engine::EngineCall* call) const {
  const EngineChoiceRules& rules = settings_.rules;
  // Small messages are latency-bound: LL's flagged lines save each step the
  // fence and the counter round trip, at half the bandwidth. Every rank
  // passes the same arguments and rules, so every rank picks the same.
  call->protocol = engine::engineProtocolFor(call->op, call->type, call->count, nranks_);
  const auto other = [](engine::EngineProtocol p) {
    return p == engine::EngineProtocol::kLL ? engine::EngineProtocol::kSimple : engine::EngineProtocol::kLL;
  };
  const bool llRuns = call->op != engine::EngineOp::kSendRecv && call->op != engine::EngineOp::kAllToAll;
  if (!rules.allows(coll, call->protocol) && rules.allows(coll, other(call->protocol)) &&
      (llRuns || other(call->protocol) == engine::EngineProtocol::kSimple))
    call->protocol = other(call->protocol);
  call->algorithm = engine::engineAlgorithmFor(call->op, call->protocol, nranks_);
  if (call->op == engine::EngineOp::kAllReduce) {
    const auto alternative = call->algorithm == engine::EngineAlgorithm::kTree ? engine::EngineAlgorithm::kRing
                                                                               : engine::EngineAlgorithm::kTree;
    if (!rules.allows(coll, call->algorithm) && rules.allows(coll, alternative)) call->algorithm = alternative;
  }
}

std::string DeviceEngine::lastChoice() const {
  const int last = lastChoice_.load(std::memory_order_relaxed);
  if (last == kNoChoice) return "";
  if (last == kCopyChoice) return "copy";
  if (last == kP2PChoice) return "p2p/Simple";
  return strprintf("%s/%s", engine::engineAlgorithmName(static_cast<engine::EngineAlgorithm>(last / 16)),
                   engine::engineProtocolName(static_cast<engine::EngineProtocol>(last % 16)));
}

Status DeviceEngine::enqueue(const algo::CollArgs& args, void* stream) {
  if (nranks_ == 1) {
    lastChoice_.store(kCopyChoice, std::memory_order_relaxed);
    // Every collective of one rank is its input: in place nothing, else one copy.
    LOOM_TRY(kernelError());
    const size_t bytes = args.count * dataTypeSize(args.dtype);
    if (args.sendbuf == args.recvbuf || bytes == 0) return Status::ok();
    return backend_->copy(args.recvbuf, args.sendbuf, bytes, stream)
        .withContext(strprintf("%s on rank %d: ", algo::collTypeName(args.type), commRank_));
  }
  engine::EngineCall call = baseCall();
  call.op = engineOpOf(args.type);
  call.type = args.dtype;
  call.redOp = args.op == RedOp::kAvg ? RedOp::kSum : args.op;
  call.post = args.op == RedOp::kAvg ? kernels::cuda::PostOp::kDivideByRanks : kernels::cuda::PostOp::kNone;
  call.send = args.sendbuf;
  call.recv = args.recvbuf;
  call.count = args.count;
  call.root = args.root;
  choose(args.type, &call);
  call.channels = engine::engineChannelsFor(call.op, call.type, call.count, nranks_, call.protocol, layout_.nchannels);
  lastChoice_.store(static_cast<int>(call.algorithm) * 16 + static_cast<int>(call.protocol),
                    std::memory_order_relaxed);
  return launch(call, stream, algo::collTypeName(args.type));
}

Status DeviceEngine::enqueueP2P(const std::vector<algo::P2POp>& ops, void* stream) {
  lastChoice_.store(nranks_ == 1 ? kCopyChoice : kP2PChoice, std::memory_order_relaxed);
  if (nranks_ == 1) {
    // Sends to itself meet its receives in order, as the host path pairs them.
    std::vector<const algo::P2POp*> sends, recvs;
    for (const algo::P2POp& op : ops) (op.kind == algo::P2POp::kSend ? sends : recvs).push_back(&op);
    if (sends.size() != recvs.size())
      return makeError(Code::kInvalidUsage, "send/recv on rank 0 of 1: %zu sends to itself but %zu receives",
                       sends.size(), recvs.size());
    for (size_t i = 0; i < sends.size(); ++i) {
      if (sends[i]->bytes != recvs[i]->bytes)
        return makeError(Code::kInvalidUsage, "send/recv on rank 0 of 1: a send of %zu bytes meets a receive of %zu",
                         sends[i]->bytes, recvs[i]->bytes);
      if (sends[i]->bytes && sends[i]->src != recvs[i]->dst)
        LOOM_TRY(backend_->copy(recvs[i]->dst, sends[i]->src, sends[i]->bytes, stream));
    }
    return Status::ok();
  }
  // The kernel reads a send while it writes the receives, with no order
  // between the two: a send whose bytes a receive of the batch overwrites
  // (an in-place all-to-all or sendrecv) goes from a copy in scratch, made
  // on the stream before the kernel.
  std::vector<algo::P2POp> batch;
  LOOM_TRY(copyOverwrittenSends(ops, stream, &batch));
  // The kernel moves at most one send and one recv per peer. A batch with
  // more runs as rounds: round k holds each peer's k-th send and k-th recv,
  // which meet the peer's round k (both sides count per peer alike), and
  // round k+1 follows on the stream once round k is done everywhere.
  std::vector<engine::EngineCall> rounds;
  std::vector<int> sendsTo(static_cast<size_t>(nranks_), 0), recvsFrom(static_cast<size_t>(nranks_), 0);
  for (const algo::P2POp& op : batch) {
    const bool isSend = op.kind == algo::P2POp::kSend;
    int& seen = (isSend ? sendsTo : recvsFrom)[static_cast<size_t>(op.peer)];
    const size_t round = static_cast<size_t>(seen++);
    while (rounds.size() <= round) {
      rounds.push_back(baseCall());
      rounds.back().op = engine::EngineOp::kSendRecv;
      rounds.back().type = DataType::kUint8;
      rounds.back().channels = p2pChannels();
    }
    engine::EngineCall& call = rounds[round];
    if (isSend) {
      call.sendPeer[call.nsends] = op.peer;
      call.sendBuf[call.nsends] = op.src;
      call.sendBytes[call.nsends] = op.bytes;
      ++call.nsends;
    } else {
      call.recvPeer[call.nrecvs] = op.peer;
      call.recvBuf[call.nrecvs] = op.dst;
      call.recvBytes[call.nrecvs] = op.bytes;
      ++call.nrecvs;
    }
  }
  for (const engine::EngineCall& call : rounds) LOOM_TRY(launch(call, stream, "send/recv"));
  return Status::ok();
}

Status DeviceEngine::copyOverwrittenSends(const std::vector<algo::P2POp>& ops, void* stream,
                                          std::vector<algo::P2POp>* batch) {
  *batch = ops;
  const auto overlaps = [](const void* a, size_t aBytes, const void* b, size_t bBytes) {
    const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
    return aBytes && bBytes && x < y + bBytes && y < x + aBytes;
  };
  const auto aligned = [](size_t bytes) { return (bytes + 255) / 256 * 256; };
  std::vector<size_t> moved;
  size_t bytes = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    const algo::P2POp& send = ops[i];
    if (send.kind != algo::P2POp::kSend || send.bytes == 0) continue;
    for (const algo::P2POp& recv : ops)
      if (recv.kind == algo::P2POp::kRecv && overlaps(send.src, send.bytes, recv.dst, recv.bytes)) {
        moved.push_back(i);
        bytes += aligned(send.bytes);
        break;
      }
  }
  if (moved.empty()) return Status::ok();
  auto room = scratch(bytes);
  LOOM_TRY(room.status());
  auto* at = static_cast<unsigned char*>(room.value());
  for (size_t i : moved) {
    algo::P2POp& send = (*batch)[i];
    LOOM_TRY(backend_->copy(at, send.src, send.bytes, stream)
                 .withContext(strprintf("send/recv on rank %d, copying a send its receives overwrite: ", commRank_)));
    send.src = at;
    at += aligned(send.bytes);
  }
  return Status::ok();
}

Status DeviceEngine::launch(const engine::EngineCall& call, void* stream, const char* what) {
  LOOM_TRY(kernelError());
  if (const char* why = engine::engineCallError(call, nranks_, rank_))
    return makeError(Code::kInvalidArgument, "%s on rank %d: %s", what, commRank_, why);
  return backend_->launch(view_, layout_, call, stream)
      .withContext(strprintf("%s on rank %d, launching the device engine: ", what, commRank_));
}

Status DeviceEngine::kernelError() const {
  const uint32_t status = __atomic_load_n(&words_[1], __ATOMIC_ACQUIRE);
  if (status == static_cast<uint32_t>(engine::EngineStatus::kOk)) return Status::ok();
  if (status == static_cast<uint32_t>(engine::EngineStatus::kAborted))
    return makeError(Code::kRemoteError, "rank %d: the device engine was aborted", commRank_);
  if (status == static_cast<uint32_t>(engine::EngineStatus::kTimedOut))
    return makeError(Code::kTimeout,
                     "rank %d: a device engine kernel waited longer than LOOM_TIMEOUT (%.0f s) for a peer; "
                     "every rank must make the same calls, in the same order, on device buffers",
                     commRank_, settings_.timeoutSeconds);
  return makeError(Code::kInternalError, "rank %d: the device engine kernel reported status %u", commRank_, status);
}

void DeviceEngine::abort() {
  if (words_) __atomic_store_n(&words_[0], 1u, __ATOMIC_RELEASE);
}

}  // namespace loom::cuda
