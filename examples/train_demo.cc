// train_demo: data-parallel training of an MLP on Fashion-MNIST over Loom.
//
//   loomrun -n 4 train_demo [options]     (options: train_demo --help)
//
// Every rank loads the data set and builds the model in the layout the
// options ask for (demo_model.h): replicas kept identical by averaged
// gradients (DDP) or sharded optimizer steps (ZeRO-1/2), fully sharded
// (ZeRO-3), tensor-parallel (--tp) or pipelined (--pp) within each
// data-parallel replica. Each replica trains on its DistributedSampler shard
// of every global batch. Rank 0 prints one line per epoch:
// train loss and accuracy, test accuracy, throughput and the layout's
// communication figures (DDP's hidden share, the pipeline bubble).
//
// Checkpoints (--checkpoint-dir): every K steps rank 0 atomically writes the
// step, the sampler position (epoch, batch within it), the parameters and the
// full optimizer state. A run started with a checkpoint in the directory
// (such as the one loomrun --max-restarts starts after a failure) resumes
// from the newest valid one and follows exactly the trajectory of an
// uninterrupted run: the batches, the learning rate and the optimizer state
// depend only on the step, and with LOOM_DETERMINISTIC=1 so do the sums.
#include <cblas.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ddp/blas_runtime.h"
#include "ddp/checkpoint/checkpoint_directory.h"
#include "ddp/data/distributed_sampler.h"
#include "ddp/data/mnist_dataset.h"
#include "ddp/model/mlp.h"
#include "loom/loom.h"
#include "examples/demo_model.h"
#include "examples/train_demo_options.h"

namespace loom::demo {
namespace {

using Clock = std::chrono::steady_clock;
using ddp::CheckpointState;

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

void check(loomResult_t r, loomComm_t comm, const char* what) {
  if (r == loomSuccess) return;
  std::string detail = comm != nullptr ? loomGetLastError(comm) : "";
  throw std::runtime_error(std::string(what) + " failed: " + loomGetErrorString(r) +
                           (detail.empty() ? "" : " (" + detail + ")"));
}

// The job's communicator (from the launcher's environment; a single rank without it).
struct Job {
  loomComm_t comm = nullptr;
  int rank = 0;
  int size = 1;
  int restartCount = 0;

  // chunkBytes: loomConfig_t.chunkBytes of the communicator (0: the environment's).
  explicit Job(size_t chunkBytes) {
    if (const char* r = std::getenv("LOOM_RESTART_COUNT")) restartCount = std::atoi(r);
    loomUniqueId id;
    // Any launcher (loomrun, torchrun, mpirun, srun) makes one job of its
    // processes; without one, this process is the whole job.
    int launched = 0;
    check(loomGetLaunchEnv(nullptr, &launched, nullptr, nullptr), nullptr, "loomGetLaunchEnv");
    if (launched > 0) {
      check(loomGetUniqueIdFromEnv(&id, &rank, &size), nullptr, "loomGetUniqueIdFromEnv");
    } else {
      check(loomGetUniqueId(&id), nullptr, "loomGetUniqueId");
    }
    loomConfig_t config = LOOM_CONFIG_INITIALIZER;
    config.chunkBytes = chunkBytes;
    check(loomCommInitRankConfig(&comm, size, id, rank, &config), nullptr, "loomCommInitRankConfig");
  }
  ~Job() {
    if (comm != nullptr) loomCommDestroy(comm);
  }
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  // Blocking in-place sum over ranks.
  void sum(std::vector<double>& values) const {
    check(loomAllReduce(values.data(), values.data(), values.size(), loomFloat64, loomSum, comm, nullptr),
          comm, "loomAllReduce (metrics)");
  }
  template <class T>
  void broadcast(T* data, size_t count, loomDataType_t type) const {
    check(loomBroadcast(data, data, count, type, 0, comm, nullptr), comm, "loomBroadcast");
  }
};

// Where training stands: the next step's epoch and batch within it.
struct Position {
  uint64_t step = 0;  // optimizer steps done
  uint64_t epoch = 0;
  uint64_t stepInEpoch = 0;
};

float learningRate(const DemoOptions& o, uint64_t step, uint64_t totalSteps) {
  if (o.schedule == "constant" || totalSteps == 0) return o.lr;
  // Cosine annealing to 0 (torch's CosineAnnealingLR with T_max = the run),
  // evaluated for the step about to be taken.
  double progress = static_cast<double>(step) / static_cast<double>(totalSteps);
  return static_cast<float>(0.5 * o.lr * (1.0 + std::cos(M_PI * progress)));
}

class Trainer {
 public:
  Trainer(const DemoOptions& o, Job& job)
      : o_(o), job_(job), ckpts_(o.checkpointDir.empty() ? std::nullopt
                                                        : std::optional<ddp::CheckpointDirectory>(o.checkpointDir)) {
    std::string dir = o.dataDir.empty() ? ddp::kDefaultFashionMnistDir : o.dataDir;
    train_ = ddp::MnistDataset::loadSplit(dir, "train");
    test_ = ddp::MnistDataset::loadSplit(dir, "t10k");
    if (o.trainLimit != 0) train_.truncate(o.trainLimit);
    std::vector<size_t> layers{train_.pixelsPerImage()};
    layers.insert(layers.end(), o.hidden.begin(), o.hidden.end());
    layers.push_back(ddp::kMnistClasses);
    model_ = makeDemoModel(o, job.comm, layers);
    if (ckpts_ && !model_->supportsCheckpoints()) {
      throw std::invalid_argument("--checkpoint-dir is supported with data parallelism and ZeRO-1/2/3, not with --tp or --pp");
    }
    const size_t replicas = static_cast<size_t>(model_->dataParallelSize());
    if (o.globalBatch % replicas != 0) {
      throw std::invalid_argument("--batch " + std::to_string(o.globalBatch) + " is not a multiple of the " +
                                  std::to_string(replicas) + " data-parallel replicas");
    }
    localBatch_ = o.globalBatch / replicas;
    sampler_ = std::make_unique<ddp::DistributedSampler>(
        ddp::SamplerOptions{train_.size(), model_->dataParallelSize(), model_->dataParallelRank(), true, o.seed, false});
    stepsPerEpoch_ = (sampler_->numSamples() + localBatch_ - 1) / localBatch_;
    describe(layers);
  }

