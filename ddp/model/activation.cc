#include "ddp/model/activation.h"

#include <stdexcept>
#include <string>

namespace loom::ddp {
namespace {

// One loop per activation, so the compiler sees a plain element-wise loop.
template <class F>
void mapInto(std::span<const float> z, std::span<float> out, F f) {
  const float* in = z.data();
  float* o = out.data();
  for (size_t i = 0, n = z.size(); i < n; ++i) o[i] = f(in[i]);
}

template <class D>
void scaleByDerivative(std::span<const float> z, std::span<const float> gradA, std::span<float> gradZ, D derivative) {
  const float* in = z.data();
  const float* ga = gradA.data();
  float* gz = gradZ.data();
  for (size_t i = 0, n = z.size(); i < n; ++i) gz[i] = ga[i] * derivative(in[i]);
}

void checkSameSize(const char* function, const char* argument, size_t actual, size_t expected) {
  if (actual != expected) {
    throw std::invalid_argument(std::string(function) + ": " + argument + " has " + std::to_string(actual) +
                                " elements but z has " + std::to_string(expected));
  }
}

}  // namespace

void activationForward(Activation activation, std::span<const float> z, std::span<float> a) {
  checkSameSize("activationForward", "a", a.size(), z.size());
  switch (activation) {
    case Activation::kRelu: mapInto(z, a, relu); return;
    case Activation::kGelu: mapInto(z, a, gelu); return;
  }
  throw std::invalid_argument("activationForward: unknown activation");
}

void activationBackward(Activation activation, std::span<const float> z, std::span<const float> gradA,
                        std::span<float> gradZ) {
  checkSameSize("activationBackward", "gradA", gradA.size(), z.size());
  checkSameSize("activationBackward", "gradZ", gradZ.size(), z.size());
  switch (activation) {
    case Activation::kRelu: scaleByDerivative(z, gradA, gradZ, reluDerivative); return;
    case Activation::kGelu: scaleByDerivative(z, gradA, gradZ, geluDerivative); return;
  }
  throw std::invalid_argument("activationBackward: unknown activation");
}

}  // namespace loom::ddp
