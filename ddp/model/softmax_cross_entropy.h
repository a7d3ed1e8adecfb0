// Softmax cross-entropy over class logits, as torch.nn.CrossEntropyLoss()
// (mean over the batch), computed with a row-wise log-sum-exp so large
// logits do not overflow.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace loom::ddp {

// logits: labels.size() rows of `classes` values, row-major. Returns the mean
// of (logsumexp(row) - row[label]). If gradLogits is not empty it receives
// d(mean loss)/d(logits) = (softmax(row) - onehot(label)) / batch.
// Throws std::invalid_argument on size mismatch, an empty batch or a label
// >= classes (naming the row).
float softmaxCrossEntropy(std::span<const float> logits, std::span<const uint8_t> labels, size_t classes,
                          std::span<float> gradLogits);

// Rows whose argmax (first on ties, as torch.argmax) equals the label.
size_t countCorrect(std::span<const float> logits, std::span<const uint8_t> labels, size_t classes);

}  // namespace loom::ddp
