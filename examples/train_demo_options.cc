#include "examples/train_demo_options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

namespace loom::demo {
namespace {

const std::vector<size_t> kLargeModelHidden = {2048, 2048, 2048, 2048};
constexpr size_t kLargeModelBatch = 2048;

[[noreturn]] void bad(const std::string& option, const std::string& problem) {
  throw std::invalid_argument("option '" + option + "' " + problem);
}

uint64_t parseUnsigned(const std::string& option, const std::string& text, uint64_t lo, uint64_t hi) {
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || text[0] == '-' || *end != '\0' || errno != 0) {
    bad(option, "expects a non-negative integer, got '" + text + "'");
  }
  if (v < lo || v > hi) {
    bad(option, "value " + text + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return v;
}

double parsePositive(const std::string& option, const std::string& text) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(v) || v <= 0) {
    bad(option, "expects a positive number, got '" + text + "'");
  }
  return v;
}

double parseNonNegative(const std::string& option, const std::string& text) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(v) || v < 0) {
    bad(option, "expects a number >= 0, got '" + text + "'");
  }
  return v;
}

std::vector<size_t> parseWidths(const std::string& option, const std::string& text) {
  std::vector<size_t> widths;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) widths.push_back(parseUnsigned(option, item, 1, 1u << 16));
  if (widths.empty()) bad(option, "expects widths such as 256,256");
  return widths;
}

}  // namespace

const char* hookName(ddp::CommHook hook) {
  switch (hook) {
    case ddp::CommHook::kFp16Compress: return "fp16";
    case ddp::CommHook::kBf16Compress: return "bf16";
    default: return "none";
  }
}

std::string DemoOptions::trajectoryKey(int worldSize) const {
  std::ostringstream key;
  key << "hidden=";
  for (size_t i = 0; i < hidden.size(); ++i) key << (i ? "," : "") << hidden[i];
  key << " act=" << (activation == ddp::Activation::kGelu ? "gelu" : "relu") << " opt=" << optimizer
      << " lr=" << lr << " momentum=" << momentum << " wd=" << weightDecay << " schedule=" << schedule
      << " epochs=" << epochs << " batch=" << globalBatch << " world=" << worldSize << " zero=" << zero
      << " hook=" << hookName(hook) << " seed=" << seed << " train-limit=" << trainLimit;
  if (tp > 1 || pp > 1) key << " tp=" << tp << " pp=" << pp << " micro-batches=" << microBatches;
  return key.str();
}

size_t DemoOptions::chunkBytes() const {
  return static_cast<size_t>(std::llround(chunkMb * (1 << 20))) / 64 * 64;
}

bool sameTrajectory(const std::string& a, const std::string& b, int* worldOfA) {
  auto strip = [](std::string key, int* world) {
    const size_t at = key.find(" world=");
    if (world) *world = 0;
    if (at == std::string::npos) return key;
    const size_t end = key.find(' ', at + 1);
    if (world) *world = std::atoi(key.c_str() + at + 7);
    return key.erase(at, (end == std::string::npos ? key.size() : end) - at);
  };
  return strip(a, worldOfA) == strip(b, nullptr);
}

