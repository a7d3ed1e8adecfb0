#include "ddp/model/dense.h"

#include <cblas.h>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace loom::ddp {
namespace {

void checkSize(const char* function, const char* argument, size_t actual, size_t expected) {
  if (actual != expected) {
    throw std::invalid_argument(std::string(function) + ": " + argument + " has " + std::to_string(actual) +
                                " elements, expected " + std::to_string(expected));
  }
}

int asBlasInt(size_t n) { return static_cast<int>(n); }

}  // namespace

void denseForward(DenseShape s, std::span<const float> x, std::span<const float> weight, std::span<const float> bias,
                  std::span<float> y) {
  checkSize("denseForward", "x", x.size(), s.batch * s.in);
  checkSize("denseForward", "weight", weight.size(), s.out * s.in);
  checkSize("denseForward", "bias", bias.size(), s.out);
  checkSize("denseForward", "y", y.size(), s.batch * s.out);
  if (s.batch == 0) return;
  // Start every row from the bias, then let sgemm add x W^T (beta = 1).
  for (size_t r = 0; r < s.batch; ++r) std::copy(bias.begin(), bias.end(), y.begin() + r * s.out);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, asBlasInt(s.batch), asBlasInt(s.out), asBlasInt(s.in), 1.0f,
              x.data(), asBlasInt(s.in), weight.data(), asBlasInt(s.in), 1.0f, y.data(), asBlasInt(s.out));
}

void denseBackwardBias(DenseShape s, std::span<const float> gradY, std::span<float> gradBias) {
  checkSize("denseBackwardBias", "gradY", gradY.size(), s.batch * s.out);
  checkSize("denseBackwardBias", "gradBias", gradBias.size(), s.out);
  float* gb = gradBias.data();
  for (size_t r = 0; r < s.batch; ++r) {
    const float* row = gradY.data() + r * s.out;
    for (size_t c = 0; c < s.out; ++c) gb[c] += row[c];
  }
}

void denseBackwardWeight(DenseShape s, std::span<const float> gradY, std::span<const float> x,
                         std::span<float> gradWeight) {
  checkSize("denseBackwardWeight", "gradY", gradY.size(), s.batch * s.out);
  checkSize("denseBackwardWeight", "x", x.size(), s.batch * s.in);
  checkSize("denseBackwardWeight", "gradWeight", gradWeight.size(), s.out * s.in);
  if (s.batch == 0) return;
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, asBlasInt(s.out), asBlasInt(s.in), asBlasInt(s.batch), 1.0f,
              gradY.data(), asBlasInt(s.out), x.data(), asBlasInt(s.in), 1.0f, gradWeight.data(), asBlasInt(s.in));
}

void denseBackwardInput(DenseShape s, std::span<const float> gradY, std::span<const float> weight,
                        std::span<float> gradX) {
  checkSize("denseBackwardInput", "gradY", gradY.size(), s.batch * s.out);
  checkSize("denseBackwardInput", "weight", weight.size(), s.out * s.in);
  checkSize("denseBackwardInput", "gradX", gradX.size(), s.batch * s.in);
  if (s.batch == 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, asBlasInt(s.batch), asBlasInt(s.in), asBlasInt(s.out), 1.0f,
              gradY.data(), asBlasInt(s.out), weight.data(), asBlasInt(s.in), 0.0f, gradX.data(), asBlasInt(s.in));
}

}  // namespace loom::ddp
