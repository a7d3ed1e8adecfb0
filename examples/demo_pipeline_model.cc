// PP x TP x DP: each pipeline (ProcessMesh's pp group) runs the MLP's
// layers in stages with the 1F1B schedule over --micro-batches, each stage
// tensor-parallel over the TP group when --tp > 1; DDP (+ ZeRO-1/2) over
// the data-parallel group of ranks holding the same shard of the same stage. The epoch line
// gives the measured bubble (idle share of the schedule's wall time, over
// all stages) next to (P-1)/(M+P-1).
#include <cstdio>
#include <memory>
#include <stdexcept>

#include "ddp/parallel/pipeline_mlp_stage.h"
#include "ddp/parallel/pipeline_schedule.h"
#include "ddp/parallel/process_mesh.h"
#include "examples/demo_data_parallel.h"
#include "examples/demo_model.h"

namespace loom::demo {
namespace {

class PipelineModel : public DemoModel {
 public:
  PipelineModel(const DemoOptions& o, loomComm_t world, const std::vector<size_t>& layers, ddp::MeshShape shape)
      : o_(o), layers_(layers), mesh_(world, shape) {
    stage_ = std::make_unique<ddp::PipelineMlpStage>(store_, ddp::MlpOptions{layers, o.activation}, mesh_.coords().pp,
                                                     shape.pp, mesh_.tp());
    store_.finalize();
    stage_->initialize(o.seed);
    optimizer_ = std::make_unique<DataParallelOptimizer>(o, mesh_.dp(), store_);
  }

  int dataParallelSize() const override { return mesh_.shape().dp; }
  int dataParallelRank() const override { return mesh_.coords().dp; }

  StepTally trainStep(std::span<const float> images, std::span<const uint8_t> labels, size_t batch, float lr) override {
    begin(images, labels, batch, o_.microBatches, true);
    const ddp::PipelineTiming t = ddp::runOneForwardOneBackward(mesh_.pp(), o_.microBatches, *stage_);
    wallSeconds_ += t.wallSeconds;
    computeSeconds_ += t.computeSeconds;
    optimizer_->finishGradientSync();
    optimizer_->step(lr);
    StepTally tally;
    if (reports()) tally = {stage_->lossSum(), static_cast<double>(stage_->correct()), static_cast<double>(batch)};
    return tally;
  }

  double evaluate(std::span<const float> images, std::span<const uint8_t> labels, size_t batch) override {
    const size_t m = std::min(o_.microBatches, batch);
    begin(images, labels, batch, m, false);
    ddp::runForwardOnly(mesh_.pp(), m, *stage_);
    return reports() ? static_cast<double>(stage_->correct()) : 0.0;
  }

  std::vector<float> fullParameters() override {
    // Each stage gathers its layers over its TP group, then every stage
    // broadcasts them over the pipeline group in turn.
    const std::vector<float> mine = stage_->fullStageParameters();
    std::vector<float> full;
    for (int p = 0; p < mesh_.shape().pp; ++p) {
      const ddp::StageLayers r = ddp::stageLayers(layers_.size() - 1, p, mesh_.shape().pp, mesh_.shape().tp > 1);
      size_t count = 0;
      for (size_t i = r.first; i < r.last; ++i) count += layers_[i + 1] * layers_[i] + layers_[i + 1];
      const size_t at = full.size();
      full.resize(at + count);
      if (p == mesh_.coords().pp) std::copy(mine.begin(), mine.end(), full.begin() + at);
      const loomResult_t res = loomBroadcast(full.data() + at, full.data() + at, count, loomFloat32, p, mesh_.pp(), nullptr);
      if (res != loomSuccess) throw std::runtime_error(std::string("broadcast of a stage's parameters failed: ") + loomGetLastError(mesh_.pp()));
    }
    return full;
  }
  void loadFullParameters(std::span<const float>) override { unsupported(); }
  std::vector<float> saveOptimizerState() override { unsupported(); }
  void loadOptimizerState(std::span<const float>) override { unsupported(); }
  bool supportsCheckpoints() const override { return false; }
  size_t optimizerStateBytes() const override { return optimizer_->stateBytes(); }
  size_t modelBytes() const override { return 2 * store_.totalSize() * sizeof(float) + optimizer_->stateBytes(); }
  std::string describe() const override {
    char text[120];
    std::snprintf(text, sizeof(text), " (1F1B, %zu micro-batches), ", o_.microBatches);
    return mesh_.shape().text() + text + optimizer_->describe();
  }

  std::string epochSummary() override {
    double sums[2] = {wallSeconds_, computeSeconds_};
    const loomResult_t r = loomAllReduce(sums, sums, 2, loomFloat64, loomSum, mesh_.world(), nullptr);
    if (r != loomSuccess) throw std::runtime_error(std::string("bubble statistics: ") + loomGetLastError(mesh_.world()));
    // The range over stages shows imbalance: the formula assumes equal stages.
    double mine = wallSeconds_ > 0 ? 1.0 - computeSeconds_ / wallSeconds_ : 0.0, low = mine, high = mine;
    if (loomAllReduce(&low, &low, 1, loomFloat64, loomMin, mesh_.world(), nullptr) != loomSuccess ||
        loomAllReduce(&high, &high, 1, loomFloat64, loomMax, mesh_.world(), nullptr) != loomSuccess)
      throw std::runtime_error(std::string("bubble statistics: ") + loomGetLastError(mesh_.world()));
    const double measured = sums[0] > 0 ? 1.0 - sums[1] / sums[0] : 0.0;
    char text[240];
    std::snprintf(text, sizeof(text),
                  "pipeline bubble %.1f%% measured (stages %.0f%%..%.0f%%) vs %.1f%% = (P-1)/(M+P-1); data-parallel ",
                  100.0 * measured, 100.0 * low, 100.0 * high,
                  100.0 * ddp::theoreticalBubble(mesh_.shape().pp, o_.microBatches));
    return text + optimizer_->commSummary();
  }
  void resetStats() override {
    wallSeconds_ = computeSeconds_ = 0;
    optimizer_->resetStats();
  }

 private:
  // One rank per replica counts the samples: the last stage's TP rank 0.
  bool reports() const { return stage_->lastStage() && mesh_.coords().tp == 0; }
  void begin(std::span<const float> images, std::span<const uint8_t> labels, size_t batch, size_t m, bool train) {
    stage_->beginStep(stage_->firstStage() ? images : std::span<const float>(),
                      stage_->lastStage() ? labels : std::span<const uint8_t>(), batch, m, train);
  }
  [[noreturn]] static void unsupported() { throw std::logic_error("checkpoints of pipeline layouts are not supported"); }

  const DemoOptions& o_;
  std::vector<size_t> layers_;
  ddp::ProcessMesh mesh_;
  ddp::ParameterStore store_;
  std::unique_ptr<ddp::PipelineMlpStage> stage_;
  std::unique_ptr<DataParallelOptimizer> optimizer_;
  double wallSeconds_ = 0, computeSeconds_ = 0;
};

}  // namespace

std::unique_ptr<DemoModel> makePipelineModel(const DemoOptions& o, loomComm_t world, const std::vector<size_t>& layers) {
  int size = 0;
  loomCommCount(world, &size);
  return std::make_unique<PipelineModel>(o, world, layers, ddp::MeshShape{size / (o.tp * o.pp), o.tp, o.pp});
}

}  // namespace loom::demo
