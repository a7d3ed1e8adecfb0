// Tensor-parallel dense layers against the unsharded layer: a Megatron MLP
// block (column-parallel 12->16, GELU, row-parallel 16->8) on T = 2 and 4
// ranks (threads). Checked, for every rank, against the same block computed
// unsharded with dense.h:
//   within 1e-6 relative (to the largest magnitude of the reference array)
//     where no sum is split across ranks: the column-parallel output and the
//     weight and bias gradients of both layers. Each element is one dot
//     product over the same terms, but BLAS may take another kernel for a
//     slice of columns than for the whole matrix: OpenBLAS's FMA kernels
//     (Haswell, Zen) round some elements of a slice differently, its
//     Sandybridge kernel does not;
//   within 1e-5 relative where the all-reduce re-associates a sum: the
//     block's output and the input gradient.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "ddp/model/activation.h"
#include "ddp/model/dense.h"
#include "ddp/parallel/tensor_parallel_dense.h"
#include "tests/unit/ddp/distributed/grad_patterns.h"
#include "tests/unit/ddp/distributed/world.h"

namespace loom::ddp {
namespace {

using testing::gradPattern;
using testing::RankContext;

constexpr size_t kBatch = 5, kIn = 12, kHidden = 16, kOut = 8;
const DenseShape kFirst{kBatch, kIn, kHidden};
const DenseShape kSecond{kBatch, kHidden, kOut};

std::vector<float> pattern(int salt, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = gradPattern(salt, 7, i);
  return v;
}

struct Block {
  std::vector<float> w1 = pattern(1, kHidden * kIn), b1 = pattern(2, kHidden);
  std::vector<float> w2 = pattern(3, kOut * kHidden), b2 = pattern(4, kOut);
  std::vector<float> x = pattern(5, kBatch * kIn);
  std::vector<float> gradY = pattern(6, kBatch * kOut);  // upstream gradient of the block's output
};

struct Result {
  std::vector<float> z1, y, gw1, gb1, gw2, gb2, gx;  // z1: first layer's (pre-activation) output
};

Result unsharded(const Block& p) {
  Result r;
  r.z1.resize(kBatch * kHidden);
  std::vector<float> a1(kBatch * kHidden), gradA1(kBatch * kHidden);
  r.y.resize(kBatch * kOut);
  denseForward(kFirst, p.x, p.w1, p.b1, r.z1);
  activationForward(Activation::kGelu, r.z1, a1);
  denseForward(kSecond, a1, p.w2, p.b2, r.y);
  r.gw1.assign(p.w1.size(), 0.0f), r.gb1.assign(kHidden, 0.0f), r.gw2.assign(p.w2.size(), 0.0f), r.gb2.assign(kOut, 0.0f);
  r.gx.resize(kBatch * kIn);
  denseBackwardBias(kSecond, p.gradY, r.gb2);
  denseBackwardWeight(kSecond, p.gradY, a1, r.gw2);
  denseBackwardInput(kSecond, p.gradY, p.w2, gradA1);
  activationBackward(Activation::kGelu, r.z1, gradA1, gradA1);
  denseBackwardBias(kFirst, gradA1, r.gb1);
  denseBackwardWeight(kFirst, gradA1, p.x, r.gw1);
  denseBackwardInput(kFirst, gradA1, p.w1, r.gx);
  return r;
}

Result sharded(const Block& p, const TensorParallelGroup& tp) {
  const DenseShape c = columnParallelShape(kFirst, tp.size);
  const DenseShape rs = rowParallelShape(kSecond, tp.size);
  const std::vector<float> w1 = columnParallelWeight(p.w1, kFirst, tp.rank, tp.size);
  const std::vector<float> b1 = columnParallelBias(p.b1, kFirst, tp.rank, tp.size);
  const std::vector<float> w2 = rowParallelWeight(p.w2, kSecond, tp.rank, tp.size);
  Result r;
  r.z1.resize(kBatch * c.out);
  std::vector<float> a1(kBatch * c.out), gradA1(kBatch * c.out);
  r.y.resize(kBatch * kOut);
  columnParallelForward(kFirst, tp, p.x, w1, b1, r.z1);
  activationForward(Activation::kGelu, r.z1, a1);
  rowParallelForward(kSecond, tp, a1, w2, p.b2, r.y);
  r.gw1.assign(w1.size(), 0.0f), r.gb1.assign(c.out, 0.0f), r.gw2.assign(w2.size(), 0.0f), r.gb2.assign(kOut, 0.0f);
  r.gx.resize(kBatch * kIn);
  rowParallelBackward(kSecond, tp, p.gradY, a1, w2, r.gw2, r.gb2, gradA1);
  activationBackward(Activation::kGelu, r.z1, gradA1, gradA1);
  columnParallelBackward(kFirst, tp, gradA1, p.x, w1, r.gw1, r.gb1, r.gx);
  EXPECT_EQ(rs.in * tp.size, kHidden);
  return r;
}

// The columns [begin, begin+width) of a rows x cols matrix.
std::vector<float> columns(const std::vector<float>& m, size_t rows, size_t cols, size_t begin, size_t width) {
  std::vector<float> out(rows * width);
  for (size_t r = 0; r < rows; ++r) std::copy_n(m.begin() + r * cols + begin, width, out.begin() + r * width);
  return out;
}

void expectClose(const std::vector<float>& got, const std::vector<float>& want, const char* what, int rank,
                 double relative = 1e-5) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 0, worst = 0;
  for (float v : want) scale = std::max(scale, std::fabs(static_cast<double>(v)));
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - want[i]));
  EXPECT_GT(scale, 0.0) << what;
  EXPECT_LE(worst, relative * scale) << what << " on rank " << rank << " (largest reference magnitude " << scale << ")";
}

