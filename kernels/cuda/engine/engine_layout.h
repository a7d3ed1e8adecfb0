// The device engine's plain data: where each rank's connection memory lies,
// the view one rank's kernel reads, and one collective call as the kernel
// receives it. No CUDA types, so the host integration (src/device), the host
// emulation and the CUDA launcher share it.
//
// Connections ("Simple" protocol, one per channel and ordered pair sender ->
// receiver, a rank's pair with itself included so that a rank can send to
// itself): a FIFO of `slots` slots of `slotBytes` and a `tail` counter (slots
// filled) in the RECEIVER's allocation, written by the sender; a `head`
// counter (slots freed) in the SENDER's allocation, written by the receiver.
// Counters are monotonic and persist across calls; each side also keeps its
// own count of slots it has moved in its own allocation (`step`), read at the
// start of a kernel and written back at its end, so a launch carries no
// host-computed sequence number and a launch captured in a CUDA graph replays
// correctly. Every rank must make the same calls in the same order (as NCCL
// requires): both ends of a connection derive their steps from the call.
// After a call that reported kAborted or kTimedOut the counters no longer
// agree: the engine's memory must be zero-filled again (or the communicator
// torn down) before the next call.
//
// Connections ("LL", low latency, for small messages): beside each FIFO a
// ring of `slots` LL slots of `llSlotBytes` in the receiver's allocation.
// An LL slot is 8-byte lines, each 4 bytes of data and a 4-byte flag
// written by ONE 8-byte store, so the receiver polls the lines themselves:
// no fence and no tail counter. The flag of LL step s is (uint32_t)(s + 1),
// s from a persistent LL step counter of each side (`llStep`), so no launch
// carries a host-computed value. Flow control is an `llHead` counter (LL
// slots freed) in the sender's allocation, as for Simple. Old lines can
// never pass for new ones: a line of slot k last written at step s' is read
// at step s only with s' < s, s' = s (mod slots), and every slot is written
// whole (all its lines) once per kLLRefreshSteps steps, so s - s' stays far
// below 2^32 and the two flags differ.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "common/host_device.h"
#include "common/types.h"
#include "kernels/cuda/reduce_copy_args.h"

