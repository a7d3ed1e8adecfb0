// Element-wise activations between Dense layers, with their derivatives.
// ReLU's derivative at 0 is 0 and GELU is the exact erf form, both as
// torch.nn.ReLU / torch.nn.GELU(). The span functions dispatch once per call
// (no per-element virtual call) and may work in place (gradZ == gradA).
#pragma once

#include <cmath>
#include <span>

namespace loom::ddp {

enum class Activation { kRelu, kGelu };

inline float relu(float z) { return z > 0.0f ? z : 0.0f; }
inline float reluDerivative(float z) { return z > 0.0f ? 1.0f : 0.0f; }

// gelu(z) = z * Phi(z), Phi the standard normal CDF; gelu'(z) = Phi(z) + z * phi(z).
inline float gelu(float z) { return 0.5f * z * (1.0f + std::erf(z * 0.70710678118654752f)); }
inline float geluDerivative(float z) {
  const float cdf = 0.5f * (1.0f + std::erf(z * 0.70710678118654752f));
  const float pdf = 0.39894228040143268f * std::exp(-0.5f * z * z);
  return cdf + z * pdf;
}

// a = f(z).
void activationForward(Activation activation, std::span<const float> z, std::span<float> a);
// gradZ = gradA * f'(z); gradZ may be gradA.
void activationBackward(Activation activation, std::span<const float> z, std::span<const float> gradA,
                        std::span<float> gradZ);

}  // namespace loom::ddp
