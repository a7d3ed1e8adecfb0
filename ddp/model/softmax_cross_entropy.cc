#include "ddp/model/softmax_cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace loom::ddp {
namespace {

void checkShape(const char* function, std::span<const float> logits, std::span<const uint8_t> labels, size_t classes) {
  if (classes == 0) throw std::invalid_argument(std::string(function) + ": classes is 0");
  if (logits.size() != labels.size() * classes) {
    throw std::invalid_argument(std::string(function) + ": logits has " + std::to_string(logits.size()) +
                                " elements, expected labels.size() * classes = " +
                                std::to_string(labels.size() * classes));
  }
  for (size_t r = 0; r < labels.size(); ++r) {
    if (labels[r] >= classes) {
      throw std::invalid_argument(std::string(function) + ": labels[" + std::to_string(r) + "] = " +
                                  std::to_string(labels[r]) + " is not below classes = " + std::to_string(classes));
    }
  }
}

}  // namespace

float softmaxCrossEntropy(std::span<const float> logits, std::span<const uint8_t> labels, size_t classes,
                          std::span<float> gradLogits) {
  checkShape("softmaxCrossEntropy", logits, labels, classes);
  const size_t batch = labels.size();
  if (batch == 0) throw std::invalid_argument("softmaxCrossEntropy: labels is empty (the mean of no rows)");
  const bool wantGrad = !gradLogits.empty();
  if (wantGrad && gradLogits.size() != logits.size()) {
    throw std::invalid_argument("softmaxCrossEntropy: gradLogits has " + std::to_string(gradLogits.size()) +
                                " elements, expected " + std::to_string(logits.size()));
  }
  const float invBatch = 1.0f / static_cast<float>(batch);
  double total = 0.0;
  for (size_t r = 0; r < batch; ++r) {
    const float* row = logits.data() + r * classes;
    const float peak = *std::max_element(row, row + classes);
    float sum = 0.0f;
    for (size_t c = 0; c < classes; ++c) sum += std::exp(row[c] - peak);
    const float logSumExp = peak + std::log(sum);
    total += static_cast<double>(logSumExp - row[labels[r]]);
    if (wantGrad) {
      float* grad = gradLogits.data() + r * classes;
      const float scale = invBatch / sum;
      for (size_t c = 0; c < classes; ++c) grad[c] = std::exp(row[c] - peak) * scale;
      grad[labels[r]] -= invBatch;
    }
  }
  return static_cast<float>(total / static_cast<double>(batch));
}

size_t countCorrect(std::span<const float> logits, std::span<const uint8_t> labels, size_t classes) {
  checkShape("countCorrect", logits, labels, classes);
  size_t correct = 0;
  for (size_t r = 0; r < labels.size(); ++r) {
    const float* row = logits.data() + r * classes;
    const size_t best = static_cast<size_t>(std::max_element(row, row + classes) - row);
    if (best == labels[r]) ++correct;
  }
  return correct;
}

}  // namespace loom::ddp
