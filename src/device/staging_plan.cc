#include "src/device/staging_plan.h"

#include <cstdint>

namespace loom::cuda {
namespace {

using algo::CollType;

// Staging regions are 256-byte aligned: what cudaMalloc gives, and more than
// any reduction kernel's vector loads need.
size_t alignUp(size_t n) { return (n + 255) / 256 * 256; }

void addCopies(std::vector<StagedCopy>* out, bool userIsSend, size_t userOffset, size_t stagingOffset, size_t bytes,
               size_t chunk) {
  if (bytes == 0) return;
  const size_t step = chunk == 0 ? bytes : chunk;
  for (size_t done = 0; done < bytes; done += step)
    out->push_back({userIsSend, userOffset + done, stagingOffset + done, std::min(step, bytes - done)});
}

}  // namespace

bool isInPlace(const algo::CollArgs& args, int rank) {
  const size_t es = dataTypeSize(args.dtype);
  const auto send = reinterpret_cast<uintptr_t>(args.sendbuf);
  const auto recv = reinterpret_cast<uintptr_t>(args.recvbuf);
  const size_t block = static_cast<size_t>(rank) * args.count * es;
  switch (args.type) {
    case CollType::kAllGather: return send == recv + block;
    case CollType::kReduceScatter: return recv == send + block;
    default: return send == recv;
  }
}

StagingPlan planStaging(const StagingInputs& in) {
  StagingPlan plan;
  const size_t n = static_cast<size_t>(in.nranks);
  const size_t unit = in.count * in.elemBytes;  // bytes of one count-sized block
  const bool isRoot = in.rank == in.root;
  size_t sendBytes = unit, recvBytes = unit;
  bool readsSend = true, writesRecv = true;
  switch (in.type) {
    case CollType::kAllReduce: break;
    case CollType::kBroadcast: readsSend = isRoot; break;
    case CollType::kReduce: writesRecv = isRoot; break;
    case CollType::kReduceScatter: sendBytes = n * unit; break;
    case CollType::kAllGather: recvBytes = n * unit; break;
  }
  if (unit == 0) return plan;
  const size_t chunk = in.copyChunkBytes;

  if (in.inPlace) {
    // One buffer, so one kind: staged if either side says so.
    if (!in.sendStaged && !in.recvStaged) return plan;
    const size_t own = static_cast<size_t>(in.rank) * unit;
    plan.stagingBytes = alignUp(std::max(sendBytes, recvBytes));
    plan.send.staged = plan.recv.staged = true;
    switch (in.type) {
      case CollType::kAllGather:
        // sendbuf is block `rank` of recvbuf: stage recvbuf, copy in only that block.
        plan.send.offset = own;
        addCopies(&plan.copyIn, false, own, own, unit, chunk);
        addCopies(&plan.copyOut, false, 0, 0, recvBytes, chunk);
        break;
      case CollType::kReduceScatter:
        // recvbuf is block `rank` of sendbuf: stage sendbuf, copy out only that block.
        plan.recv.offset = own;
        addCopies(&plan.copyIn, true, 0, 0, sendBytes, chunk);
        addCopies(&plan.copyOut, true, own, own, unit, chunk);
        break;
      case CollType::kBroadcast:
        // The root's buffer is its input and stays unchanged.
        if (isRoot) addCopies(&plan.copyIn, true, 0, 0, unit, chunk);
        else addCopies(&plan.copyOut, false, 0, 0, unit, chunk);
        break;
      default:  // all-reduce, reduce
        addCopies(&plan.copyIn, true, 0, 0, unit, chunk);
        if (writesRecv) addCopies(&plan.copyOut, false, 0, 0, unit, chunk);
        break;
    }
    return plan;
  }

  // Separate buffers: each staged side gets its own region. A side the call
  // does not use on this rank (a non-root's broadcast input or reduce output)
  // keeps the user's pointer: the algorithm never touches it.
  size_t next = 0;
  if (in.sendStaged && readsSend) {
    plan.send = {true, next};
    addCopies(&plan.copyIn, true, 0, next, sendBytes, chunk);
    next += alignUp(sendBytes);
  }
  if (in.recvStaged && writesRecv) {
    plan.recv = {true, next};
    addCopies(&plan.copyOut, false, 0, next, recvBytes, chunk);
    next += alignUp(recvBytes);
  }
  plan.stagingBytes = next;
  return plan;
}

P2PStagingPlan planP2PStaging(const std::vector<algo::P2POp>& ops, const std::vector<bool>& staged,
                              size_t copyChunkBytes) {
  P2PStagingPlan plan;
  plan.ops.resize(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!staged[i] || ops[i].bytes == 0) continue;
    plan.ops[i] = {true, plan.stagingBytes};
    const bool isSend = ops[i].kind == algo::P2POp::kSend;
    auto* copies = isSend ? &plan.copyIn : &plan.copyOut;
    auto* owners = isSend ? &plan.copyInOp : &plan.copyOutOp;
    const size_t before = copies->size();
    addCopies(copies, isSend, 0, plan.stagingBytes, ops[i].bytes, copyChunkBytes);
    owners->insert(owners->end(), copies->size() - before, i);
    plan.stagingBytes += alignUp(ops[i].bytes);
  }
  return plan;
}

}  // namespace loom::cuda
