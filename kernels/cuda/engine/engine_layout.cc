// Engine layout, views and call validation (engine_layout.h).
#include "kernels/cuda/engine/engine_layout.h"

#include <cstdint>

#include "common/tree_schedule.h"

namespace loom::kernels::cuda::engine {
namespace {

size_t roundUp(size_t x, size_t to) { return (x + to - 1) / to * to; }

size_t fifoIndex(int channel, int peer, int nranks) {
  return static_cast<size_t>(channel) * static_cast<size_t>(nranks) + static_cast<size_t>(peer);
}

size_t connectionIndex(int channel, int peer) {
  return static_cast<size_t>(channel) * kMaxRanks + static_cast<size_t>(peer);
}

uint64_t* counterAt(void* base, size_t offset, int channel, int peer) {
  return reinterpret_cast<uint64_t*>(static_cast<unsigned char*>(base) + offset +
                                     connectionIndex(channel, peer) * kCounterStride);
}

bool isReduction(EngineOp op) {
  return op == EngineOp::kAllReduce || op == EngineOp::kReduceScatter || op == EngineOp::kReduce;
}

bool aligned(const void* p, size_t to) { return reinterpret_cast<uintptr_t>(p) % to == 0; }

}  // namespace

const char* engineLayoutError(int nranks, int nchannels, int slots, size_t slotBytes, size_t llSlotBytes) {
  if (nranks < 1 || nranks > kMaxRanks) return "engine layout: nranks out of range [1, 8]";
  if (nchannels < 1 || nchannels > kMaxChannels) return "engine layout: nchannels out of range [1, 32]";
  // A ring step receives and sends at once; with one slot every rank would
  // wait for its successor to free the slot it is itself waiting to fill.
  if (slots < 2) return "engine layout: slots must be at least 2";
  if (slotBytes < 1 || slotBytes > (size_t{1} << 30)) return "engine layout: slotBytes out of range [1, 1 GiB]";
  if (llSlotBytes < 1 || llSlotBytes > (size_t{1} << 24)) return "engine layout: llSlotBytes out of range [1, 16 MiB]";
  return nullptr;
}

EngineLayout engineLayout(int nranks, int nchannels, int slots, size_t slotBytes, size_t llSlotBytes) {
  EngineLayout l;
  if (engineLayoutError(nranks, nchannels, slots, slotBytes, llSlotBytes)) return l;
  l.nranks = nranks;
  l.nchannels = nchannels;
  l.slots = slots;
  l.slotBytes = roundUp(slotBytes, kSlotAlignment);
  l.llSlotBytes = roundUp(llSlotBytes, kLLSlotAlignment);
  // Counters are indexed [channel][peer] over kMaxRanks peers (a few KiB);
  // FIFOs, the bulk of the memory, over the nchannels x nranks in use.
  const size_t connections = static_cast<size_t>(kMaxChannels) * kMaxRanks;
  const size_t fifoBytes = static_cast<size_t>(slots) * l.slotBytes;
  const size_t counters = connections * kCounterStride;
  l.fifoOffset = 0;
  l.tailOffset = roundUp(static_cast<size_t>(nchannels) * static_cast<size_t>(nranks) * fifoBytes, kCounterStride);
  l.headOffset = l.tailOffset + counters;
  l.sendStepOffset = l.headOffset + counters;
  l.recvStepOffset = l.sendStepOffset + counters;
  l.llOffset = l.recvStepOffset + counters;
  const size_t llBytes = static_cast<size_t>(slots) * l.llSlotBytes;
  l.llHeadOffset = roundUp(l.llOffset + static_cast<size_t>(nchannels) * static_cast<size_t>(nranks) * llBytes,
                           kCounterStride);
  l.llSendStepOffset = l.llHeadOffset + counters;
  l.llRecvStepOffset = l.llSendStepOffset + counters;
  l.bytes = l.llRecvStepOffset + counters;
  return l;
}

EngineView makeEngineView(const EngineLayout& layout, int rank, void* const* bases) {
  EngineView v;
  v.rank = rank;
  v.nranks = layout.nranks;
  v.nchannels = layout.nchannels;
  v.slots = layout.slots;
  v.slotBytes = layout.slotBytes;
  v.llSlotBytes = layout.llSlotBytes;
  const size_t fifoBytes = static_cast<size_t>(layout.slots) * layout.slotBytes;
  const size_t llBytes = static_cast<size_t>(layout.slots) * layout.llSlotBytes;
  auto llLinesAt = [&](void* base, int channel, int sender) {
    return reinterpret_cast<uint64_t*>(static_cast<unsigned char*>(base) + layout.llOffset +
                                       fifoIndex(channel, sender, layout.nranks) * llBytes);
  };
  void* own = bases[rank];
  for (int c = 0; c < layout.nchannels; ++c) {
    for (int peer = 0; peer < layout.nranks; ++peer) {
      // This rank -> peer: the FIFO and tail of `peer`'s side, indexed by us as sender.
      EngineSendConnection& s = v.send[c][peer];
      s.fifo = static_cast<unsigned char*>(bases[peer]) + layout.fifoOffset + fifoIndex(c, rank, layout.nranks) * fifoBytes;
      s.tail = counterAt(bases[peer], layout.tailOffset, c, rank);
      s.head = counterAt(own, layout.headOffset, c, peer);
      s.step = counterAt(own, layout.sendStepOffset, c, peer);
      s.llLines = llLinesAt(bases[peer], c, rank);
      s.llHead = counterAt(own, layout.llHeadOffset, c, peer);
      s.llStep = counterAt(own, layout.llSendStepOffset, c, peer);
      // peer -> this rank.
      EngineRecvConnection& r = v.recv[c][peer];
      r.fifo = static_cast<unsigned char*>(own) + layout.fifoOffset + fifoIndex(c, peer, layout.nranks) * fifoBytes;
      r.tail = counterAt(own, layout.tailOffset, c, peer);
      r.head = counterAt(bases[peer], layout.headOffset, c, rank);
      r.step = counterAt(own, layout.recvStepOffset, c, peer);
      r.llLines = llLinesAt(own, c, peer);
      r.llHead = counterAt(bases[peer], layout.llHeadOffset, c, rank);
      r.llStep = counterAt(own, layout.llRecvStepOffset, c, peer);
    }
  }
  return v;
}

const char* engineOpName(EngineOp op) {
  switch (op) {
    case EngineOp::kAllReduce: return "all-reduce";
    case EngineOp::kReduceScatter: return "reduce-scatter";
    case EngineOp::kAllGather: return "all-gather";
    case EngineOp::kBroadcast: return "broadcast";
    case EngineOp::kReduce: return "reduce";
    case EngineOp::kAllToAll: return "all-to-all";
    case EngineOp::kSendRecv: return "send/recv";
  }
  return "?";
}

const char* engineProtocolName(EngineProtocol protocol) {
  switch (protocol) {
    case EngineProtocol::kSimple: return "Simple";
    case EngineProtocol::kLL: return "LL";
  }
  return "?";
}

EngineProtocol engineProtocolFor(EngineOp op, DataType type, size_t count, int nranks) {
  if (op == EngineOp::kSendRecv || op == EngineOp::kAllToAll || !isValidDataType(static_cast<int>(type)) ||
      nranks < 1)
    return EngineProtocol::kSimple;
  const size_t elem = dataTypeSize(type);
  if (count > kLLMaxBytes / elem) return EngineProtocol::kSimple;
  const size_t perRank = count * elem;
  const bool spansRanks = op == EngineOp::kAllGather || op == EngineOp::kReduceScatter;
  const size_t largest = spansRanks ? perRank * static_cast<size_t>(nranks) : perRank;
  return largest <= kLLMaxBytes ? EngineProtocol::kLL : EngineProtocol::kSimple;
}

int engineChannelsFor(EngineOp op, DataType type, size_t count, int nranks, EngineProtocol protocol, int maxChannels) {
  const int floor = kLLChannels < maxChannels ? kLLChannels : maxChannels;
  if (protocol == EngineProtocol::kLL || !isValidDataType(static_cast<int>(type)) || nranks < 1) return floor;
  const bool spansRanks = op == EngineOp::kAllGather || op == EngineOp::kReduceScatter;
  const size_t perRank = count * dataTypeSize(type);
  const size_t largest = spansRanks ? perRank * static_cast<size_t>(nranks) : perRank;
  const size_t wanted = largest / kBytesPerChannel;
  if (wanted <= static_cast<size_t>(floor)) return floor;
  return wanted >= static_cast<size_t>(maxChannels) ? maxChannels : static_cast<int>(wanted);
}

const char* engineAlgorithmName(EngineAlgorithm algorithm) {
  switch (algorithm) {
    case EngineAlgorithm::kRing: return "ring";
    case EngineAlgorithm::kTree: return "tree";
  }
  return "?";
}

EngineAlgorithm engineAlgorithmFor(EngineOp op, EngineProtocol protocol, int nranks) {
  if (op != EngineOp::kAllReduce || protocol != EngineProtocol::kLL) return EngineAlgorithm::kRing;
  return 2 * tree::depthOf(nranks) + 2 < 2 * (nranks - 1) ? EngineAlgorithm::kTree : EngineAlgorithm::kRing;
}

const char* engineStatusName(EngineStatus status) {
  switch (status) {
    case EngineStatus::kOk: return "ok";
    case EngineStatus::kAborted: return "aborted";
    case EngineStatus::kTimedOut: return "timed out";
    case EngineStatus::kInvalidCall: return "invalid call";
  }
  return "?";
}

const char* engineCallError(const EngineCall& call, int nranks, int rank) {
  if (nranks < 1 || nranks > kMaxRanks) return "nranks out of range [1, 8]";
  if (static_cast<int>(call.op) > static_cast<int>(EngineOp::kSendRecv)) return "op is not an EngineOp";
  if (call.channels < 0 || call.channels > kMaxChannels) return "channels out of range [0, 32]";
  if (static_cast<int>(call.protocol) > static_cast<int>(EngineProtocol::kLL)) return "protocol is not an EngineProtocol";
  if (call.protocol == EngineProtocol::kLL && (call.op == EngineOp::kSendRecv || call.op == EngineOp::kAllToAll))
    return "protocol LL runs the ring collectives only (send/recv and all-to-all run Simple)";
  if (static_cast<int>(call.algorithm) > static_cast<int>(EngineAlgorithm::kTree))
    return "algorithm is not an EngineAlgorithm";
  if (call.algorithm == EngineAlgorithm::kTree && call.op != EngineOp::kAllReduce)
    return "algorithm tree runs all-reduce only";
  if (call.op == EngineOp::kSendRecv) {
    if (call.nsends < 0 || call.nsends > kMaxRanks) return "nsends out of range [0, 8]";
    if (call.nrecvs < 0 || call.nrecvs > kMaxRanks) return "nrecvs out of range [0, 8]";
    for (int i = 0; i < call.nsends; ++i) {
      if (call.sendPeer[i] < 0 || call.sendPeer[i] >= nranks) return "sendPeer out of range [0, nranks)";
      if (call.sendBytes[i] > 0 && !call.sendBuf[i]) return "sendBuf is null with sendBytes > 0";
      for (int j = 0; j < i; ++j)
        if (call.sendPeer[j] == call.sendPeer[i]) return "two sends to the same peer in one batch";
    }
    for (int i = 0; i < call.nrecvs; ++i) {
      if (call.recvPeer[i] < 0 || call.recvPeer[i] >= nranks) return "recvPeer out of range [0, nranks)";
      if (call.recvBytes[i] > 0 && !call.recvBuf[i]) return "recvBuf is null with recvBytes > 0";
      for (int j = 0; j < i; ++j)
        if (call.recvPeer[j] == call.recvPeer[i]) return "two recvs from the same peer in one batch";
    }
    return nullptr;
  }
  if (!isValidDataType(static_cast<int>(call.type))) return "type is not a DataType";
  if (!isValidRedOp(static_cast<int>(call.redOp))) return "redOp is not a RedOp";
  if (static_cast<int>(call.post) > static_cast<int>(PostOp::kMultiplyByScalar)) return "post is not a PostOp";
  if (call.redOp == RedOp::kAvg && call.post == PostOp::kMultiplyByScalar)
    return "redOp kAvg divides by nranks; post kMultiplyByScalar cannot be combined with it";
  if (call.op == EngineOp::kBroadcast || call.op == EngineOp::kReduce) {
    if (call.root < 0 || call.root >= nranks) return "root out of range [0, nranks)";
  }
  if (call.count == 0) return nullptr;
  if (call.count > (SIZE_MAX / 8) / static_cast<size_t>(kMaxRanks)) return "count too large";
  // Which buffers this rank uses (NCCL: broadcast reads send only at the
  // root, reduce writes recv only there; with rank -1 only the others).
  const bool isRoot = rank == call.root;
  const bool needsSend = call.op != EngineOp::kBroadcast || isRoot;
  const bool needsRecv = call.op != EngineOp::kReduce || isRoot;
  if (needsSend && !call.send) return "send buffer is null with count > 0";
  if (needsRecv && !call.recv) return "recv buffer is null with count > 0";
  const size_t elem = dataTypeSize(call.type);
  if (isReduction(call.op) && ((call.send && !aligned(call.send, elem)) || (call.recv && !aligned(call.recv, elem))))
    return "send/recv buffer not aligned to the element size";
  if (call.op == EngineOp::kAllToAll && nranks > 1 && call.send == call.recv)
    return "all-to-all cannot run in place";
  return nullptr;
}

int engineBlocks(const EngineCall& call, int nranks, int channels) {
  switch (call.op) {
    case EngineOp::kSendRecv: return (call.nsends + call.nrecvs) * channels;
    case EngineOp::kAllToAll: return call.count == 0 ? 0 : 2 * nranks * channels;
    default: return call.count == 0 ? 0 : channels;
  }
}

}  // namespace loom::kernels::cuda::engine
