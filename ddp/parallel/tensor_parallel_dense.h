// Megatron-style tensor-parallel dense layers (y = x W^T + b, W out x in,
// torch.nn.Linear's layout) over a tensor-parallel group of T ranks.
//
// Column-parallel: rank t holds rows [t*out/T, (t+1)*out/T) of W and of b,
// takes the whole input and produces its slice of the output columns. The
// forward needs no communication; the backward all-reduces (sums) the input
// gradient, whose partial products each rank computed from its rows.
//
// Row-parallel: rank t holds columns [t*in/T, (t+1)*in/T) of W and the whole
// (replicated) b, takes its slice of the input (what a column-parallel layer
// produced) and the partial products are all-reduced (summed) into the whole
// output, b added after the sum. The backward needs no communication.
//
// A column-parallel layer followed by a row-parallel one (an MLP block) thus
// costs one all-reduce forward and one backward. The sums over ranks change
// the association of the dot products, so results equal the unsharded layer
// within rounding, not bit for bit (except where a product is not split:
// the column-parallel forward and all weight gradients).
//
// `full` is the unsharded layer's shape; out (column) or in (row) must be a
// multiple of T (std::invalid_argument otherwise). Gradients accumulate (+=)
// as in dense.h; the input gradients are overwritten. Collective calls throw
// std::runtime_error with the TP rank and Loom's message.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "ddp/model/dense.h"
#include "loom/loom.h"

namespace loom::ddp {

struct TensorParallelGroup {
  loomComm_t comm = nullptr;
  int rank = 0;
  int size = 1;
  // Reads rank and size from the communicator.
  static TensorParallelGroup of(loomComm_t comm);
};

// Local shapes (batch as in `full`).
DenseShape columnParallelShape(DenseShape full, int tpSize);
DenseShape rowParallelShape(DenseShape full, int tpSize);

// This rank's parameters cut from the unsharded ones.
std::vector<float> columnParallelWeight(std::span<const float> fullWeight, DenseShape full, int tpRank, int tpSize);
std::vector<float> columnParallelBias(std::span<const float> fullBias, DenseShape full, int tpRank, int tpSize);
std::vector<float> rowParallelWeight(std::span<const float> fullWeight, DenseShape full, int tpRank, int tpSize);

// The unsharded parameters from every rank's shard (all-gather in the group;
// collective): the inverses of the three functions above.
std::vector<float> gatherColumnParallel(std::span<const float> local, const TensorParallelGroup& tp);  // weight rows or bias
std::vector<float> gatherRowParallelWeight(std::span<const float> weightLocal, DenseShape full,
                                           const TensorParallelGroup& tp);

// yLocal: batch x out/T.
void columnParallelForward(DenseShape full, const TensorParallelGroup& tp, std::span<const float> x,
                           std::span<const float> weightLocal, std::span<const float> biasLocal, std::span<float> yLocal);
// gradX (batch x in) is all-reduced over the group.
void columnParallelBackward(DenseShape full, const TensorParallelGroup& tp, std::span<const float> gradYLocal,
                            std::span<const float> x, std::span<const float> weightLocal, std::span<float> gradWeightLocal,
                            std::span<float> gradBiasLocal, std::span<float> gradX);

// xLocal: batch x in/T; y (batch x out) is all-reduced over the group, then b added.
void rowParallelForward(DenseShape full, const TensorParallelGroup& tp, std::span<const float> xLocal,
                        std::span<const float> weightLocal, std::span<const float> bias, std::span<float> y);
// gradXLocal: batch x in/T; no communication.
void rowParallelBackward(DenseShape full, const TensorParallelGroup& tp, std::span<const float> gradY,
                         std::span<const float> xLocal, std::span<const float> weightLocal,
                         std::span<float> gradWeightLocal, std::span<float> gradBias, std::span<float> gradXLocal);

}  // namespace loom::ddp
