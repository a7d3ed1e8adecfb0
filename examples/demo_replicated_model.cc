// DDP over the world: every rank holds the whole Mlp; gradients are averaged
// by DistributedDataParallel's bucket all-reduces (or reduce-scattered by
// ZeRO-2), the optimizer replicated or ZeRO-1/2 sharded.
#include <memory>

#include "ddp/model/mlp.h"
#include "examples/demo_data_parallel.h"
#include "examples/demo_model.h"

namespace loom::demo {
namespace {

class ReplicatedModel : public DemoModel {
 public:
  ReplicatedModel(const DemoOptions& o, loomComm_t world, const std::vector<size_t>& layers) {
    loomCommUserRank(world, &rank_);
    loomCommCount(world, &size_);
    model_ = std::make_unique<ddp::Mlp>(store_, ddp::MlpOptions{layers, o.activation});
    store_.finalize();
    model_->initialize(o.seed);
    optimizer_ = std::make_unique<DataParallelOptimizer>(o, world, store_);
  }

  int dataParallelSize() const override { return size_; }
  int dataParallelRank() const override { return rank_; }

  StepTally trainStep(std::span<const float> images, std::span<const uint8_t> labels, size_t batch, float lr) override {
    StepTally t;
    store_.zeroGrads();
    model_->forward(images, batch);
    t.lossSum = static_cast<double>(model_->loss(labels)) * static_cast<double>(batch);
    t.correct = static_cast<double>(model_->correct(labels));
    t.samples = static_cast<double>(batch);
    model_->backward();
    optimizer_->finishGradientSync();
    optimizer_->step(lr);
    return t;
  }

  double evaluate(std::span<const float> images, std::span<const uint8_t> labels, size_t batch) override {
    model_->forward(images, batch);
    return static_cast<double>(model_->correct(labels));
  }

  std::vector<float> fullParameters() override { return {store_.values().begin(), store_.values().end()}; }
  void loadFullParameters(std::span<const float> values) override {
    std::copy(values.begin(), values.end(), store_.values().begin());
  }
  std::vector<float> saveOptimizerState() override { return optimizer_->saveState(); }
  void loadOptimizerState(std::span<const float> state) override { optimizer_->loadState(state); }
  size_t optimizerStateBytes() const override { return optimizer_->stateBytes(); }
  size_t modelBytes() const override { return 2 * store_.totalSize() * sizeof(float) + optimizer_->stateBytes(); }
  std::string describe() const override { return "DP" + std::to_string(size_) + ", " + optimizer_->describe(); }
  std::string epochSummary() override { return optimizer_->commSummary(); }
  void resetStats() override { optimizer_->resetStats(); }

 private:
  int rank_ = 0, size_ = 1;
  ddp::ParameterStore store_;
  std::unique_ptr<ddp::Mlp> model_;
  std::unique_ptr<DataParallelOptimizer> optimizer_;
};

}  // namespace

std::unique_ptr<DemoModel> makeReplicatedModel(const DemoOptions& o, loomComm_t world, const std::vector<size_t>& layers) {
  return std::make_unique<ReplicatedModel>(o, world, layers);
}

}  // namespace loom::demo
