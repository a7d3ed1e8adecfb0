// An MNIST-format image classification set (MNIST, Fashion-MNIST): images
// from an IDX images file, labels from an IDX labels file, checked against
// each other. Pixels are kept as bytes (a quarter of the memory of floats)
// and normalized when a batch is gathered: x -> (x/255 - mean) / std, through
// a 256-entry table, so every gather of a pixel gives the same float.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace loom::ddp {

struct Normalization {
  float mean = 0.0f;
  float std = 1.0f;
};
// The values commonly used for Fashion-MNIST's training set.
inline constexpr Normalization kFashionMnistNormalization{0.2860f, 0.3530f};

inline constexpr size_t kMnistClasses = 10;

struct MnistShape {
  size_t rows = 28;  // 0: accept any
  size_t cols = 28;  // 0: accept any
};

class MnistDataset {
 public:
  // Loads and validates both files (gzipped or plain). Errors are
  // std::runtime_error naming the file and the problem: unreadable file, bad
  // magic, dimensions other than `shape`, truncated data, image and label
  // counts that differ, a label >= 10.
  static MnistDataset load(const std::string& imagesPath, const std::string& labelsPath,
                           MnistShape shape = {});

  // `directory`/{split}-images-idx3-ubyte[.gz] and {split}-labels-idx1-ubyte[.gz]
  // with split "train" or "t10k" (the gzipped name wins when both exist).
  static MnistDataset loadSplit(const std::string& directory, const std::string& split,
                                MnistShape shape = {});

  size_t size() const { return labels_.size(); }
  size_t rows() const { return rows_; }
  size_t cols() const { return cols_; }
  size_t pixelsPerImage() const { return rows_ * cols_; }
  std::span<const uint8_t> labels() const { return labels_; }
  std::span<const uint8_t> rawImage(size_t index) const;

  // Mean and standard deviation of all pixels scaled to [0, 1], computed.
  Normalization computeNormalization() const;
  void setNormalization(Normalization n);
  Normalization normalization() const { return normalization_; }

  // Writes the normalized images of `indices` (row-major, pixelsPerImage()
  // floats each) to `images` and their labels to `labels`.
  void gather(std::span<const size_t> indices, std::span<float> images,
              std::span<uint8_t> labels) const;

  // Keeps only the first `count` items (for small test runs); no-op when the
  // set is already that small.
  void truncate(size_t count);

 private:
  size_t rows_ = 0;
  size_t cols_ = 0;
  std::vector<uint8_t> pixels_;
  std::vector<uint8_t> labels_;
  Normalization normalization_ = kFashionMnistNormalization;
  float table_[256] = {};
};

// The system's Fashion-MNIST (Debian's dataset-fashion-mnist package).
inline constexpr const char* kDefaultFashionMnistDir = "/usr/share/datasets/fashion-mnist";

}  // namespace loom::ddp
