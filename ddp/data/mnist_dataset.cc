#include "ddp/data/mnist_dataset.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <stdexcept>

#include "ddp/data/idx_file.h"

namespace loom::ddp {
namespace {

void checkDim(const std::string& path, const char* what, size_t actual, size_t expected) {
  if (expected != 0 && actual != expected) {
    throw std::runtime_error(path + ": wrong dimensions: images have " + std::to_string(actual) +
                             " " + what + ", expected " + std::to_string(expected));
  }
}

std::string pickExisting(const std::string& base) {
  if (std::filesystem::exists(base + ".gz")) return base + ".gz";
  return base;  // missing: the loader reports it by this name
}

}  // namespace

MnistDataset MnistDataset::load(const std::string& imagesPath, const std::string& labelsPath,
                                MnistShape shape) {
  IdxArray images = readIdxFile(imagesPath, kIdxImagesMagic);
  IdxArray labels = readIdxFile(labelsPath, kIdxLabelsMagic);
  if (images.dims[1] == 0 || images.dims[2] == 0) {
    throw std::runtime_error(imagesPath + ": wrong dimensions: images of " +
                             std::to_string(images.dims[1]) + "x" + std::to_string(images.dims[2]) +
                             " pixels");
  }
  checkDim(imagesPath, "rows", images.dims[1], shape.rows);
  checkDim(imagesPath, "columns", images.dims[2], shape.cols);
  if (images.dims[0] != labels.dims[0]) {
    throw std::runtime_error(labelsPath + ": " + std::to_string(labels.dims[0]) +
                             " labels, but " + imagesPath + " has " +
                             std::to_string(images.dims[0]) + " images");
  }
  for (size_t i = 0; i < labels.data.size(); ++i) {
    if (labels.data[i] >= kMnistClasses) {
      throw std::runtime_error(labelsPath + ": label " + std::to_string(labels.data[i]) +
                               " at index " + std::to_string(i) + " is out of range [0, " +
                               std::to_string(kMnistClasses) + ")");
    }
  }
  MnistDataset set;
  set.rows_ = images.dims[1];
  set.cols_ = images.dims[2];
  set.pixels_ = std::move(images.data);
  set.labels_ = std::move(labels.data);
  set.setNormalization(kFashionMnistNormalization);
  return set;
}

MnistDataset MnistDataset::loadSplit(const std::string& directory, const std::string& split,
                                     MnistShape shape) {
  return load(pickExisting(directory + "/" + split + "-images-idx3-ubyte"),
              pickExisting(directory + "/" + split + "-labels-idx1-ubyte"), shape);
}

std::span<const uint8_t> MnistDataset::rawImage(size_t index) const {
  if (index >= size()) throw std::out_of_range("MnistDataset::rawImage: index out of range");
  return std::span<const uint8_t>(pixels_).subspan(index * pixelsPerImage(), pixelsPerImage());
}

Normalization MnistDataset::computeNormalization() const {
  // Exact integer sums: no rounding drift over 47M pixels.
  uint64_t sum = 0;
  uint64_t sumSquares = 0;
  for (uint8_t p : pixels_) {
    sum += p;
    sumSquares += uint64_t{p} * p;
  }
  double n = static_cast<double>(pixels_.empty() ? 1 : pixels_.size());
  double mean = static_cast<double>(sum) / n / 255.0;
  double meanSquare = static_cast<double>(sumSquares) / n / (255.0 * 255.0);
  double variance = std::max(0.0, meanSquare - mean * mean);
  return Normalization{static_cast<float>(mean), static_cast<float>(std::sqrt(variance))};
}

void MnistDataset::setNormalization(Normalization n) {
  if (!(n.std > 0.0f)) throw std::invalid_argument("MnistDataset::setNormalization: std must be > 0");
  normalization_ = n;
  for (int v = 0; v < 256; ++v) table_[v] = (static_cast<float>(v) / 255.0f - n.mean) / n.std;
}

void MnistDataset::gather(std::span<const size_t> indices, std::span<float> images,
                          std::span<uint8_t> labels) const {
  size_t pixels = pixelsPerImage();
  if (images.size() < indices.size() * pixels || labels.size() < indices.size()) {
    throw std::invalid_argument("MnistDataset::gather: output spans too small for " +
                                std::to_string(indices.size()) + " items");
  }
  for (size_t k = 0; k < indices.size(); ++k) {
    std::span<const uint8_t> raw = rawImage(indices[k]);
    float* out = images.data() + k * pixels;
    for (size_t p = 0; p < pixels; ++p) out[p] = table_[raw[p]];
    labels[k] = labels_[indices[k]];
  }
}

void MnistDataset::truncate(size_t count) {
  if (count >= size()) return;
  labels_.resize(count);
  pixels_.resize(count * pixelsPerImage());
}

}  // namespace loom::ddp
