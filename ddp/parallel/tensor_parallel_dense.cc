#include "ddp/parallel/tensor_parallel_dense.h"

#include <cblas.h>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace loom::ddp {
namespace {

void divisible(const char* function, const char* what, size_t n, int tpSize) {
  if (tpSize <= 0 || n % static_cast<size_t>(tpSize) != 0) {
    throw std::invalid_argument(std::string(function) + ": " + what + " = " + std::to_string(n) +
                                " is not a multiple of the tensor-parallel size " + std::to_string(tpSize));
  }
}

void allReduceSum(const TensorParallelGroup& tp, std::span<float> data, const char* what) {
  if (tp.size == 1) return;
  const loomResult_t r = loomAllReduce(data.data(), data.data(), data.size(), loomFloat32, loomSum, tp.comm, nullptr);
  if (r != loomSuccess) {
    throw std::runtime_error(std::string(what) + ": all-reduce failed on tensor-parallel rank " + std::to_string(tp.rank) +
                             ": " + loomGetErrorString(r) + ": " + loomGetLastError(tp.comm));
  }
}

}  // namespace

TensorParallelGroup TensorParallelGroup::of(loomComm_t comm) {
  TensorParallelGroup g;
  g.comm = comm;
  if (!comm || loomCommUserRank(comm, &g.rank) != loomSuccess || loomCommCount(comm, &g.size) != loomSuccess)
    throw std::invalid_argument("TensorParallelGroup: comm is not a valid communicator");
  return g;
}

DenseShape columnParallelShape(DenseShape full, int tpSize) {
  divisible("columnParallelShape", "out", full.out, tpSize);
  return {full.batch, full.in, full.out / static_cast<size_t>(tpSize)};
}

DenseShape rowParallelShape(DenseShape full, int tpSize) {
  divisible("rowParallelShape", "in", full.in, tpSize);
  return {full.batch, full.in / static_cast<size_t>(tpSize), full.out};
}

std::vector<float> columnParallelWeight(std::span<const float> fullWeight, DenseShape full, int tpRank, int tpSize) {
  const DenseShape local = columnParallelShape(full, tpSize);
  const size_t rows = local.out * full.in;
  return {fullWeight.begin() + tpRank * rows, fullWeight.begin() + (tpRank + 1) * rows};
}

std::vector<float> columnParallelBias(std::span<const float> fullBias, DenseShape full, int tpRank, int tpSize) {
  const DenseShape local = columnParallelShape(full, tpSize);
  return {fullBias.begin() + tpRank * local.out, fullBias.begin() + (tpRank + 1) * local.out};
}

std::vector<float> rowParallelWeight(std::span<const float> fullWeight, DenseShape full, int tpRank, int tpSize) {
  const DenseShape local = rowParallelShape(full, tpSize);
  std::vector<float> w(full.out * local.in);
  for (size_t o = 0; o < full.out; ++o) {
    const float* row = fullWeight.data() + o * full.in + tpRank * local.in;
    std::copy_n(row, local.in, w.begin() + o * local.in);
  }
  return w;
}

std::vector<float> gatherColumnParallel(std::span<const float> local, const TensorParallelGroup& tp) {
  std::vector<float> all(local.size() * static_cast<size_t>(tp.size));
  if (tp.size == 1) {
    std::copy(local.begin(), local.end(), all.begin());
    return all;
  }
  const loomResult_t r = loomAllGather(local.data(), all.data(), local.size(), loomFloat32, tp.comm, nullptr);
  if (r != loomSuccess) {
    throw std::runtime_error("gathering tensor-parallel shards: all-gather failed on tensor-parallel rank " +
                             std::to_string(tp.rank) + ": " + loomGetErrorString(r) + ": " + loomGetLastError(tp.comm));
  }
  return all;
}

std::vector<float> gatherRowParallelWeight(std::span<const float> weightLocal, DenseShape full,
                                           const TensorParallelGroup& tp) {
  const std::vector<float> parts = gatherColumnParallel(weightLocal, tp);  // rank after rank, each out x in/T
  const size_t inLocal = rowParallelShape(full, tp.size).in;
  std::vector<float> w(full.out * full.in);
  for (int t = 0; t < tp.size; ++t)
    for (size_t o = 0; o < full.out; ++o)
      std::copy_n(parts.begin() + t * full.out * inLocal + o * inLocal, inLocal, w.begin() + o * full.in + t * inLocal);
  return w;
}

void columnParallelForward(DenseShape full, const TensorParallelGroup& tp, std::span<const float> x,
                           std::span<const float> weightLocal, std::span<const float> biasLocal, std::span<float> yLocal) {
  denseForward(columnParallelShape(full, tp.size), x, weightLocal, biasLocal, yLocal);
}

void columnParallelBackward(DenseShape full, const TensorParallelGroup& tp, std::span<const float> gradYLocal,
                            std::span<const float> x, std::span<const float> weightLocal, std::span<float> gradWeightLocal,
                            std::span<float> gradBiasLocal, std::span<float> gradX) {
  const DenseShape local = columnParallelShape(full, tp.size);
  denseBackwardBias(local, gradYLocal, gradBiasLocal);
  denseBackwardWeight(local, gradYLocal, x, gradWeightLocal);
  // Each rank's rows give a partial sum of every input gradient.
  denseBackwardInput(local, gradYLocal, weightLocal, gradX);
  allReduceSum(tp, gradX, "columnParallelBackward");
}

void rowParallelForward(DenseShape full, const TensorParallelGroup& tp, std::span<const float> xLocal,
                        std::span<const float> weightLocal, std::span<const float> bias, std::span<float> y) {
  const DenseShape local = rowParallelShape(full, tp.size);
  if (xLocal.size() != local.batch * local.in || weightLocal.size() != local.out * local.in ||
      bias.size() != full.out || y.size() != full.batch * full.out) {
    throw std::invalid_argument("rowParallelForward: span sizes do not match the layer (batch " +
                                std::to_string(full.batch) + ", in " + std::to_string(full.in) + ", out " +
                                std::to_string(full.out) + ", tensor-parallel size " + std::to_string(tp.size) + ")");
  }
  if (full.batch == 0) return;
  // Partial products only: the bias goes in once, after the sum.
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(local.batch), static_cast<int>(local.out),
              static_cast<int>(local.in), 1.0f, xLocal.data(), static_cast<int>(local.in), weightLocal.data(),
              static_cast<int>(local.in), 0.0f, y.data(), static_cast<int>(local.out));
  allReduceSum(tp, y, "rowParallelForward");
  for (size_t r = 0; r < full.batch; ++r) {
    float* row = y.data() + r * full.out;
    for (size_t c = 0; c < full.out; ++c) row[c] += bias[c];
  }
}

void rowParallelBackward(DenseShape full, const TensorParallelGroup& tp, std::span<const float> gradY,
                         std::span<const float> xLocal, std::span<const float> weightLocal,
                         std::span<float> gradWeightLocal, std::span<float> gradBias, std::span<float> gradXLocal) {
  const DenseShape local = rowParallelShape(full, tp.size);
  denseBackwardBias(local, gradY, gradBias);
  denseBackwardWeight(local, gradY, xLocal, gradWeightLocal);
  denseBackwardInput(local, gradY, weightLocal, gradXLocal);
}

}  // namespace loom::ddp
