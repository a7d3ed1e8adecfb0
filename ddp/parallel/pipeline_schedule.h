// The 1F1B pipeline schedule (PipeDream-Flush, as Megatron-LM runs it
// without interleaving) and the executor that runs it over loomSend /
// loomRecv on a pipeline communicator (stage = rank in it).
//
// Stage s of P with M micro-batches: min(P-s-1, M) warm-up forwards, then
// alternating one forward / one backward, then the remaining backwards. So
// at most P-s micro-batches are in flight on stage s (their activations
// kept), whatever M is, and the idle share of each stage (the bubble) is
// (P-1)/(M+P-1) when every forward and backward takes the same time.
//
// Communication: each action's output is sent and the next action's input
// received in ONE group (loomGroupStart/End), as Megatron pairs
// send_forward_recv_backward, so neighbours exchanging in both directions
// cannot deadlock. Activations go stage s -> s+1 and gradients s+1 -> s, in
// micro-batch order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "loom/loom.h"

namespace loom::ddp {

enum class PipeOp : uint8_t { kForward, kBackward };

struct PipeAction {
  PipeOp op = PipeOp::kForward;
  size_t microBatch = 0;
  bool operator==(const PipeAction&) const = default;
};

// Stage `stage`'s actions in order (std::invalid_argument on stage outside
// [0, stages) or microBatches == 0).
std::vector<PipeAction> oneForwardOneBackward(int stage, int stages, size_t microBatches);

// (P-1)/(M+P-1).
double theoreticalBubble(int stages, size_t microBatches);

// What one stage computes; the executor moves the tensors.
class PipelineCompute {
 public:
  virtual ~PipelineCompute() = default;
  // Where micro-batch m's input activation is received (stages > 0).
  virtual std::span<float> inputBuffer(size_t m) = 0;
  // Forward of m; returns the activation to send on (empty on the last stage).
  virtual std::span<const float> forward(size_t m) = 0;
  // Where the gradient of m's output is received (all stages but the last).
  virtual std::span<float> gradOutputBuffer(size_t m) = 0;
  // Backward of m; returns the gradient of its input to send back (empty on stage 0).
  virtual std::span<const float> backward(size_t m) = 0;
};

struct PipelineTiming {
  double wallSeconds = 0;     // the whole schedule on this stage
  double computeSeconds = 0;  // inside forward() and backward()
  double bubble() const { return wallSeconds > 0 ? 1.0 - computeSeconds / wallSeconds : 0.0; }
};

// Runs one training step's 1F1B schedule on this stage (collective over
// `pipeline`). `trace`, if given, receives the actions in the order they ran.
// std::runtime_error naming the stage and the micro-batch on a Loom error.
PipelineTiming runOneForwardOneBackward(loomComm_t pipeline, size_t microBatches, PipelineCompute& compute,
                                        std::vector<PipeAction>* trace = nullptr);

// Forward only (evaluation): micro-batches in order, each received, computed
// and sent on. Collective over `pipeline`.
void runForwardOnly(loomComm_t pipeline, size_t microBatches, PipelineCompute& compute);

}  // namespace loom::ddp
