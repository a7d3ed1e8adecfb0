// Parameter initialization that is identical on every machine.
//
// std::uniform_real_distribution's algorithm is left to the standard library,
// so two builds could draw different numbers from the same seed; DDP needs
// every rank to start from the same parameters (or a broadcast), so the
// conversion from std::mt19937_64's 64-bit output (which the standard fixes
// exactly) to a float is written out here.
#pragma once

#include <cstdint>
#include <random>
#include <span>

namespace loom::ddp {

// Fills `out` with values uniform in [-bound, bound), drawing one 64-bit
// number per element in order: (top 53 bits / 2^53) * 2 * bound - bound.
void fillUniform(std::mt19937_64& rng, float bound, std::span<float> out);

}  // namespace loom::ddp