  void run() {
    resume();
    const uint64_t totalSteps = stepsPerEpoch_ * o_.epochs;
    for (uint64_t epoch = pos_.epoch; epoch < o_.epochs; ++epoch) {
      sampler_->setEpoch(epoch);
      std::vector<size_t> order = sampler_->indices();
      uint64_t firstStep = pos_.stepInEpoch;
      EpochMetrics m;
      auto start = Clock::now();
      model_->resetStats();
      for (uint64_t s = firstStep; s < stepsPerEpoch_; ++s) {
        maybeFailOnPurpose(pos_.step + 1);
        size_t begin = s * localBatch_;
        size_t count = std::min(localBatch_, order.size() - begin);
        trainStep(std::span<const size_t>(order).subspan(begin, count), learningRate(o_, pos_.step, totalSteps), m);
        pos_ = {pos_.step + 1, s + 1 == stepsPerEpoch_ ? epoch + 1 : epoch, (s + 1) % stepsPerEpoch_};
        if (ckpts_ && pos_.step % o_.checkpointEvery == 0) saveCheckpoint();
      }
      double seconds = secondsSince(start);
      report(epoch, firstStep, m, seconds);
    }
    finish();
  }

 private:
  struct EpochMetrics {
    double lossSum = 0, correct = 0, samples = 0;
  };

  void describe(const std::vector<size_t>& layers) {
    size_t parameters = 0;
    for (size_t i = 0; i + 1 < layers.size(); ++i) parameters += layers[i + 1] * layers[i] + layers[i + 1];
    if (job_.rank != 0) return;
    std::string shape;
    for (size_t i = 0; i < layers.size(); ++i) shape += (i ? "-" : "") + std::to_string(layers[i]);
    std::printf("train_demo: %d rank%s, MLP %s (%s, %zu parameters), %s lr %g (%s), global batch %zu "
                "(%zu per replica), %zu epochs x %zu steps\n",
                job_.size, job_.size == 1 ? "" : "s", shape.c_str(),
                o_.activation == ddp::Activation::kGelu ? "GELU" : "ReLU", parameters, o_.optimizer.c_str(),
                o_.lr, o_.schedule.c_str(), o_.globalBatch, localBatch_, o_.epochs, stepsPerEpoch_);
    std::printf("train_demo: layout %s\n", model_->describe().c_str());
    const size_t chunk = o_.chunkBytes();
    std::printf("train_demo: OpenBLAS core %s, 1 thread per rank; Loom chunk %s\n", ddp::blasCoreName(),
                chunk == 0 ? "LOOM_CHUNK_SIZE or Loom's default (--chunk-mb 0)"
                           : (std::to_string(chunk >> 10) + " KiB (--chunk-mb)").c_str());
    std::printf("train_demo: %zu training / %zu test images, normalized with mean %.4f std %.4f\n",
                train_.size(), test_.size(), train_.normalization().mean, train_.normalization().std);
    std::fflush(stdout);
  }

