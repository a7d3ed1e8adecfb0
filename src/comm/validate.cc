// Argument checks of every collective, before anything is queued: a bad
// argument must come back as loomInvalidArgument with a message naming the
// argument and the rank, never reach an algorithm.
#include <cstdint>

#include "src/comm/comm.h"

namespace loom {
namespace {

using algo::CollType;

bool overlaps(const void* a, size_t aBytes, const void* b, size_t bBytes) {
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return aBytes && bBytes && x < y + bBytes && y < x + aBytes;
}

}  // namespace

Status Communicator::validate(const algo::CollArgs& a) const {
  // The collective's name is looked up in the messages, so only a failing
  // call pays for it (every call passes here).
  LOOM_ENFORCE(isValidDataType(static_cast<int>(a.dtype)), Code::kInvalidArgument,
               "%s on rank %d: invalid datatype %d (valid: 0..%d)", algo::collTypeName(a.type), rank_,
               static_cast<int>(a.dtype), kNumDataTypes - 1);
  LOOM_ENFORCE(isValidRedOp(static_cast<int>(a.op)), Code::kInvalidArgument,
               "%s on rank %d: invalid reduction op %d (valid: 0..%d)", algo::collTypeName(a.type), rank_,
               static_cast<int>(a.op), kNumRedOps - 1);
  const bool reduces = a.type == CollType::kAllReduce || a.type == CollType::kReduce ||
                       a.type == CollType::kReduceScatter;
  LOOM_ENFORCE(!reduces || opTakesType(a.op, a.dtype), Code::kInvalidArgument,
               "%s on rank %d: reduction op %s takes integer datatypes, got %s", algo::collTypeName(a.type), rank_,
               redOpName(a.op), dataTypeName(a.dtype));
  const bool rooted = a.type == CollType::kBroadcast || a.type == CollType::kReduce;
  LOOM_ENFORCE(!rooted || (a.root >= 0 && a.root < nranks_), Code::kInvalidArgument,
               "%s on rank %d: root %d out of range [0, %d)", algo::collTypeName(a.type), rank_, a.root, nranks_);

  const size_t es = dataTypeSize(a.dtype);
  const bool perRank = a.type == CollType::kReduceScatter || a.type == CollType::kAllGather;
  const size_t factor = perRank ? static_cast<size_t>(nranks_) : 1;
  // A multiply with an overflow flag, not SIZE_MAX / es / factor: two 64-bit
  // divisions were a few percent of an 8-byte call.
  size_t total = 0;
  LOOM_ENFORCE(!__builtin_mul_overflow(a.count, es * factor, &total), Code::kInvalidArgument,
               "%s on rank %d: count %zu of %s overflows the address space", algo::collTypeName(a.type), rank_, a.count,
               dataTypeName(a.dtype));
  if (a.count == 0) return Status::ok();

  const size_t bytes = a.count * es;
  const bool isRoot = a.root == rank_;
  const bool needSend = a.type != CollType::kBroadcast || isRoot;
  const bool needRecv = a.type != CollType::kReduce || isRoot;
  LOOM_ENFORCE(!needSend || a.sendbuf, Code::kInvalidArgument, "%s on rank %d: sendbuff is NULL with count %zu",
               algo::collTypeName(a.type), rank_, a.count);
  LOOM_ENFORCE(!needRecv || a.recvbuf, Code::kInvalidArgument, "%s on rank %d: recvbuff is NULL with count %zu",
               algo::collTypeName(a.type), rank_, a.count);

  // Buffers may coincide only at NCCL's in-place positions; any other overlap
  // would be read after being overwritten.
  const size_t sendBytes = a.type == CollType::kReduceScatter ? bytes * factor : bytes;
  const size_t recvBytes = a.type == CollType::kAllGather ? bytes * factor : bytes;
  const auto* send = static_cast<const char*>(a.sendbuf);
  const auto* recv = static_cast<const char*>(a.recvbuf);
  const char* inPlaceSend = recv;  // sendbuff position that counts as in place
  const char* inPlaceRecv = send;
  if (a.type == CollType::kAllGather) inPlaceSend = recv + static_cast<size_t>(rank_) * bytes;
  if (a.type == CollType::kReduceScatter) inPlaceRecv = send + static_cast<size_t>(rank_) * bytes;
  const bool inPlace = a.type == CollType::kAllGather ? send == inPlaceSend : recv == inPlaceRecv;
  if (needSend && needRecv && !inPlace)
    LOOM_ENFORCE(!overlaps(send, sendBytes, recv, recvBytes), Code::kInvalidArgument,
                 "%s on rank %d: sendbuff and recvbuff overlap without being in place", algo::collTypeName(a.type),
                 rank_);
  return Status::ok();
}

}  // namespace loom
