#include "src/device/p2p_across_hosts.h"

#include <algorithm>
#include <cstdint>

#include "common/format.h"
#include "src/device/staging_plan.h"

namespace loom::cuda {
namespace {

bool overlaps(const void* a, size_t aBytes, const void* b, size_t bBytes) {
  const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return aBytes && bBytes && x < y + bBytes && y < x + aBytes;
}

// Scratch offsets stay aligned for any element type.
size_t alignUp(size_t bytes) { return (bytes + 255) / 256 * 256; }

// The engine's kernel reads a send while it writes the receives, with no
// order between the two: a send whose bytes a receive of the same batch
// overwrites (an in-place all-to-all) is sent from a copy in scratch.
class EngineShare {
 public:
  EngineShare(std::vector<algo::P2POp> ops, const P2PAcrossHosts& ctx, std::string where)
      : ops_(std::move(ops)), ctx_(ctx), where_(std::move(where)) {}

  // Copies the overwritten sends aside; the copies are done on return.
  Status protectOverwrittenSends() {
    std::vector<size_t> moved;
    size_t bytes = 0;
    for (size_t i = 0; i < ops_.size(); ++i) {
      const algo::P2POp& send = ops_[i];
      if (send.kind != algo::P2POp::kSend || send.bytes == 0) continue;
      const bool overwritten = std::any_of(ops_.begin(), ops_.end(), [&](const algo::P2POp& recv) {
        return recv.kind == algo::P2POp::kRecv && overlaps(send.src, send.bytes, recv.dst, recv.bytes);
      });
      if (!overwritten) continue;
      moved.push_back(i);
      bytes += alignUp(send.bytes);
    }
    if (moved.empty()) return Status::ok();
    auto room = ctx_.engine->scratch(bytes);
    LOOM_TRY(room.status().withContext(where_));
    auto* at = static_cast<unsigned char*>(room.value());
    for (size_t i : moved) {
      algo::P2POp& send = ops_[i];
      LOOM_TRY(ctx_.copies->copy2D(at, send.bytes, send.src, send.bytes, send.bytes, 1).withContext(where_));
      send.src = at;
      at += alignUp(send.bytes);
    }
    return ctx_.copies->finish(ctx_.wait).withContext(where_);
  }

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
  // Before anything moves: no engine receive has written yet.
  LOOM_TRY(engine.protectOverwrittenSends());
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