  void trainStep(std::span<const size_t> items, float lr, EpochMetrics& m) {
    images_.resize(items.size() * train_.pixelsPerImage());
    labels_.resize(items.size());
    train_.gather(items, images_, labels_);
    const StepTally t = model_->trainStep(images_, labels_, items.size(), lr);
    m.lossSum += t.lossSum;
    m.correct += t.correct;
    m.samples += t.samples;
  }

  // The test accuracy of the current parameters, each data-parallel replica
  // scoring its own contiguous slice of the test set in the same number of
  // chunks (evaluation is collective in the sharded layouts).
  double testAccuracy() {
    const size_t n = test_.size();
    const size_t replicas = static_cast<size_t>(model_->dataParallelSize());
    const size_t replica = static_cast<size_t>(model_->dataParallelRank());
    const size_t begin = n * replica / replicas, end = n * (replica + 1) / replicas;
    constexpr size_t kChunk = 500;
    const size_t chunks = (n / replicas + 1 + kChunk - 1) / kChunk;  // enough for the largest slice
    double correct = 0;
    std::vector<size_t> items;
    for (size_t c = 0; c < chunks; ++c) {
      const size_t from = begin + (end - begin) * c / chunks, to = begin + (end - begin) * (c + 1) / chunks;
      if (from == to) continue;  // only when a slice is shorter than the chunk count: same on every rank
      items.clear();
      for (size_t i = from; i < to; ++i) items.push_back(i);
      images_.resize(items.size() * test_.pixelsPerImage());
      labels_.resize(items.size());
      test_.gather(items, images_, labels_);
      correct += model_->evaluate(images_, labels_, items.size());
    }
    std::vector<double> total{correct};
    job_.sum(total);
    return total[0] / static_cast<double>(n);
  }

  void report(uint64_t epoch, uint64_t firstStep, const EpochMetrics& local, double seconds) {
    std::vector<double> totals{local.lossSum, local.correct, local.samples, seconds,
                               static_cast<double>(model_->optimizerStateBytes()), static_cast<double>(model_->modelBytes())};
    job_.sum(totals);
    double accuracy = testAccuracy();
    double trainSeconds = totals[3] / job_.size;  // mean over ranks
    const std::string comm = model_->epochSummary();  // collective
    if (job_.rank != 0) return;
    std::string partial = firstStep == 0 ? "" : " (resumed at batch " + std::to_string(firstStep) + ")";
    std::printf("epoch %2llu/%zu  train loss %.4f  train acc %.2f%%  test acc %.2f%%  %.0f samples/s  %s%s\n",
                static_cast<unsigned long long>(epoch + 1), o_.epochs, totals[0] / totals[2],
                100.0 * totals[1] / totals[2], 100.0 * accuracy, totals[2] / trainSeconds, comm.c_str(),
                partial.c_str());
    if (!reportedMemory_) {
      reportedMemory_ = true;
      std::printf("optimizer state: %.1f KiB on rank 0, %.1f KiB summed over ranks%s; parameters + gradients + "
                  "optimizer state: %.1f KiB on rank 0, %.1f KiB summed\n",
                  static_cast<double>(model_->optimizerStateBytes()) / 1024.0, totals[4] / 1024.0,
                  o_.zero == 0 && o_.tp == 1 && o_.pp == 1 ? " (replicated)" : " (sharded)",
                  static_cast<double>(model_->modelBytes()) / 1024.0, totals[5] / 1024.0);
    }
    lastTestAccuracy_ = accuracy;
    std::fflush(stdout);
  }

  // --fail-at-step: rank 1 vanishes without any cleanup, as a crashed process
  // would, on the first attempt only (so the restarted job can finish).
  void maybeFailOnPurpose(uint64_t nextStep) {
    if (o_.failAtStep < 0 || static_cast<uint64_t>(o_.failAtStep) != nextStep) return;
    if (job_.rank != 1 || job_.restartCount != 0) return;
    std::fprintf(stderr, "train_demo: rank 1 failing on purpose before step %llu (--fail-at-step)\n",
                 static_cast<unsigned long long>(nextStep));
    std::fflush(stderr);
    _exit(3);
  }

  void saveCheckpoint() {
    std::vector<float> state = model_->saveOptimizerState();  // collective under ZeRO
    std::vector<float> parameters = model_->fullParameters();  // collective under ZeRO-3
    if (job_.rank != 0) return;
    CheckpointState c;
    c.step = pos_.step;
    c.epoch = pos_.epoch;
    c.stepInEpoch = pos_.stepInEpoch;
    c.samplerSeed = o_.seed;
    c.config = o_.trajectoryKey(job_.size);
    c.parameters = std::move(parameters);
    c.optimizerState = std::move(state);
    ckpts_->save(c);
  }

