// One pipeline stage of the demo's MLP: a contiguous run of its Dense layers
// over this stage's own ParameterStore, computing micro-batches for the 1F1B
// executor (pipeline_schedule.h).
//
// The whole MLP's layers (torch.nn.Linear layout, "fc<i>.weight/bias" with
// global indices) are split into `stages` runs as evenly as possible, the
// earlier stages taking the extra layers. Stage s's store holds its layers'
// parameters in Mlp's order, so the stages' stores concatenated in stage
// order are exactly an Mlp's store. A stage sends the activation (after the
// activation function) of its last layer; the last stage ends in the logits
// and the loss.
//
// Per step: beginStep(batch) (the first stage also gets the images, the last
// the labels), then the executor calls forward/backward per micro-batch.
// Micro-batch m is rows [m*B/M, (m+1)*B/M) of the batch; its loss gradient
// is weighted by rows/B, so after all M backwards the store's gradients are
// those of the mean loss over the whole batch, as Mlp's. Each parameter is
// marked ready (ParameterStore::markGradReady, DDP's hook) once, after the
// last micro-batch's backward. Not thread-safe.
//
// With a tensor-parallel group of T > 1 ranks (each stage's layers split as
// TensorParallelMlp splits the whole MLP: column/row pairs, the classifier
// replicated) stage boundaries fall between pairs, so every activation
// crossing stages is whole and each TP rank exchanges with the same TP rank
// of the neighbouring stages (the pipeline group of ProcessMesh).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "ddp/model/activation.h"
#include "ddp/model/dense.h"
#include "ddp/model/mlp.h"
#include "ddp/parallel/pipeline_schedule.h"
#include "ddp/parallel/tensor_parallel_dense.h"
#include "ddp/parameter_store.h"

namespace loom::ddp {

// Layers [first, last) of stage `stage` for an MLP of `layers` Dense layers.
// pairs: split between column/row pairs only (units of 2 hidden layers and
// the classifier), as tensor parallelism needs.
struct StageLayers {
  size_t first = 0, last = 0;
};
StageLayers stageLayers(size_t layers, int stage, int stages, bool pairs = false);

class PipelineMlpStage : public PipelineCompute {
 public:
  // Registers this stage's parameters in `store` (not finalized yet; it must
  // outlive the stage). std::invalid_argument if there are more stages than layers.
  // tensorParallel: NULL, or the TP group this stage's layers are split over.
  PipelineMlpStage(ParameterStore& store, MlpOptions options, int stage, int stages,
                   loomComm_t tensorParallel = nullptr);

  // After store.finalize(): the values Mlp::initialize(seed) gives these layers.
  void initialize(uint64_t seed);

  // Starts a step (or an evaluation pass) over `batch` rows in `microBatches`
  // micro-batches (1 <= M <= batch). images: batch x input width, first stage
  // only (else empty); labels: last stage only (else empty). train=false:
  // forward only, the last stage counts correct rows but computes no gradient.
  void beginStep(std::span<const float> images, std::span<const uint8_t> labels, size_t batch, size_t microBatches,
                 bool train);

  // PipelineCompute.
  std::span<float> inputBuffer(size_t m) override;
  std::span<const float> forward(size_t m) override;
  std::span<float> gradOutputBuffer(size_t m) override;
  std::span<const float> backward(size_t m) override;

  // Last stage, after the step: sum over rows of the loss, and correct rows.
  double lossSum() const { return lossSum_; }
  size_t correct() const { return correct_; }

  // This stage's layers, unsharded, in Mlp's layout (all-gathers over the TP
  // group: collective there).
  std::vector<float> fullStageParameters();

  bool firstStage() const { return stage_ == 0; }
  bool lastStage() const { return stage_ + 1 == stages_; }
  StageLayers layers() const { return range_; }

 private:
  struct Cached {  // one micro-batch's activations
    std::vector<float> input;
    std::vector<std::vector<float>> pre, post;  // per local layer
    std::vector<float> gradOutput, gradScratch[2];
  };
  enum class Kind { kDense, kColumn, kRow };  // kDense: whole (no TP, or the replicated classifier)
  size_t rowsOf(size_t m) const;
  size_t firstRowOf(size_t m) const;
  DenseShape fullShapeOf(size_t local, size_t rows) const;
  size_t inLocal(size_t local) const;   // input width this rank sees
  size_t outLocal(size_t local) const;  // output width this rank produces

  ParameterStore& store_;
  MlpOptions options_;
  int stage_, stages_;
  StageLayers range_;
  std::vector<size_t> weight_, bias_;  // parameter indices per local layer
  std::vector<Kind> kind_;
  TensorParallelGroup tp_;

  std::span<const float> images_;
  std::span<const uint8_t> labels_;
  size_t batch_ = 0, microBatches_ = 0, backwardsDone_ = 0;
  bool train_ = true;
  std::vector<Cached> cache_;
  std::vector<float> gradLogits_;
  double lossSum_ = 0;
  size_t correct_ = 0;
};

}  // namespace loom::ddp