// Not split across ranks: only BLAS's choice of kernel may round differently.
void expectAlmostExact(const std::vector<float>& got, const std::vector<float>& want, const char* what, int rank) {
  expectClose(got, want, what, rank, 1e-6);
}

void checkBlock(const RankContext& w) {
  const Block p;
  const Result want = unsharded(p);
  const TensorParallelGroup tp = TensorParallelGroup::of(w.comm);
  const Result got = sharded(p, tp);
  const size_t hiddenLocal = kHidden / tp.size;
  const size_t h0 = tp.rank * hiddenLocal;
  // Not split: the same dot products.
  expectAlmostExact(got.z1, columns(want.z1, kBatch, kHidden, h0, hiddenLocal), "column-parallel output", w.rank);
  expectAlmostExact(got.gw1, std::vector<float>(want.gw1.begin() + h0 * kIn, want.gw1.begin() + (h0 + hiddenLocal) * kIn),
                 "column-parallel weight gradient", w.rank);
  expectAlmostExact(got.gb1, std::vector<float>(want.gb1.begin() + h0, want.gb1.begin() + h0 + hiddenLocal),
                 "column-parallel bias gradient", w.rank);
  expectAlmostExact(got.gw2, columns(want.gw2, kOut, kHidden, h0, hiddenLocal), "row-parallel weight gradient", w.rank);
  expectAlmostExact(got.gb2, want.gb2, "row-parallel bias gradient", w.rank);
  // Split sums: rounding only.
  expectClose(got.y, want.y, "block output", w.rank);
  expectClose(got.gx, want.gx, "input gradient", w.rank);
}

class TensorParallel : public ::testing::TestWithParam<int> {};

TEST_P(TensorParallel, MlpBlockMatchesTheUnshardedLayers) { testing::runThreads(GetParam(), checkBlock); }

INSTANTIATE_TEST_SUITE_P(Sizes, TensorParallel, ::testing::Values(2, 4));

TEST(TensorParallelShapes, IndivisibleWidthIsRejectedNamingIt) {
  try {
    columnParallelShape({4, 10, 6}, 4);
    ADD_FAILURE() << "out = 6 over 4 ranks was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("out = 6"), std::string::npos) << e.what();
  }
}

TEST(ProcessTensorParallel, MlpBlockMatchesTheUnshardedLayers) { testing::runProcess(checkBlock); }

}  // namespace
}  // namespace loom::ddp