namespace loom::kernels::cuda::engine {

constexpr int kMaxRanks = 8;     // ranks of one host
constexpr int kMaxChannels = 32;  // independent slices, one thread block each per rank
// Counters each get a line of their own: a writer on one GPU never shares a
// line with a reader polling another counter.
constexpr size_t kCounterStride = 128;
// FIFO slots are 16-byte multiples so that 16-byte vectors never straddle them.
constexpr size_t kSlotAlignment = 16;
// LL slots are multiples of 32 bytes: 16 bytes of data, so LL chunks keep
// the ring's 16-byte granule.
constexpr size_t kLLSlotAlignment = 32;
constexpr size_t kLLLineBytes = 8;      // 4 bytes of data + a 4-byte flag
constexpr size_t kLLLineDataBytes = 4;
// An LL send step whose step counter is below a multiple of this (one step
// per slot of every period) writes every line of its slot, so that no line
// keeps a flag for 2^32 steps (see above).
constexpr uint64_t kLLRefreshSteps = uint64_t{1} << 24;
constexpr size_t kDefaultLLSlotBytes = 256;

// Bytes one rank allocates (device memory, zero-filled by the caller) for its
// side of every connection, and where each part lies in it.
struct EngineLayout {
  int nranks = 0;
  int nchannels = 0;
  int slots = 0;
  size_t slotBytes = 0;  // rounded up to kSlotAlignment
  size_t bytes = 0;      // the whole allocation
  size_t fifoOffset = 0;      // [channel][sender < nranks] FIFOs of slots * slotBytes (this rank receives)
  size_t tailOffset = 0;      // [channel][sender < kMaxRanks] counters: slots the sender filled
  size_t headOffset = 0;      // [channel][receiver] counters: slots the receiver freed
  size_t sendStepOffset = 0;  // [channel][receiver] this rank's slots sent so far
  size_t recvStepOffset = 0;  // [channel][sender] this rank's slots received so far
  size_t llSlotBytes = 0;       // rounded up to kLLSlotAlignment
  size_t llOffset = 0;          // [channel][sender < nranks] LL slots: slots * llSlotBytes (this rank receives)
  size_t llHeadOffset = 0;      // [channel][receiver] counters: LL slots the receiver freed
  size_t llSendStepOffset = 0;  // [channel][receiver] this rank's LL steps sent so far
  size_t llRecvStepOffset = 0;  // [channel][sender] this rank's LL steps received so far
};

// nranks in [1, kMaxRanks], nchannels in [1, kMaxChannels], slots >= 2,
// slotBytes >= 1 (rounded up to kSlotAlignment), llSlotBytes >= 1 (rounded
// up to kLLSlotAlignment). Returns bytes == 0 when an argument is out of
// range (engineLayoutError says which).
EngineLayout engineLayout(int nranks, int nchannels, int slots, size_t slotBytes,
                          size_t llSlotBytes = kDefaultLLSlotBytes);
const char* engineLayoutError(int nranks, int nchannels, int slots, size_t slotBytes,
                              size_t llSlotBytes = kDefaultLLSlotBytes);

// This rank sending to `peer` on one channel.
struct EngineSendConnection {
  unsigned char* fifo = nullptr;  // in the peer's allocation
  uint64_t* tail = nullptr;       // in the peer's allocation: this rank release-stores slots filled
  const uint64_t* head = nullptr; // in this rank's allocation: the peer release-stores slots freed
  uint64_t* step = nullptr;       // in this rank's allocation: slots sent, kept across calls
  uint64_t* llLines = nullptr;        // in the peer's allocation: slots * llSlotBytes of LL lines
  const uint64_t* llHead = nullptr;   // in this rank's allocation: the peer release-stores LL slots freed
  uint64_t* llStep = nullptr;         // in this rank's allocation: LL steps sent, kept across calls
};

// This rank receiving from `peer` on one channel.
struct EngineRecvConnection {
  const unsigned char* fifo = nullptr;  // in this rank's allocation
  const uint64_t* tail = nullptr;       // in this rank's allocation
  uint64_t* head = nullptr;             // in the peer's allocation
  uint64_t* step = nullptr;             // in this rank's allocation: slots received, kept across calls
  const uint64_t* llLines = nullptr;    // in this rank's allocation
  uint64_t* llHead = nullptr;           // in the peer's allocation
  uint64_t* llStep = nullptr;           // in this rank's allocation: LL steps received, kept across calls
};

// What rank `rank`'s kernel reads: built on the host from every rank's
// allocation base AS MAPPED IN THIS PROCESS, then copied into device memory
// once by the caller (or used in place on the host by the emulation).
struct EngineView {
  int rank = 0;
  int nranks = 0;
  int nchannels = 0;
  int slots = 0;
  size_t slotBytes = 0;
  size_t llSlotBytes = 0;
  EngineSendConnection send[kMaxChannels][kMaxRanks];
  EngineRecvConnection recv[kMaxChannels][kMaxRanks];
};

// bases[r] = rank r's allocation (layout.bytes, zero-filled); bases[rank] is its own.
EngineView makeEngineView(const EngineLayout& layout, int rank, void* const* bases);

enum class EngineOp : uint8_t { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kReduce, kAllToAll, kSendRecv };

// How a call moves its data (both ends of every connection must agree: the
// choice depends only on the call's arguments). kSimple: FIFO slots, a
// fence, a tail counter; for bandwidth. kLL: flagged 8-byte lines; half the
// bandwidth but no fence or counter round trip per step; for small
// messages. kLL runs the ring collectives (not kSendRecv / kAllToAll).
enum class EngineProtocol : uint8_t { kSimple, kLL };

// The rank order an all-reduce follows (the other collectives: kRing). kRing:
// reduce-scatter then all-gather around the ring, 2(n-1) steps per block and
// every link busy; for bandwidth. kTree: NCCL's double binary tree (even
// channels on tree 0, odd on tree 1; common/tree_schedule.h), reduced up to
// the root and broadcast down, about 2 log2(n) + 2 steps; for latency.
enum class EngineAlgorithm : uint8_t { kRing, kTree };

// What the kernel reports through EngineCall::status (0 is success).
enum class EngineStatus : uint32_t { kOk = 0, kAborted = 1, kTimedOut = 2, kInvalidCall = 3 };

const char* engineOpName(EngineOp op);
const char* engineProtocolName(EngineProtocol protocol);
const char* engineAlgorithmName(EngineAlgorithm algorithm);
const char* engineStatusName(EngineStatus status);

// One collective call as the kernel receives it (by value).
//
// Reductions: redOp kAvg reduces as kSum and divides the result by nranks;
// otherwise `post` is applied to each finished element (kMultiplyByScalar:
// times `scalar`, the bytes of one element of `type`). Element arithmetic is
// kernels/reduce_ops.h's (fp16/bf16 in fp32, integers wrap). Every rank's
// all-reduce output is bit-identical: each block is reduced once, on one
// rank, then copied around the ring.
struct EngineCall {
  EngineOp op = EngineOp::kAllReduce;
  DataType type = DataType::kFloat32;
  RedOp redOp = RedOp::kSum;
  PostOp post = PostOp::kNone;
  uint64_t scalar = 0;
  const void* send = nullptr;
  void* recv = nullptr;
  // NCCL's meaning per collective: all-reduce/broadcast/reduce elements, reduce-scatter and all-gather
  // elements per rank, all-to-all elements per peer. Ignored by kSendRecv.
  size_t count = 0;
  int root = 0;  // broadcast, reduce
  // kSendRecv: one grouped batch of point-to-point transfers, run concurrently by one kernel so that a send and
  // a recv with the same peer never deadlock on a full FIFO. At most one send and one recv per peer; the sender's
  // sendBytes must equal the receiver's recvBytes. A rank may send to itself.
  int nsends = 0;
  int sendPeer[kMaxRanks] = {};
  const void* sendBuf[kMaxRanks] = {};
  size_t sendBytes[kMaxRanks] = {};
  int nrecvs = 0;
  int recvPeer[kMaxRanks] = {};
  void* recvBuf[kMaxRanks] = {};
  size_t recvBytes[kMaxRanks] = {};
  const volatile uint32_t* abortFlag = nullptr;  // host-mapped; nonzero: stop waiting and report kAborted
  uint64_t timeoutNs = 0;                        // 0: none; a wait longer than this reports kTimedOut
  // Where the kernel reports a failure (device or mapped memory; may be null): the first failing block
  // stores its EngineStatus if the word is still kOk. Nothing is written on success: the caller sets it to
  // kOk before the launch (a memset on the stream keeps graph replays correct).
  uint32_t* status = nullptr;
  int channels = 0;  // channels this call uses: 0 = all of the view's, else 1..view.nchannels (same on every rank)
  EngineProtocol protocol = EngineProtocol::kSimple;  // the same on every rank
  EngineAlgorithm algorithm = EngineAlgorithm::kRing;  // the same on every rank; kTree: all-reduce only
};

// Both travel to the device as bytes (a cudaMemcpy, a kernel argument).
static_assert(std::is_trivially_copyable_v<EngineView>);
static_assert(std::is_trivially_copyable_v<EngineCall>);
// A kernel parameter: CUDA's classic limit is 4 KiB.
static_assert(sizeof(EngineCall) <= 4096);

// nullptr if `call` is valid for a communicator of `nranks` ranks, else what
// is wrong. With `rank` >= 0 the root's own buffers are checked too
// (broadcast's send, reduce's recv).
const char* engineCallError(const EngineCall& call, int nranks, int rank = -1);

// The channels a call uses on `view` (call.channels, or the view's when 0).
LOOM_HOST_DEVICE inline int engineChannels(const EngineCall& call, int viewChannels) {
  return call.channels > 0 && call.channels < viewChannels ? call.channels : viewChannels;
}
// Messages up to this many bytes per rank run LL (engineProtocolFor).
constexpr size_t kLLMaxBytes = size_t{64} << 10;
// The protocol a call of these arguments should run: kLL for a ring
// collective whose largest buffer (all-gather's output, reduce-scatter's
// input, the others' count) is at most kLLMaxBytes, else kSimple. A pure
// function of the arguments every rank passes alike, so every rank agrees.
EngineProtocol engineProtocolFor(EngineOp op, DataType type, size_t count, int nranks);

// The algorithm an all-reduce of these arguments on `protocol` should run:
// kTree where a block crosses the ring in one step (LL) and the tree's
// 2 depth + 2 steps are fewer than the ring's 2(n-1), i.e. from 5 ranks on;
// kRing otherwise and for every other collective. A tree moves each piece
// up and down in lock step, which is latency-bound, so bandwidth-bound
// calls (Simple) stay on the ring.
EngineAlgorithm engineAlgorithmFor(EngineOp op, EngineProtocol protocol, int nranks);

// Channels (thread blocks per rank) a ring collective of these arguments
// should run, at most maxChannels: kLLChannels for LL, where more blocks only
// add flags to poll; for Simple one per kBytesPerChannel of its largest
// buffer, at least kLLChannels. Measured on an H200 with 2 ranks sharing it:
// 8 channels were fastest at 512 KiB (22 us against 56 with 32), 32 at
// 8 MiB and above (128 MiB: 212 GB/s against 70 with 8). A pure function
// of the arguments, so every rank agrees.
constexpr int kLLChannels = 8;
constexpr size_t kBytesPerChannel = size_t{256} << 10;
int engineChannelsFor(EngineOp op, DataType type, size_t count, int nranks, EngineProtocol protocol, int maxChannels);

// Thread blocks the call's kernel runs (0: nothing to do). Ring collectives:
// one per channel; kAllToAll: a send and a recv block per peer and channel;
// kSendRecv: one per (send or recv, channel).
int engineBlocks(const EngineCall& call, int nranks, int channels);

}  // namespace loom::kernels::cuda::engine