  // Rank 0 picks the newest valid checkpoint and tells the others its step,
  // so every rank loads the same one.
  void resume() {
    if (!ckpts_) return;
    int64_t step = -1;
    if (job_.rank == 0) {
      std::vector<std::string> skipped;
      std::optional<ddp::LoadedCheckpoint> latest = ckpts_->loadLatest(&skipped);
      for (const std::string& s : skipped) std::fprintf(stderr, "train_demo: skipping checkpoint %s\n", s.c_str());
      if (latest) step = static_cast<int64_t>(latest->state.step);
    }
    job_.broadcast(&step, 1, loomInt64);
    if (step < 0) {
      if (job_.rank == 0 && job_.restartCount > 0) {
        std::printf("train_demo: attempt %d found no checkpoint in %s; starting over\n", job_.restartCount,
                    o_.checkpointDir.c_str());
      }
      return;
    }
    std::string path = ckpts_->pathForStep(static_cast<uint64_t>(step));
    CheckpointState c = ddp::readCheckpointFile(path);
    std::string expected = o_.trajectoryKey(job_.size);
    int writtenBy = 0;
    if (!sameTrajectory(c.config, expected, &writtenBy)) {
      throw std::runtime_error(path + ": written by a run configured as '" + c.config + "', this run is '" +
                               expected + "'; use another --checkpoint-dir");
    }
    const size_t modelSize = model_->fullParameters().size();  // collective under ZeRO-3, as on every rank
    if (c.parameters.size() != modelSize || c.stepInEpoch >= stepsPerEpoch_) {
      throw std::runtime_error(path + ": holds " + std::to_string(c.parameters.size()) +
                               " parameters and batch " + std::to_string(c.stepInEpoch) + "; the model has " +
                               std::to_string(modelSize) + " and epochs of " +
                               std::to_string(stepsPerEpoch_) + " batches");
    }
    model_->loadFullParameters(c.parameters);
    model_->loadOptimizerState(c.optimizerState);
    pos_ = {c.step, c.epoch, c.stepInEpoch};
    if (job_.rank == 0 && writtenBy != 0 && writtenBy != job_.size) {
      std::printf("train_demo: the checkpoint was written by %d ranks; continuing on %d (sampler and shards re-partitioned)\n",
                  writtenBy, job_.size);
    }
    if (job_.rank == 0) {
      std::printf("train_demo: resumed from %s: step %llu, epoch %llu, batch %llu (attempt %d)\n", path.c_str(),
                  static_cast<unsigned long long>(c.step), static_cast<unsigned long long>(c.epoch + 1),
                  static_cast<unsigned long long>(c.stepInEpoch), job_.restartCount);
      std::fflush(stdout);
    }
  }

  void finish() {
    const std::vector<float> full = model_->fullParameters();  // collective in the sharded layouts
    if (job_.rank != 0) return;
    std::span<const float> values = full;
    uLong crc = crc32(0L, reinterpret_cast<const Bytef*>(values.data()),
                      static_cast<uInt>(values.size_bytes()));
    std::printf("train_demo: done after %llu steps; final test accuracy %.2f%%; parameters crc32 %08lx\n",
                static_cast<unsigned long long>(pos_.step), 100.0 * lastTestAccuracy_, crc);
    if (!o_.saveParams.empty()) {
      std::ofstream out(o_.saveParams, std::ios::binary | std::ios::trunc);
      out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size_bytes()));
      if (!out) throw std::runtime_error(o_.saveParams + ": cannot write the parameters");
    }
    std::fflush(stdout);
  }

  const DemoOptions& o_;
  Job& job_;
  std::optional<ddp::CheckpointDirectory> ckpts_;
  ddp::MnistDataset train_, test_;
  std::unique_ptr<ddp::DistributedSampler> sampler_;
  size_t localBatch_ = 0;
  uint64_t stepsPerEpoch_ = 0;
  std::unique_ptr<DemoModel> model_;
  Position pos_;
  std::vector<float> images_;
  std::vector<uint8_t> labels_;
  double lastTestAccuracy_ = 0;
  bool reportedMemory_ = false;
};

}  // namespace
}  // namespace loom::demo

int main(int argc, char** argv) {
  using namespace loom::demo;
  // One OpenBLAS thread per rank, and its fast kernels where it misdetects the CPU.
  loom::ddp::configureBlasForRanks(argv);
  DemoOptions options;
  try {
    options = parseDemoOptions(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_demo: %s\n", e.what());
    return 2;
  }
  if (options.help) {
    std::fputs(demoUsage().c_str(), stdout);
    return 0;
  }
  if (options.version) {
    std::printf("train_demo (Loom) %s\n", LOOM_TOOL_VERSION);
    return 0;
  }
  int rank = -1;
  try {
    Job job(options.chunkBytes());
    rank = job.rank;
    Trainer trainer(options, job);
    trainer.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_demo: rank %d: %s\n", rank, e.what());
    return 1;
  }
  return 0;
}
