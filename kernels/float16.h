// fp16/bf16 <-> fp32 conversions, the rounding every reduction of 16-bit
// floats uses (reduce_ops.h), for code outside the kernels that converts the
// same way (the NCCL shim's pre-multiplied sums). Header-only and free of
// host-only calls (every function is LOOM_HOST_DEVICE), so CUDA kernels can
// use it too.
//
// fp16 -> fp32 and bf16 -> fp32 are exact; fp32 -> fp16/bf16 round to
// nearest even. Conversions preserve NaN: fp16 -> fp32 quiets a signalling
// NaN and shifts the payload up (as F16C's VCVTPH2PS does); fp32 -> fp16
// keeps the top 10 payload bits and sets the quiet bit (as VCVTPS2PH does);
// fp32 -> bf16 keeps the top 7 payload bits and sets the quiet bit.
//
// Like the functors, the conversions live in the inline namespace each
// instruction-set translation unit names (LOOM_KERNELS_ISA_NS), so inline
// functions compiled with -mavx512f never replace the portable ones at link
// time.
#pragma once

#include <cstdint>
#include <cstring>

#include "common/host_device.h"

#ifndef LOOM_KERNELS_ISA_NS
#define LOOM_KERNELS_ISA_NS generic
#endif

namespace loom::kernels {
inline namespace LOOM_KERNELS_ISA_NS {

LOOM_HOST_DEVICE inline uint32_t floatToBits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof(u));
  return u;
}
LOOM_HOST_DEVICE inline float bitsToFloat(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof(f));
  return f;
}

// fp16 -> fp32 is exact (every fp16 value is an fp32 value).
LOOM_HOST_DEVICE inline float halfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  const uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1Fu) {  // inf, or NaN: quiet it, keep the payload
    const uint32_t quiet = mantissa != 0 ? 0x00400000u : 0u;
    return bitsToFloat(sign | 0x7F800000u | quiet | (mantissa << 13));
  }
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in fp32
    const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-08f;
    return bitsToFloat(sign | floatToBits(magnitude));
  }
  return bitsToFloat(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

// fp32 -> fp16, round to nearest even; overflow gives inf, tiny values give
// subnormals or zero.
LOOM_HOST_DEVICE inline uint16_t floatToHalf(float f) {
  const uint32_t u = floatToBits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t magnitude = u & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u)  // NaN: top payload bits, quiet bit set
    return static_cast<uint16_t>(sign | 0x7E00u | ((magnitude >> 13) & 0x3FFu));
  if (magnitude >= 0x477FF000u)  // >= 65520 rounds past 65504 (or is inf)
    return static_cast<uint16_t>(sign | 0x7C00u);
  if (magnitude >= 0x38800000u) {  // normal fp16 range: rebias, round 13 bits away
    const uint32_t rebiased = magnitude - (112u << 23);
    const uint32_t rounded = (rebiased + 0xFFFu + ((rebiased >> 13) & 1u)) >> 13;
    return static_cast<uint16_t>(sign | rounded);
  }
  // Subnormal fp16: value / 2^-24 = significand * 2^(exponent - 126).
  const uint32_t exponent = magnitude >> 23;
  const uint32_t shift = 126u - exponent;  // >= 14 here
  if (exponent == 0 || shift > 24u) return static_cast<uint16_t>(sign);
  const uint32_t significand = (magnitude & 0x7FFFFFu) | 0x800000u;
  const uint32_t quotient = significand >> shift;
  const uint32_t remainder = significand & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1u);
  const bool roundUp = remainder > halfway || (remainder == halfway && (quotient & 1u));
  return static_cast<uint16_t>(sign | (quotient + (roundUp ? 1u : 0u)));
}

// bf16 -> fp32 is exact: bf16 is the top half of an fp32.
LOOM_HOST_DEVICE inline float bf16ToFloat(uint16_t b) { return bitsToFloat(static_cast<uint32_t>(b) << 16); }

// fp32 -> bf16, round to nearest even on the bit pattern (the carry walks
// into the exponent, so overflow becomes inf by itself).
// Written as a select rather than a branch so gcc vectorizes it.
LOOM_HOST_DEVICE inline uint16_t floatToBf16(float f) {
  const uint32_t u = floatToBits(f);
  const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quietNan = (u >> 16) | 0x40u;
  return static_cast<uint16_t>((u & 0x7FFFFFFFu) > 0x7F800000u ? quietNan : rounded);
}

}  // namespace LOOM_KERNELS_ISA_NS
}  // namespace loom::kernels
