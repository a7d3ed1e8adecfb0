// A fully connected layer with torch.nn.Linear's layout: y = x W^T + b, where
// x is batch x in, W is out x in, b has out elements and y is batch x out, all
// row-major. The backward is split in three so a caller can publish the bias
// and weight gradients (DDP's grad-ready hook) before computing the input
// gradient that earlier layers wait for.
//
// Matrix products go to cblas_sgemm (OpenBLAS). OpenBLAS runs its own thread
// pool; when several ranks share few cores the caller should cap it
// (openblas_set_num_threads(1) or OPENBLAS_NUM_THREADS=1). This layer leaves
// threading to the caller on purpose. Also the caller's: on virtual CPUs
// that OpenBLAS 0.3.21 does not recognise it falls back to its SSE3
// "Prescott" kernels (OPENBLAS_VERBOSE=2 prints the core), 3-4x slower here
// than OPENBLAS_CORETYPE=Haswell (AVX2) or SkylakeX (AVX-512); that variable
// is read when the library loads, so it must be in the environment at start.
// Span sizes are checked once per call
// (std::invalid_argument); nothing here allocates.
#pragma once

#include <cstddef>
#include <span>

namespace loom::ddp {

struct DenseShape {
  size_t batch = 0;
  size_t in = 0;
  size_t out = 0;
};

// y = x W^T + b (overwrites y).
void denseForward(DenseShape shape, std::span<const float> x, std::span<const float> weight,
                  std::span<const float> bias, std::span<float> y);

// gradBias += sum over rows of gradY (accumulates).
void denseBackwardBias(DenseShape shape, std::span<const float> gradY, std::span<float> gradBias);

// gradWeight += gradY^T x (accumulates).
void denseBackwardWeight(DenseShape shape, std::span<const float> gradY, std::span<const float> x,
                         std::span<float> gradWeight);

// gradX = gradY W (overwrites gradX).
void denseBackwardInput(DenseShape shape, std::span<const float> gradY, std::span<const float> weight,
                        std::span<float> gradX);

}  // namespace loom::ddp
