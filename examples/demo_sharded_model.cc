// ZeRO-3 over the world: FullyShardedMlp holds 1/N of every layer's
// parameters, gradients and optimizer state on each rank.
#include <cstdio>
#include <memory>

#include "ddp/distributed/fully_sharded_mlp.h"
#include "examples/demo_data_parallel.h"
#include "examples/demo_model.h"

namespace loom::demo {
namespace {

class ShardedModel : public DemoModel {
 public:
  ShardedModel(const DemoOptions& o, loomComm_t world, const std::vector<size_t>& layers) {
    loomCommUserRank(world, &rank_);
    loomCommCount(world, &size_);
    model_ = std::make_unique<ddp::FullyShardedMlp>(world, ddp::MlpOptions{layers, o.activation}, makeDemoOptimizer(o), o.seed);
  }

  int dataParallelSize() const override { return size_; }
  int dataParallelRank() const override { return rank_; }

  StepTally trainStep(std::span<const float> images, std::span<const uint8_t> labels, size_t batch, float lr) override {
    StepTally t;
    model_->forward(images, batch);
    t.lossSum = static_cast<double>(model_->loss(labels)) * static_cast<double>(batch);
    t.correct = static_cast<double>(model_->correct(labels));
    t.samples = static_cast<double>(batch);
    model_->backward();
    model_->inner().setLearningRate(lr);
    model_->step();
    return t;
  }

  double evaluate(std::span<const float> images, std::span<const uint8_t> labels, size_t batch) override {
    model_->forward(images, batch);
    return static_cast<double>(model_->correct(labels));
  }

  std::vector<float> fullParameters() override { return model_->gatherFullParameters(); }
  void loadFullParameters(std::span<const float> values) override { model_->loadFullParameters(values); }
  std::vector<float> saveOptimizerState() override { return model_->saveState(); }
  void loadOptimizerState(std::span<const float> state) override { model_->loadState(state); }
  size_t optimizerStateBytes() const override { return model_->inner().stateBytes(); }
  size_t modelBytes() const override { return model_->memoryUse().total(); }
  std::string describe() const override {
    const ddp::FullyShardedMlp::MemoryUse m = model_->memoryUse();
    char text[200];
    std::snprintf(text, sizeof(text), "DP%d, ZeRO-3 (fully sharded: %.1f KiB of parameter shards per rank of %.1f KiB, "
                  "gather window %.1f KiB)", size_, m.parameterShards / 1024.0,
                  model_->totalParameters() * sizeof(float) / 1024.0, m.gatherWindow / 1024.0);
    return text;
  }
  std::string epochSummary() override { return "per-layer all-gather (prefetched) and reduce-scatter"; }

 private:
  int rank_ = 0, size_ = 1;
  std::unique_ptr<ddp::FullyShardedMlp> model_;
};

}  // namespace

std::unique_ptr<DemoModel> makeShardedModel(const DemoOptions& o, loomComm_t world, const std::vector<size_t>& layers) {
  return std::make_unique<ShardedModel>(o, world, layers);
}

}  // namespace loom::demo
