#include "src/device/staged_run.h"

#include "common/format.h"

namespace loom::cuda {
namespace {

// `what`: "copy in" or "copy out"; `buffer`: the user buffer's name.
Status queue(CopyEngine& copies, void* dst, const void* src, const StagedCopy& c, const char* what,
             const char* buffer) {
  return copies.copy2D(dst, c.bytes, src, c.bytes, c.bytes, 1)
      .withContext(strprintf("staging %s of %s bytes [%zu, %zu): ", what, buffer, c.userOffset, c.userOffset + c.bytes));
}

const char* bufferName(const StagedCopy& c) { return c.userIsSend ? "sendbuff" : "recvbuff"; }

}  // namespace

Status runStagedCollective(const algo::CollArgs& args, const StagingPlan& plan, void* staging, CopyEngine& copies,
                           const WaitContext& wait, const HostCollective& runHost) {
  auto* stage = static_cast<std::byte*>(staging);
  auto* send = static_cast<std::byte*>(const_cast<void*>(args.sendbuf));
  auto* recv = static_cast<std::byte*>(args.recvbuf);
  for (const StagedCopy& c : plan.copyIn)
    LOOM_TRY(queue(copies, stage + c.stagingOffset, (c.userIsSend ? send : recv) + c.userOffset, c, "copy in",
                   bufferName(c)));
  if (!plan.copyIn.empty()) LOOM_TRY(copies.finish(wait));

  algo::CollArgs host = args;
  if (plan.send.staged) host.sendbuf = stage + plan.send.offset;
  if (plan.recv.staged) host.recvbuf = stage + plan.recv.offset;
  LOOM_TRY(runHost(host));

  for (const StagedCopy& c : plan.copyOut)
    LOOM_TRY(queue(copies, (c.userIsSend ? send : recv) + c.userOffset, stage + c.stagingOffset, c, "copy out",
                   bufferName(c)));
  if (!plan.copyOut.empty()) LOOM_TRY(copies.finish(wait));
  return Status::ok();
}

Status runStagedP2P(const std::vector<algo::P2POp>& ops, const P2PStagingPlan& plan, void* staging,
                    CopyEngine& copies, const WaitContext& wait, const HostP2P& runHost,
                    const StagedP2PHooks& hooks) {
  auto* stage = static_cast<std::byte*>(staging);
  for (size_t k = 0; k < plan.copyIn.size(); ++k) {
    const StagedCopy& c = plan.copyIn[k];
    const auto* src = static_cast<const std::byte*>(ops[plan.copyInOp[k]].src);
    LOOM_TRY(queue(copies, stage + c.stagingOffset, src + c.userOffset, c, "copy in", "a send buffer"));
  }
  if (!plan.copyIn.empty()) LOOM_TRY(copies.finish(wait));
  if (hooks.afterCopyIn) {
    // What it started in part is finished before the error returns.
    if (Status started = hooks.afterCopyIn(); !started.isOk()) {
      if (hooks.beforeCopyOut) (void)hooks.beforeCopyOut();
      return started;
    }
  }

  std::vector<algo::P2POp> host = ops;
  for (size_t i = 0; i < host.size(); ++i) {
    if (!plan.ops[i].staged) continue;
    if (host[i].kind == algo::P2POp::kSend) host[i].src = stage + plan.ops[i].offset;
    else host[i].dst = stage + plan.ops[i].offset;
  }
  // With work beside it, the host step runs only when it has ops (it may
  // be the engine's batch alone); that work is finished whatever happened.
  Status hosted = hooks.afterCopyIn && host.empty() ? Status::ok() : runHost(host);
  if (hooks.beforeCopyOut) {
    Status beside = hooks.beforeCopyOut();
    if (hosted.isOk()) hosted = std::move(beside);
  }
  LOOM_TRY(std::move(hosted));

  for (size_t k = 0; k < plan.copyOut.size(); ++k) {
    const StagedCopy& c = plan.copyOut[k];
    auto* dst = static_cast<std::byte*>(ops[plan.copyOutOp[k]].dst);
    LOOM_TRY(queue(copies, dst + c.userOffset, stage + c.stagingOffset, c, "copy out", "a recv buffer"));
  }
  if (!plan.copyOut.empty()) LOOM_TRY(copies.finish(wait));
  return Status::ok();
}

}  // namespace loom::cuda
