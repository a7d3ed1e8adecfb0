// TP x DP: TensorParallelMlp inside each tensor-parallel group (ProcessMesh),
// DDP (+ ZeRO-1/2) over the data-parallel group of ranks holding the same shards.
#include <memory>
#include <stdexcept>

#include "ddp/parallel/process_mesh.h"
#include "ddp/parallel/tensor_parallel_mlp.h"
#include "examples/demo_data_parallel.h"
#include "examples/demo_model.h"

namespace loom::demo {
namespace {

class TensorParallelModel : public DemoModel {
 public:
  TensorParallelModel(const DemoOptions& o, loomComm_t world, const std::vector<size_t>& layers, ddp::MeshShape shape)
      : mesh_(world, shape) {
    model_ = std::make_unique<ddp::TensorParallelMlp>(store_, ddp::MlpOptions{layers, o.activation}, mesh_.tp());
    store_.finalize();
    model_->initialize(o.seed);
    optimizer_ = std::make_unique<DataParallelOptimizer>(o, mesh_.dp(), store_);
  }

  int dataParallelSize() const override { return mesh_.shape().dp; }
  int dataParallelRank() const override { return mesh_.coords().dp; }
  bool reports() const { return mesh_.coords().tp == 0; }

  StepTally trainStep(std::span<const float> images, std::span<const uint8_t> labels, size_t batch, float lr) override {
    StepTally t;
    store_.zeroGrads();
    model_->forward(images, batch);
    const float loss = model_->loss(labels);
    if (reports()) {
      t.lossSum = static_cast<double>(loss) * static_cast<double>(batch);
      t.correct = static_cast<double>(model_->correct(labels));
      t.samples = static_cast<double>(batch);
    }
    model_->backward();
    optimizer_->finishGradientSync();
    optimizer_->step(lr);
    return t;
  }

  double evaluate(std::span<const float> images, std::span<const uint8_t> labels, size_t batch) override {
    model_->forward(images, batch);
    return reports() ? static_cast<double>(model_->correct(labels)) : 0.0;
  }

  std::vector<float> fullParameters() override { return model_->fullParameters(); }
  void loadFullParameters(std::span<const float>) override { unsupported(); }
  std::vector<float> saveOptimizerState() override { unsupported(); }
  void loadOptimizerState(std::span<const float>) override { unsupported(); }
  bool supportsCheckpoints() const override { return false; }
  size_t optimizerStateBytes() const override { return optimizer_->stateBytes(); }
  size_t modelBytes() const override { return 2 * store_.totalSize() * sizeof(float) + optimizer_->stateBytes(); }
  std::string describe() const override {
    return mesh_.shape().text() + " (Megatron column/row pairs, classifier replicated), " + optimizer_->describe();
  }
  std::string epochSummary() override { return "data-parallel " + optimizer_->commSummary(); }
  void resetStats() override { optimizer_->resetStats(); }

 private:
  [[noreturn]] static void unsupported() {
    throw std::logic_error("checkpoints of tensor-parallel layouts are not supported");
  }
  ddp::ProcessMesh mesh_;
  ddp::ParameterStore store_;
  std::unique_ptr<ddp::TensorParallelMlp> model_;
  std::unique_ptr<DataParallelOptimizer> optimizer_;
};

}  // namespace

std::unique_ptr<DemoModel> makeTensorParallelModel(const DemoOptions& o, loomComm_t world, const std::vector<size_t>& layers) {
  int size = 0;
  loomCommCount(world, &size);
  return std::make_unique<TensorParallelModel>(o, world, layers, ddp::MeshShape{size / o.tp, o.tp, 1});
}

}  // namespace loom::demo
