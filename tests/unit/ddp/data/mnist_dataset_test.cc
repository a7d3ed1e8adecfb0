// The IDX loader on small files written here (plain and gzipped), each way a
// file can be broken, and the real Fashion-MNIST when it is installed.
#include "ddp/data/mnist_dataset.h"

#include <cmath>
#include <filesystem>
#include <functional>

#include <gtest/gtest.h>

#include "ddp/data/idx_file.h"
#include "tests/unit/ddp/data/idx_test_files.h"

namespace loom::ddp {
namespace {

using testing::idxBytes;
using testing::ScratchDir;
using testing::writeFile;
using testing::writeGzipFile;

constexpr uint32_t kCount = 5;
constexpr uint32_t kRows = 3;
constexpr uint32_t kCols = 4;

std::vector<uint8_t> samplePixels() {
  std::vector<uint8_t> p(kCount * kRows * kCols);
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<uint8_t>((i * 37 + 11) % 256);
  return p;
}
const std::vector<uint8_t> kLabels{3, 0, 9, 1, 7};

class MnistDatasetTest : public ::testing::Test {
 protected:
  std::string images() const { return dir_.file("images.idx"); }
  std::string labels() const { return dir_.file("labels.idx"); }
  void writeValid(bool gzip) {
    auto write = gzip ? writeGzipFile : writeFile;
    write(images(), idxBytes(kIdxImagesMagic, {kCount, kRows, kCols}, samplePixels()));
    write(labels(), idxBytes(kIdxLabelsMagic, {kCount}, kLabels));
  }
  // Loads and returns the error message ("" when loading succeeded).
  std::string loadError(MnistShape shape = {kRows, kCols}) {
    try {
      MnistDataset::load(images(), labels(), shape);
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "";
  }
  ScratchDir dir_;
};

void expectContents(const MnistDataset& set) {
  ASSERT_EQ(set.size(), kCount);
  EXPECT_EQ(set.rows(), kRows);
  EXPECT_EQ(set.cols(), kCols);
  EXPECT_EQ(std::vector<uint8_t>(set.labels().begin(), set.labels().end()), kLabels);
  std::vector<uint8_t> pixels = samplePixels();
  std::vector<size_t> order{4, 0, 2};
  std::vector<float> out(order.size() * kRows * kCols);
  std::vector<uint8_t> outLabels(order.size());
  set.gather(order, out, outLabels);
  for (size_t k = 0; k < order.size(); ++k) {
    EXPECT_EQ(outLabels[k], kLabels[order[k]]);
    for (size_t p = 0; p < kRows * kCols; ++p) {
      float raw = pixels[order[k] * kRows * kCols + p];
      float expected = (raw / 255.0f - 0.2860f) / 0.3530f;
      ASSERT_FLOAT_EQ(out[k * kRows * kCols + p], expected) << "item " << order[k] << " px " << p;
    }
  }
}

TEST_F(MnistDatasetTest, LoadsPlainFiles) {
  writeValid(false);
  expectContents(MnistDataset::load(images(), labels(), {kRows, kCols}));
}

TEST_F(MnistDatasetTest, LoadsGzippedFiles) {
  writeValid(true);
  expectContents(MnistDataset::load(images(), labels(), {kRows, kCols}));
}

TEST_F(MnistDatasetTest, LoadSplitPrefersGzippedNames) {
  writeGzipFile(dir_.file("train-images-idx3-ubyte.gz"),
                idxBytes(kIdxImagesMagic, {kCount, kRows, kCols}, samplePixels()));
  writeGzipFile(dir_.file("train-labels-idx1-ubyte.gz"), idxBytes(kIdxLabelsMagic, {kCount}, kLabels));
  writeFile(dir_.file("train-labels-idx1-ubyte"), {1, 2, 3});  // garbage; must not be read
  expectContents(MnistDataset::loadSplit(dir_.path(), "train", {kRows, kCols}));
}

TEST_F(MnistDatasetTest, ComputedNormalizationMatchesDirectFormula) {
  writeValid(false);
  MnistDataset set = MnistDataset::load(images(), labels(), {kRows, kCols});
  std::vector<uint8_t> pixels = samplePixels();
  double sum = 0;
  for (uint8_t p : pixels) sum += p / 255.0;
  double mean = sum / pixels.size();
  double var = 0;
  for (uint8_t p : pixels) var += (p / 255.0 - mean) * (p / 255.0 - mean);
  Normalization n = set.computeNormalization();
  EXPECT_NEAR(n.mean, mean, 1e-6);
  EXPECT_NEAR(n.std, std::sqrt(var / pixels.size()), 1e-6);
  set.setNormalization(n);
  std::vector<float> out(kRows * kCols);
  std::vector<uint8_t> label(1);
  set.gather(std::vector<size_t>{1}, out, label);
  EXPECT_NEAR(out[0], (pixels[kRows * kCols] / 255.0 - mean) / std::sqrt(var / pixels.size()), 1e-5);
}

TEST_F(MnistDatasetTest, MissingFileNamesIt) {
  writeValid(false);
  std::filesystem::remove(labels());
  std::string e = loadError();
  EXPECT_NE(e.find(labels()), std::string::npos) << e;
  EXPECT_NE(e.find("cannot open"), std::string::npos) << e;
}

TEST_F(MnistDatasetTest, BadMagicIsReported) {
  writeValid(false);
  // A labels file where the images should be.
  writeFile(images(), idxBytes(kIdxLabelsMagic, {kCount}, kLabels));
  std::string e = loadError();
  EXPECT_NE(e.find(images() + ": bad magic 0x00000801 (expected 0x00000803"), std::string::npos) << e;
  writeValid(true);
  writeGzipFile(labels(), idxBytes(0x00000d01, {kCount}, kLabels));  // floats, not bytes
  e = loadError();
  EXPECT_NE(e.find(labels() + ": bad magic 0x00000d01"), std::string::npos) << e;
}

TEST_F(MnistDatasetTest, WrongDimensionsAreReported) {
  writeValid(false);
  std::string e = loadError({28, 28});
  EXPECT_NE(e.find(images() + ": wrong dimensions: images have 3 rows, expected 28"),
            std::string::npos) << e;
  e = loadError({kRows, 5});
  EXPECT_NE(e.find("4 columns, expected 5"), std::string::npos) << e;
  writeFile(images(), idxBytes(kIdxImagesMagic, {kCount, 0, kCols}, {}));
  e = loadError({0, 0});
  EXPECT_NE(e.find(images() + ": wrong dimensions"), std::string::npos) << e;
  // Data longer than the dims say: the dims are wrong.
  std::vector<uint8_t> pixels = samplePixels();
  writeFile(images(), idxBytes(kIdxImagesMagic, {kCount, kRows, kCols - 1}, pixels));
  e = loadError({0, 0});
  EXPECT_NE(e.find(images() + ": " + std::to_string(kCount * kRows) + " bytes after the data"),
            std::string::npos) << e;
}

TEST_F(MnistDatasetTest, TruncatedFilesAreReported) {
  writeValid(false);
  std::vector<uint8_t> full = idxBytes(kIdxImagesMagic, {kCount, kRows, kCols}, samplePixels());
  // Cut inside the data, inside the header, inside the magic.
  for (size_t keep : {full.size() - 1, size_t{10}, size_t{2}}) {
    writeFile(images(), std::vector<uint8_t>(full.begin(), full.begin() + static_cast<ptrdiff_t>(keep)));
    std::string e = loadError();
    EXPECT_NE(e.find(images() + ": truncated"), std::string::npos) << "keep " << keep << ": " << e;
  }
  // A gzip stream cut in half.
  writeGzipFile(images(), full);
  std::vector<uint8_t> gz = testing::readFile(images());
  writeFile(images(), std::vector<uint8_t>(gz.begin(), gz.begin() + static_cast<ptrdiff_t>(gz.size() / 2)));
  std::string e = loadError();
  EXPECT_NE(e.find(images() + ": truncated"), std::string::npos) << e;
}

TEST_F(MnistDatasetTest, CorruptGzipDataIsReported) {
  writeValid(true);
  std::vector<uint8_t> gz = testing::readFile(labels());
  gz[gz.size() - 6] ^= 0xff;  // inside the CRC32 trailer
  writeFile(labels(), gz);
  std::string e = loadError();
  EXPECT_NE(e.find(labels() + ": "), std::string::npos) << e;
  EXPECT_FALSE(e.empty());
}

TEST_F(MnistDatasetTest, CountMismatchIsReported) {
  writeValid(false);
  writeFile(labels(), idxBytes(kIdxLabelsMagic, {kCount - 1}, {3, 0, 9, 1}));
  std::string e = loadError();
  EXPECT_NE(e.find(labels() + ": 4 labels, but " + images() + " has 5 images"), std::string::npos) << e;
}

TEST_F(MnistDatasetTest, LabelOutOfRangeIsReported) {
  writeValid(false);
  writeFile(labels(), idxBytes(kIdxLabelsMagic, {kCount}, {3, 0, 9, 10, 7}));
  std::string e = loadError();
  EXPECT_NE(e.find(labels() + ": label 10 at index 3 is out of range [0, 10)"), std::string::npos) << e;
}

TEST(FashionMnist, RealDataSetLoads) {
  std::string dir = kDefaultFashionMnistDir;
  if (!std::filesystem::exists(std::filesystem::path(dir) / "train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "Fashion-MNIST not installed in " << dir
                 << " (Debian package dataset-fashion-mnist; scripts/setup.sh installs it)";
  }
  MnistDataset train = MnistDataset::loadSplit(dir, "train");
  MnistDataset test = MnistDataset::loadSplit(dir, "t10k");
  EXPECT_EQ(train.size(), 60000u);
  EXPECT_EQ(test.size(), 10000u);
  EXPECT_EQ(train.rows(), 28u);
  EXPECT_EQ(train.cols(), 28u);
  // Fashion-MNIST is balanced: 6000 training and 1000 test images per class.
  std::vector<size_t> trainCounts(10), testCounts(10);
  for (uint8_t l : train.labels()) ++trainCounts[l];
  for (uint8_t l : test.labels()) ++testCounts[l];
  EXPECT_EQ(trainCounts, std::vector<size_t>(10, 6000));
  EXPECT_EQ(testCounts, std::vector<size_t>(10, 1000));
  Normalization n = train.computeNormalization();
  EXPECT_NEAR(n.mean, kFashionMnistNormalization.mean, 1e-3);
  EXPECT_NEAR(n.std, kFashionMnistNormalization.std, 1e-3);
}

}  // namespace
}  // namespace loom::ddp
