#include "algorithms/subgroup.h"

#include <algorithm>

#include "algorithms/ring.h"
#include "common/format.h"
#include "kernels/reduce.h"

namespace loom::algo {

Subgroup::Subgroup(const AlgoContext& parent, const std::vector<int>& members, bool singleHost)
    : members_(members), links_(*parent.links, members), ctx_(parent) {
  ctx_.rank = static_cast<int>(std::find(members.begin(), members.end(), parent.rank) - members.begin());
  ctx_.nranks = static_cast<int>(members.size());
  ctx_.links = &links_;
  ctx_.singleHost = singleHost;
  ctx_.hosts = nullptr;
  // The bulletin's rounds and the windows' phases involve every rank of the
  // communicator; a subset posting alone would break their contracts.
  ctx_.bulletin = nullptr;
  ctx_.windows = nullptr;
}

std::string Subgroup::describe() const {
  std::string text = "ranks ";
  for (size_t i = 0; i < members_.size(); ++i) text += (i ? "," : "") + std::to_string(members_[i]);
  return text;
}

Status runOnSubgroup(const CollArgs& args, const Subgroup& group, int avgRanks) {
  const AlgoContext& ctx = group.context();
  CollArgs run = args;
  if (args.op == RedOp::kAvg) run.op = RedOp::kSum;
  Status status;
  switch (args.type) {
    case CollType::kAllReduce: status = ringAllReduce(run, ctx); break;
    case CollType::kReduceScatter: status = ringReduceScatter(run, ctx); break;
    case CollType::kAllGather: status = ringAllGather(run, ctx); break;
    case CollType::kBroadcast: status = chainBroadcast(run, ctx); break;
    case CollType::kReduce: status = chainReduce(run, ctx); break;
  }
  LOOM_TRY(status.withContext(strprintf("%s among %s: ", collTypeName(args.type), group.describe().c_str())));
  const bool holdsResult = args.type != CollType::kReduce || ctx.rank == args.root;
  const bool reduces = args.type != CollType::kAllGather && args.type != CollType::kBroadcast;
  if (args.op == RedOp::kAvg && reduces && holdsResult)
    kernels::finalize(args.dtype, RedOp::kAvg, avgRanks, args.recvbuf, args.recvbuf, args.count);
  return Status::ok();
}

}  // namespace loom::algo
