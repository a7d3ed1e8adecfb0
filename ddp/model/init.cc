#include "ddp/model/init.h"

namespace loom::ddp {

void fillUniform(std::mt19937_64& rng, float bound, std::span<float> out) {
  const double width = 2.0 * static_cast<double>(bound);
  for (float& v : out) {
    const double unit = static_cast<double>(rng() >> 11) * 0x1.0p-53;  // [0, 1), exact
    v = static_cast<float>(unit * width - static_cast<double>(bound));
  }
}

}  // namespace loom::ddp