DemoOptions parseDemoOptions(int argc, char** argv) {
  DemoOptions o;
  bool hiddenGiven = false, batchGiven = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    size_t eq = arg.find('=');
    bool inlineValue = arg.starts_with("--") && eq != std::string::npos;
    if (inlineValue) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    }
    auto next = [&]() -> std::string {
      if (inlineValue) return value;
      if (i + 1 >= argc) bad(arg, "needs a value");
      return argv[++i];
    };
    if (arg == "-h" || arg == "--help") o.help = true;
    else if (arg == "--version") o.version = true;
    else if (arg == "--epochs") o.epochs = parseUnsigned(arg, next(), 1, 100000);
    else if (arg == "--batch") {
      o.globalBatch = parseUnsigned(arg, next(), 1, 1u << 20);
      batchGiven = true;
    } else if (arg == "--model") {
      o.model = next();
      if (o.model != "small" && o.model != "large") bad(arg, "expects small or large, got '" + o.model + "'");
    }
    else if (arg == "--lr") o.lr = static_cast<float>(parsePositive(arg, next()));
    else if (arg == "--momentum") o.momentum = static_cast<float>(std::strtod(next().c_str(), nullptr));
    else if (arg == "--weight-decay") o.weightDecay = static_cast<float>(std::strtod(next().c_str(), nullptr));
    else if (arg == "--optimizer") {
      o.optimizer = next();
      if (o.optimizer != "sgd" && o.optimizer != "adamw") bad(arg, "expects sgd or adamw, got '" + o.optimizer + "'");
    } else if (arg == "--schedule") {
      o.schedule = next();
      if (o.schedule != "cosine" && o.schedule != "constant") bad(arg, "expects cosine or constant");
    } else if (arg == "--hidden") {
      o.hidden = parseWidths(arg, next());
      hiddenGiven = true;
    }
    else if (arg == "--gelu") o.activation = ddp::Activation::kGelu;
    else if (arg == "--zero") o.zero = static_cast<int>(parseUnsigned(arg, next(), 0, 3));
    else if (arg == "--tp") o.tp = static_cast<int>(parseUnsigned(arg, next(), 1, 1024));
    else if (arg == "--pp") o.pp = static_cast<int>(parseUnsigned(arg, next(), 1, 1024));
    else if (arg == "--micro-batches") o.microBatches = parseUnsigned(arg, next(), 1, 1u << 20);
    else if (arg == "--bucket-cap-mb") o.bucketCapMb = parsePositive(arg, next());
    else if (arg == "--last-bucket-cap-mb") o.lastBucketCapMb = parseNonNegative(arg, next());
    else if (arg == "--close-after-mb") o.closeAfterMb = parseNonNegative(arg, next());
    else if (arg == "--chunk-mb") {
      // loomConfig_t.chunkBytes's range: 4 KiB to 64 MiB (whole cache lines).
      o.chunkMb = parseNonNegative(arg, next());
      if (o.chunkMb != 0 && (o.chunkMb < 1.0 / 256 || o.chunkMb > 64))
        bad(arg, "expects 0 (Loom's default) or 1/256 (4 KiB) to 64 MiB, got " + std::to_string(o.chunkMb));
    }
    else if (arg == "--no-overlap") o.overlap = false;
    else if (arg == "--fp16-hook") o.hook = ddp::CommHook::kFp16Compress;
    else if (arg == "--bf16-hook") o.hook = ddp::CommHook::kBf16Compress;
    else if (arg == "--checkpoint-dir") o.checkpointDir = next();
    else if (arg == "--checkpoint-every") o.checkpointEvery = parseUnsigned(arg, next(), 1, 1ull << 40);
    else if (arg == "--data-dir") o.dataDir = next();
    else if (arg == "--train-limit") o.trainLimit = parseUnsigned(arg, next(), 1, 1ull << 40);
    else if (arg == "--save-params") o.saveParams = next();
    else if (arg == "--fail-at-step") o.failAtStep = static_cast<int64_t>(parseUnsigned(arg, next(), 1, 1ull << 40));
    else if (arg == "--seed") o.seed = parseUnsigned(arg, next(), 0, UINT64_MAX);
    else bad(arg, "is unknown (see --help)");
  }
  if (o.model == "large") {
    // Enough backward per step to hide DDP's all-reduces: four 2048-wide
    // layers (14 M parameters, 54 MiB of gradients) on 512 rows per rank at
    // 4 ranks. The default model's backward is shorter than one all-reduce.
    if (!hiddenGiven) o.hidden = kLargeModelHidden;
    if (!batchGiven) o.globalBatch = kLargeModelBatch;
  }
  if (o.lr == 0.0f) o.lr = o.optimizer == "adamw" ? 1e-3f : 0.05f;
  if (o.weightDecay < 0.0f) o.weightDecay = o.optimizer == "adamw" ? 0.01f : 0.0f;
  if (o.zero != 0 && o.hook != ddp::CommHook::kNone) {
    throw std::invalid_argument("options '--zero' and '--fp16-hook/--bf16-hook' do not combine: "
                                "ZeRO reduces gradients itself (reduce-scatter), without DDP's hooks");
  }
  return o;
}

std::string demoUsage() {
  return R"(Usage: loomrun -n N train_demo [options]

Trains an MLP on Fashion-MNIST with data-parallel SGD/AdamW over Loom (DDP with
bucketed, overlapped gradient all-reduce, or ZeRO), printing one line per epoch.

  --epochs E            epochs (default 8)
  --batch B             global batch, a multiple of N (default 128)
  --optimizer sgd|adamw (default adamw)   --lr X (1e-3 adamw, 0.05 sgd)
  --momentum X          sgd momentum (0.9)   --weight-decay X (0.01 adamw, 0 sgd)
  --schedule cosine|constant   learning-rate schedule over the run (cosine)
  --hidden W1,W2,...    hidden layer widths (default 256,256)   --gelu  GELU, not ReLU
  --model small|large   preset: small = the defaults; large = --hidden 2048,2048,2048,2048
                        --batch 2048, a backward long enough to hide DDP's all-reduces
  --zero 0|1|2|3        0: replicated optimizer; 1, 2: ZeRO stage (sharded state);
                        3: fully sharded (parameters and gradients too, per-layer all-gather)
  --tp T                tensor parallelism in groups of T ranks (Megatron column/row
                        pairs; needs an even number of hidden layers, widths multiple of T)
  --pp P                pipeline parallelism over P stages (1F1B); N/(T*P) data-parallel replicas
  --micro-batches M     micro-batches per pipeline step (4)
  --bucket-cap-mb X     DDP bucket cap (25; the first bucket is 1 MiB)
  --last-bucket-cap-mb X   cap of the last bucket, whose all-reduce waits for the end
                        of backward (1; 0: no separate cap, PyTorch's plan)
  --close-after-mb X    a parameter of X MiB or more closes its bucket, so its all-reduce
                        starts before the next layer's input gradient (1; 0: caps only)
  --chunk-mb X          chunk size of the job's communicator in MiB (0: LOOM_CHUNK_SIZE or
                        Loom's 256 KiB): larger chunks need fewer hand-offs between ranks
  --no-overlap          all-reduce only after backward (baseline for the overlap share)
  --fp16-hook, --bf16-hook   compress gradients to 16 bits for the all-reduce
  --checkpoint-dir D    rank 0 writes checkpoints there; a run resumes from the latest
  --checkpoint-every K  steps between checkpoints (100)
  --data-dir D          folder with {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]
                        (default /usr/share/datasets/fashion-mnist)
  --train-limit M       train on the first M images only
  --save-params F       rank 0 writes the final parameters to F (raw float32)
  --fail-at-step S      rank 1 exits abruptly before step S on attempt 0 (LOOM_RESTART_COUNT=0)
  --seed S              initialization and shuffling seed (1)
  -h, --help            this text       --version   print the version
)";
}

}  // namespace loom::demo
