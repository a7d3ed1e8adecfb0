// What one operation of a communicator is, in the few fields that every rank
// must agree on (LOOM_CHECK compares them) and that the flight recorder and
// the trace show: kind, count, datatype, op and root. Fields a kind does not
// use are normalized (op kSum, root -1) so that they never cause a mismatch.
#pragma once

#include <cstdint>
#include <string>

#include "algorithms/algorithm.h"
#include "common/types.h"

namespace loom {

enum class OpKind : uint8_t {
  kAllReduce = 0, kBroadcast, kReduce, kReduceScatter, kAllGather, kAllToAll, kBarrier,
  kSendRecv,  // loomSend/loomRecv (a fused group of them): not collective, never cross-checked
};
constexpr int kNumOpKinds = 8;
const char* opKindName(OpKind kind);  // "allreduce", "broadcast", ... as LOOM_CHECK messages spell them

struct OpDescriptor {
  OpKind kind = OpKind::kAllReduce;
  uint64_t count = 0;  // elements (NCCL's meaning per collective); bytes for kSendRecv
  DataType dtype = DataType::kFloat32;
  RedOp op = RedOp::kSum;
  int root = -1;

  // Whether every rank of the communicator runs it (LOOM_CHECK applies).
  bool collective() const { return kind != OpKind::kSendRecv; }
  bool usesOp() const;
  bool usesRoot() const { return kind == OpKind::kBroadcast || kind == OpKind::kReduce; }
  bool sameCall(const OpDescriptor& other) const;

  static OpDescriptor of(const algo::CollArgs& args);
  static OpDescriptor allToAll(uint64_t count, DataType dtype);
  static OpDescriptor barrier();
  static OpDescriptor sendRecv(uint64_t bytes);
};

// "allreduce count=1024 float sum" / "broadcast count=1024 float root=0" /
// "barrier"; with seq >= 0, " seq=7" appended.
std::string describeOp(const OpDescriptor& op, int64_t seq = -1);

}  // namespace loom
