// Communicator members for what is not a collective of the algorithm
// registry: fused send/recv operations (loomSend/loomRecv, loomAllToAll), the
// barrier and MPI-style splitting. They run through the same OpRunner as the
// collectives (stream order, sticky errors, diagnostics), but bring their own
// body instead of the selector's algorithm.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "algorithms/barrier.h"
#include "src/comm/comm.h"
#include "src/comm/stream.h"
#include "src/device/comm_devices.h"
#include "common/format.h"

namespace loom {
namespace {

bool overlaps(const void* a, size_t aBytes, const void* b, size_t bBytes) {
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return aBytes && bBytes && x < y + bBytes && y < x + aBytes;
}

}  // namespace

Status Communicator::validateP2P(const char* call, const char* bufName, const void* buf, size_t count,
                                 DataType dtype, int peer) const {
  LOOM_ENFORCE(isValidDataType(static_cast<int>(dtype)), Code::kInvalidArgument,
               "%s on rank %d: invalid datatype %d (valid: 0..%d)", call, rank_, static_cast<int>(dtype),
               kNumDataTypes - 1);
  LOOM_ENFORCE(peer >= 0 && peer < nranks_, Code::kInvalidArgument, "%s on rank %d: peer %d out of range [0, %d)",
               call, rank_, peer, nranks_);
  LOOM_ENFORCE(count <= SIZE_MAX / dataTypeSize(dtype), Code::kInvalidArgument,
               "%s on rank %d: count %zu of %s overflows the address space", call, rank_, count, dataTypeName(dtype));
  LOOM_ENFORCE(count == 0 || buf != nullptr, Code::kInvalidArgument, "%s on rank %d: %s is NULL with count %zu", call,
               rank_, bufName, count);
  return Status::ok();
}

Status Communicator::validateAllToAll(const void* sendbuf, const void* recvbuf, size_t count, DataType dtype) const {
  const char* call = "loomAllToAll";
  LOOM_ENFORCE(isValidDataType(static_cast<int>(dtype)), Code::kInvalidArgument,
               "%s on rank %d: invalid datatype %d (valid: 0..%d)", call, rank_, static_cast<int>(dtype),
               kNumDataTypes - 1);
  const size_t es = dataTypeSize(dtype);
  LOOM_ENFORCE(count <= SIZE_MAX / es / static_cast<size_t>(nranks_), Code::kInvalidArgument,
               "%s on rank %d: count %zu x %d ranks of %s overflows the address space", call, rank_, count, nranks_,
               dataTypeName(dtype));
  if (count == 0) return Status::ok();
  LOOM_ENFORCE(sendbuf, Code::kInvalidArgument, "%s on rank %d: sendbuff is NULL with count %zu", call, rank_, count);
  LOOM_ENFORCE(recvbuf, Code::kInvalidArgument, "%s on rank %d: recvbuff is NULL with count %zu", call, rank_, count);
  const size_t bytes = count * es * static_cast<size_t>(nranks_);
  LOOM_ENFORCE(sendbuf == recvbuf || !overlaps(sendbuf, bytes, recvbuf, bytes), Code::kInvalidArgument,
               "%s on rank %d: sendbuff and recvbuff overlap without being equal (in place)", call, rank_);
  return Status::ok();
}

std::vector<algo::P2POp> Communicator::allToAllOps(const void* sendbuf, void* recvbuf, size_t count,
                                                   DataType dtype) const {
  const size_t block = count * dataTypeSize(dtype);
  const auto* in = static_cast<const std::byte*>(sendbuf);
  auto* out = static_cast<std::byte*>(recvbuf);
  std::vector<algo::P2POp> ops;
  ops.reserve(2 * static_cast<size_t>(nranks_));
  // Peers in staggered order (rank+i, rank-i): all ops progress together
  // anyway, but the first chunks then spread over every peer's FIFO.
  for (int i = 0; i < nranks_; ++i) {
    const int to = (rank_ + i) % nranks_;
    const int from = (rank_ - i + nranks_) % nranks_;
    ops.push_back(algo::P2POp::send(to, count ? in + static_cast<size_t>(to) * block : nullptr, block));
    ops.push_back(algo::P2POp::recv(from, count ? out + static_cast<size_t>(from) * block : nullptr, block));
  }
  return ops;
}

namespace {

std::string describeP2P(const std::vector<algo::P2POp>& ops) {
  if (ops.size() == 1)
    return strprintf("%s of %zu bytes %s peer %d", ops[0].kind == algo::P2POp::kSend ? "send" : "recv", ops[0].bytes,
                     ops[0].kind == algo::P2POp::kSend ? "to" : "from", ops[0].peer);
  return strprintf("fused send/recv of %zu operations", ops.size());
}

// What the flight recorder and LOOM_CHECK see of a fused operation.
OpDescriptor p2pDescriptor(const std::vector<algo::P2POp>& ops, const OpDescriptor* collective) {
  if (collective) return *collective;
  uint64_t bytes = 0;
  for (const auto& op : ops) bytes += op.bytes;
  return OpDescriptor::sendRecv(bytes);
}

}  // namespace

OpWork Communicator::p2pWork(std::vector<algo::P2POp> ops, const OpDescriptor* collective) {
  OpWork work;
  work.what = describeP2P(ops);
  work.op = p2pDescriptor(ops, collective);
  work.algorithm = "p2p";
  work.run = [this, ops = std::move(ops)](const algo::AlgoContext& ctx) { return runP2POps(ops, ctx); };
  return work;
}

CompletionPtr Communicator::enqueueP2PAsync(std::vector<algo::P2POp> ops, Stream* stream,
                                            const OpDescriptor* collective) {
  if (Status engine; enqueueP2POnEngine(ops, stream, &engine)) return completedWith(std::move(engine));
  return runner_.enqueueAsync(p2pWork(std::move(ops), collective), stream);
}

Status Communicator::enqueueP2P(std::vector<algo::P2POp> ops, Stream* stream, const OpDescriptor* collective) {
  if (Status engine; stream && enqueueP2POnEngine(ops, stream, &engine)) return engine;
  OpWork work = p2pWork(std::move(ops), collective);
  if (!stream) return runner_.runBlocking(work);
  stream->waitForRoom();
  (void)runner_.enqueueAsync(std::move(work), stream);
  return Status::ok();
}

Status Communicator::runP2POps(const std::vector<algo::P2POp>& ops, const algo::AlgoContext& ctx) {
  if (devices_) {
    // Device buffers are staged through pinned host memory around the fused
    // operation, or, across hosts, only for the pairs on different hosts.
    bool handled = false;
    Status s = devices_->runP2P(
        ops, ctx.wait, [&](const std::vector<algo::P2POp>& host) { return algo::runP2P(host, ctx); }, &handled);
    // Same-host pairs in the host's engine, the others staged (across hosts).
    if (handled && devices_->lastPath() == cuda::DataPath::kEngineAcrossHosts)
      lastAlgorithm_.store(kEngineAcrossHostsRecord, std::memory_order_relaxed);
    if (handled || !s.isOk()) return s;
  }
  return algo::runP2P(ops, ctx);
}

namespace {

OpWork barrierWork() { return {"barrier", OpDescriptor::barrier(), "dissemination", algo::disseminationBarrier}; }

}  // namespace

CompletionPtr Communicator::enqueueBarrierAsync(Stream* stream) { return runner_.enqueueAsync(barrierWork(), stream); }

Status Communicator::enqueueBarrier(Stream* stream) {
  if (!stream) return runner_.runBlocking(barrierWork());
  stream->waitForRoom();
  (void)runner_.enqueueAsync(barrierWork(), stream);
  return Status::ok();
}

Result<std::unique_ptr<Communicator>> Communicator::split(int color, int key) {
  const std::string where = strprintf("loomCommSplit on rank %d (color %d, key %d): ", rank_, color, key);
  flush();  // queued work on this communicator first, as MPI requires
  if (abort_.load()) return makeError(Code::kRemoteError, "%scommunicator was aborted", where.c_str());
  if (failed_.load()) return asyncError().withContext(where);
  if (color < 0) color = -1;  // every negative color means "no new communicator"

  // 1. Everyone learns everyone's (color, key).
  struct Choice {
    int32_t color;
    int32_t key;
  };
  std::vector<Choice> choices(static_cast<size_t>(nranks_));
  choices[static_cast<size_t>(rank_)] = {color, key};
  LOOM_TRY(bootstrap_->allGather(choices.data(), sizeof(Choice), makeWait()).withContext(where + "exchanging colors: "));

  // Members of my color, ordered by (key, parent rank); the lowest parent rank leads.
  std::vector<int> members;
  for (int r = 0; r < nranks_; ++r)
    if (choices[static_cast<size_t>(r)].color == color) members.push_back(r);
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
    return choices[static_cast<size_t>(a)].key < choices[static_cast<size_t>(b)].key;
  });
  const int leader = *std::min_element(members.begin(), members.end());

  // 2. Each color's leader starts a bootstrap root for the new communicator;
  // its id travels to the members through this communicator's bootstrap. The
  // root thread ends by itself once every member has joined (or on timeout).
  struct IdSlot {
    int32_t state;  // 0: not a leader, 1: id valid, 2: the leader could not start a root
    char id[bootstrap::kUniqueIdBytes];
  };
  std::vector<IdSlot> ids(static_cast<size_t>(nranks_));
  IdSlot& mine = ids[static_cast<size_t>(rank_)];
  std::memset(&mine, 0, sizeof mine);
  std::string rootError;
  if (color >= 0 && leader == rank_) {
    // Loopback when every member shares this host; otherwise an address the
    // other hosts can reach.
    bool oneHost = true;
    for (int r : members) oneHost = oneHost && peers_[static_cast<size_t>(r)].hostHash == peers_[static_cast<size_t>(rank_)].hostHash;
    auto id = bootstrap::startRoot(oneHost ? "127.0.0.1" : "", 0, bootstrap::randomSecret(), config_.timeoutSeconds,
                                   log_);
    if (id.isOk()) {
      id.value().serialize(mine.id);
      mine.state = 1;
    } else {
      mine.state = 2;
      rootError = id.status().message();
    }
  }
  LOOM_TRY(bootstrap_->allGather(ids.data(), sizeof(IdSlot), makeWait()).withContext(where + "exchanging ids: "));
  if (color < 0) return std::unique_ptr<Communicator>();
  const IdSlot& leaderSlot = ids[static_cast<size_t>(leader)];
  if (leaderSlot.state != 1)
    return makeError(Code::kSystemError, "%srank %d could not start the bootstrap root of color %d%s%s", where.c_str(),
                     leader, color, rootError.empty() ? "" : ": ", rootError.c_str());
  auto id = bootstrap::UniqueId::parse(leaderSlot.id);
  if (!id.isOk()) return id.status().withContext(where + "id from rank " + std::to_string(leader) + ": ");

  // 3. Every member joins the new communicator.
  const int newRank = static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
  LOOM_INFO(log_, kSubsysInit, "split: rank %d color %d key %d -> rank %d of %zu", rank_, color, key, newRank,
            members.size());
  // The child keeps this communicator's deadline and a chunk size that was
  // asked for (loomCommInitRankConfig or LOOM_CHUNK_SIZE), as NCCL's split
  // inherits the parent's config. A chunk a backend chose by itself (TCP's
  // 2 MiB) is not passed on: the child's own backends choose again.
  Overrides inherited;
  inherited.timeoutSeconds = config_.timeoutSeconds;
  inherited.chunkBytes = config_.chunkBytesSet ? config_.chunkBytes : 0;
  auto created = Communicator::create(id.value(), static_cast<int>(members.size()), newRank, inherited);
  if (!created.isOk()) return created.status().withContext(where);
  return std::move(created).value();
}

}  // namespace loom
