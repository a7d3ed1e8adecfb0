// How an optimizer's step count travels inside its float state vector.
//
// Optimizer::saveState() returns floats only, and a float holds integers
// exactly only up to 2^24 (16.7M steps). AdamW's bias correction depends on
// the exact step, so the count is split into two floats (high and low 20
// bits), exact up to 2^40 steps, and a checkpoint restores it bit for bit.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

namespace loom::ddp::optim {

inline constexpr size_t kStepCountFloats = 2;

inline void encodeStepCount(uint64_t step, float* out) {
  constexpr uint64_t kLowBits = 20;
  if (step >= (uint64_t{1} << 40)) throw std::overflow_error("optimizer step count exceeds 2^40");
  out[0] = static_cast<float>(step >> kLowBits);
  out[1] = static_cast<float>(step & ((uint64_t{1} << kLowBits) - 1));
}

// Reads the count written by encodeStepCount; `who` names the optimizer in
// the error message when the two floats are not such a pair.
inline uint64_t decodeStepCount(std::span<const float> state, const std::string& who) {
  constexpr uint64_t kLowBits = 20;
  if (state.size() < kStepCountFloats) {
    throw std::invalid_argument(who + "::loadState: state has " + std::to_string(state.size()) +
                                " floats, fewer than the 2 of the step count");
  }
  const float high = state[0], low = state[1];
  const bool whole = high >= 0.0f && low >= 0.0f && high < float(1 << 20) && low < float(1 << 20) &&
                     high == static_cast<float>(static_cast<uint64_t>(high)) &&
                     low == static_cast<float>(static_cast<uint64_t>(low));
  if (!whole) throw std::invalid_argument(who + "::loadState: state does not start with a step count");
  return (static_cast<uint64_t>(high) << kLowBits) | static_cast<uint64_t>(low);
}

}  // namespace loom::ddp::optim
