#include "src/device/p2p_across_hosts.h"

#include <algorithm>

#include "common/format.h"
#include "src/device/staging_plan.h"

namespace loom::cuda {
namespace {

// The engine's share of a batch, on the engine's own stream.
class EngineShare {
 public:
  EngineShare(std::vector<algo::P2POp> ops, const P2PAcrossHosts& ctx, std::string where)
      : ops_(std::move(ops)), ctx_(ctx), where_(std::move(where)) {}

  Status launch() { return ctx_.engine->enqueueP2P(ops_, nullptr).withContext(where_); }
  Status finish() {
    LOOM_TRY(ctx_.engine->waitIdle(ctx_.wait).withContext(where_));
    return ctx_.engine->kernelError();
  }

 private:
  std::vector<algo::P2POp> ops_;
  const P2PAcrossHosts& ctx_;
  std::string where_;
};

}  // namespace

P2PSplit splitP2PByHost(const std::vector<algo::P2POp>& ops, const std::vector<PointerInfo>& kinds,
                        const std::vector<int>& hostRanks, int device) {
  P2PSplit split;
  for (size_t i = 0; i < ops.size(); ++i) {
    const auto member = std::find(hostRanks.begin(), hostRanks.end(), ops[i].peer);
    const bool onEngineDevice = kinds[i].kind == MemoryKind::kDevice && kinds[i].device == device;
    if (member != hostRanks.end() && (ops[i].bytes == 0 || onEngineDevice)) {
      algo::P2POp op = ops[i];
      op.peer = static_cast<int>(member - hostRanks.begin());
      split.engine.push_back(op);
    } else {
      split.elsewhere.push_back(ops[i]);
      split.elsewhereStaged.push_back(needsStaging(kinds[i].kind));
    }
  }
  return split;
}

Status runP2PAcrossHosts(const P2PSplit& split, const P2PAcrossHosts& ctx) {
  const std::string where = strprintf("send/recv across hosts on rank %d: ", ctx.rank);
  EngineShare engine(split.engine, ctx, where);
  const P2PStagingPlan plan = planP2PStaging(split.elsewhere, split.elsewhereStaged, ctx.copyChunkBytes);
  void* staging = nullptr;
  if (plan.stagingBytes > 0) {
    auto got = ctx.staging(plan.stagingBytes);
    LOOM_TRY(got.status().withContext(where));
    staging = got.value();
  }
  bool launched = false;
  StagedP2PHooks hooks;
  hooks.afterCopyIn = [&] {
    launched = true;
    return engine.launch();
  };
  hooks.beforeCopyOut = [&] { return launched ? engine.finish() : Status::ok(); };
  return runStagedP2P(split.elsewhere, plan, staging, *ctx.copies, ctx.wait, ctx.runHost, hooks);
}

}  // namespace loom::cuda
