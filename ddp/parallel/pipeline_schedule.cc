#include "ddp/parallel/pipeline_schedule.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>

namespace loom::ddp {
namespace {

using Clock = std::chrono::steady_clock;

struct Stage {
  loomComm_t comm;
  int index;
  int count;
  bool first() const { return index == 0; }
  bool last() const { return index + 1 == count; }
};

Stage stageOf(loomComm_t pipeline) {
  Stage s{pipeline, 0, 1};
  if (!pipeline || loomCommUserRank(pipeline, &s.index) != loomSuccess || loomCommCount(pipeline, &s.count) != loomSuccess)
    throw std::invalid_argument("pipeline: the pipeline communicator is not valid");
  return s;
}

void check(const Stage& s, loomResult_t r, const std::string& what) {
  if (r == loomSuccess) return;
  throw std::runtime_error("pipeline stage " + std::to_string(s.index) + ": " + what + " failed: " + loomGetErrorString(r) +
                           ": " + loomGetLastError(s.comm));
}

// The sends and receives around one action, enqueued in one group.
struct Exchange {
  std::span<const float> sendPrev, sendNext;
  std::span<float> recvPrev, recvNext;
  bool empty() const { return sendPrev.empty() && sendNext.empty() && recvPrev.empty() && recvNext.empty(); }
};

void exchange(const Stage& s, const Exchange& x, const std::string& what) {
  if (x.empty()) return;
  check(s, loomGroupStart(), "loomGroupStart");
  loomResult_t r = loomSuccess;
  if (!x.sendNext.empty()) r = loomSend(x.sendNext.data(), x.sendNext.size(), loomFloat32, s.index + 1, s.comm, nullptr);
  if (r == loomSuccess && !x.sendPrev.empty())
    r = loomSend(x.sendPrev.data(), x.sendPrev.size(), loomFloat32, s.index - 1, s.comm, nullptr);
  if (r == loomSuccess && !x.recvPrev.empty())
    r = loomRecv(x.recvPrev.data(), x.recvPrev.size(), loomFloat32, s.index - 1, s.comm, nullptr);
  if (r == loomSuccess && !x.recvNext.empty())
    r = loomRecv(x.recvNext.data(), x.recvNext.size(), loomFloat32, s.index + 1, s.comm, nullptr);
  const loomResult_t end = loomGroupEnd();
  check(s, r != loomSuccess ? r : end, what);
}

}  // namespace

std::vector<PipeAction> oneForwardOneBackward(int stage, int stages, size_t microBatches) {
  if (stages < 1 || stage < 0 || stage >= stages) {
    throw std::invalid_argument("oneForwardOneBackward: stage " + std::to_string(stage) + " is outside [0, " +
                                std::to_string(stages) + ")");
  }
  if (microBatches == 0) throw std::invalid_argument("oneForwardOneBackward: microBatches is 0");
  const size_t warmup = std::min(static_cast<size_t>(stages - stage - 1), microBatches);
  std::vector<PipeAction> actions;
  size_t forwards = 0, backwards = 0;
  for (; forwards < warmup; ++forwards) actions.push_back({PipeOp::kForward, forwards});
  while (forwards < microBatches) {
    actions.push_back({PipeOp::kForward, forwards++});
    actions.push_back({PipeOp::kBackward, backwards++});
  }
  while (backwards < microBatches) actions.push_back({PipeOp::kBackward, backwards++});
  return actions;
}

double theoreticalBubble(int stages, size_t microBatches) {
  return static_cast<double>(stages - 1) / static_cast<double>(microBatches + static_cast<size_t>(stages) - 1);
}

PipelineTiming runOneForwardOneBackward(loomComm_t pipeline, size_t microBatches, PipelineCompute& compute,
                                        std::vector<PipeAction>* trace) {
  const Stage s = stageOf(pipeline);
  const std::vector<PipeAction> actions = oneForwardOneBackward(s.index, s.count, microBatches);
  PipelineTiming timing;
  const Clock::time_point start = Clock::now();
  // Where action a's input comes from: a forward's from the previous stage,
  // a backward's (its output gradient) from the next.
  auto inputOf = [&](const PipeAction& a, Exchange& x) {
    if (a.op == PipeOp::kForward && !s.first()) x.recvPrev = compute.inputBuffer(a.microBatch);
    if (a.op == PipeOp::kBackward && !s.last()) x.recvNext = compute.gradOutputBuffer(a.microBatch);
  };
  Exchange before;
  inputOf(actions.front(), before);
  exchange(s, before, "receiving the input of the first action");
  for (size_t i = 0; i < actions.size(); ++i) {
    const PipeAction& a = actions[i];
    const Clock::time_point t0 = Clock::now();
    std::span<const float> out = a.op == PipeOp::kForward ? compute.forward(a.microBatch) : compute.backward(a.microBatch);
    timing.computeSeconds += std::chrono::duration<double>(Clock::now() - t0).count();
    if (trace) trace->push_back(a);
    Exchange x;
    if (a.op == PipeOp::kForward && !s.last()) x.sendNext = out;
    if (a.op == PipeOp::kBackward && !s.first()) x.sendPrev = out;
    if (i + 1 < actions.size()) inputOf(actions[i + 1], x);
    exchange(s, x, std::string(a.op == PipeOp::kForward ? "forward" : "backward") + " of micro-batch " +
                       std::to_string(a.microBatch) + " (sending its output, receiving the next input)");
  }
  timing.wallSeconds = std::chrono::duration<double>(Clock::now() - start).count();
  return timing;
}

void runForwardOnly(loomComm_t pipeline, size_t microBatches, PipelineCompute& compute) {
  const Stage s = stageOf(pipeline);
  for (size_t m = 0; m < microBatches; ++m) {
    Exchange in;
    if (!s.first()) in.recvPrev = compute.inputBuffer(m);
    exchange(s, in, "receiving micro-batch " + std::to_string(m));
    std::span<const float> out = compute.forward(m);
    Exchange next;
    if (!s.last()) next.sendNext = out;
    exchange(s, next, "sending micro-batch " + std::to_string(m));
  }
}

}  // namespace loom::ddp
