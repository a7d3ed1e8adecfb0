#include "algorithms/hierarchical.h"

#include "algorithms/patterns/host_layout.h"
#include "algorithms/primitives.h"
#include "algorithms/ring.h"
#include "algorithms/subgroup.h"
#include "common/format.h"
#include "kernels/reduce.h"

namespace loom::algo {
namespace {

// Runs one phase on a subgroup, naming the phase and its members on failure.
Status phase(CollFn fn, const CollArgs& args, const Subgroup& group, const char* what) {
  Status status = fn(args, group.context());
  if (status.isOk()) return status;
  return status.withContext(strprintf("hier %s among %s (sub-ranks index that list): ", what,
                                      group.describe().c_str()));
}

}  // namespace

bool hierarchicalApplies(const CollArgs&, const AlgoContext& ctx) {
  const HostLayout* hosts = ctx.hosts;
  return hosts && hosts->nranks == ctx.nranks && hosts->rank == ctx.rank && hosts->nHosts() > 1 && hosts->uniform();
}

Status hierarchicalAllReduce(const CollArgs& args, const AlgoContext& ctx) {
  LOOM_ENFORCE(hierarchicalApplies(args, ctx), Code::kInvalidUsage,
               "hier all-reduce on rank %d needs at least two hosts with the same number of ranks each", ctx.rank);
  size_t chunkElems = 0;
  LOOM_TRY(chunkElemsFor(args, ctx, "hier all-reduce", &chunkElems));
  const HostLayout& hosts = *ctx.hosts;
  const auto localSize = static_cast<size_t>(hosts.localRanks().size());
  const auto j = static_cast<size_t>(hosts.localRank());
  const size_t es = dataTypeSize(args.dtype);
  const size_t shard = args.count / localSize, rest = args.count % localSize;
  const auto* in = static_cast<const std::byte*>(args.sendbuf);
  auto* out = static_cast<std::byte*>(args.recvbuf);
  // Phases sum; the average's division comes once, at the end (finalize).
  const RedOp op = args.op == RedOp::kAvg ? RedOp::kSum : args.op;
  const Subgroup local(ctx, hosts.localRanks(), true);
  const Subgroup rail(ctx, hosts.rail, false);

  if (shard > 0) {
    std::byte* mine = out + j * shard * es;  // shard j stays where the result wants it
    LOOM_TRY(phase(ringReduceScatter, {CollType::kReduceScatter, in, mine, shard, args.dtype, op, 0}, local,
                   "intra-host reduce-scatter"));
    LOOM_TRY(phase(ringAllReduce, {CollType::kAllReduce, mine, mine, shard, args.dtype, op, 0}, rail,
                   "inter-host all-reduce"));
    kernels::finalize(args.dtype, args.op, ctx.nranks, mine, mine, shard);
    LOOM_TRY(phase(ringAllGather, {CollType::kAllGather, mine, out, shard, args.dtype, op, 0}, local,
                   "intra-host all-gather"));
  }
  if (rest > 0) {
    const size_t at = localSize * shard * es;
    LOOM_TRY(phase(ringAllReduce, {CollType::kAllReduce, in + at, out + at, rest, args.dtype, op, 0}, local,
                   "intra-host all-reduce of the remainder"));
    LOOM_TRY(phase(ringAllReduce, {CollType::kAllReduce, out + at, out + at, rest, args.dtype, op, 0}, rail,
                   "inter-host all-reduce of the remainder"));
    kernels::finalize(args.dtype, args.op, ctx.nranks, out + at, out + at, rest);
  }
  return Status::ok();
}

}  // namespace loom::algo
