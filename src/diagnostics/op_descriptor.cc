#include "src/diagnostics/op_descriptor.h"

#include "common/format.h"

namespace loom {

const char* opKindName(OpKind kind) {
  switch (kind) {
    case OpKind::kAllReduce: return "allreduce";
    case OpKind::kBroadcast: return "broadcast";
    case OpKind::kReduce: return "reduce";
    case OpKind::kReduceScatter: return "reducescatter";
    case OpKind::kAllGather: return "allgather";
    case OpKind::kAllToAll: return "alltoall";
    case OpKind::kBarrier: return "barrier";
    case OpKind::kSendRecv: return "sendrecv";
  }
  return "?";
}

bool OpDescriptor::usesOp() const {
  return kind == OpKind::kAllReduce || kind == OpKind::kReduce || kind == OpKind::kReduceScatter;
}

bool OpDescriptor::sameCall(const OpDescriptor& o) const {
  return kind == o.kind && count == o.count && dtype == o.dtype && op == o.op && root == o.root;
}

OpDescriptor OpDescriptor::of(const algo::CollArgs& args) {
  OpDescriptor d;
  switch (args.type) {
    case algo::CollType::kAllReduce: d.kind = OpKind::kAllReduce; break;
    case algo::CollType::kBroadcast: d.kind = OpKind::kBroadcast; break;
    case algo::CollType::kReduce: d.kind = OpKind::kReduce; break;
    case algo::CollType::kReduceScatter: d.kind = OpKind::kReduceScatter; break;
    case algo::CollType::kAllGather: d.kind = OpKind::kAllGather; break;
  }
  d.count = args.count;
  d.dtype = args.dtype;
  if (d.usesOp()) d.op = args.op;
  if (d.usesRoot()) d.root = args.root;
  return d;
}

OpDescriptor OpDescriptor::allToAll(uint64_t count, DataType dtype) {
  OpDescriptor d;
  d.kind = OpKind::kAllToAll;
  d.count = count;
  d.dtype = dtype;
  return d;
}

OpDescriptor OpDescriptor::barrier() {
  OpDescriptor d;
  d.kind = OpKind::kBarrier;
  d.dtype = DataType::kUint8;
  return d;
}

OpDescriptor OpDescriptor::sendRecv(uint64_t bytes) {
  OpDescriptor d;
  d.kind = OpKind::kSendRecv;
  d.count = bytes;
  d.dtype = DataType::kUint8;
  return d;
}

std::string describeOp(const OpDescriptor& d, int64_t seq) {
  std::string s = opKindName(d.kind);
  if (d.kind == OpKind::kSendRecv) s += strprintf(" bytes=%llu", static_cast<unsigned long long>(d.count));
  else if (d.kind != OpKind::kBarrier)
    s += strprintf(" count=%llu %s", static_cast<unsigned long long>(d.count), dataTypeName(d.dtype));
  if (d.usesOp()) s += strprintf(" %s", redOpName(d.op));
  if (d.usesRoot()) s += strprintf(" root=%d", d.root);
  if (seq >= 0) s += strprintf(" seq=%lld", static_cast<long long>(seq));
  return s;
}

}  // namespace loom
