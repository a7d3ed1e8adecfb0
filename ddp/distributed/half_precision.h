// fp32 <-> fp16 / bf16 conversions for DDP's compression hooks, written
// against IEEE bit layouts so they need nothing beyond the public API.
// Both directions round to nearest even, as PyTorch's tensor.to(float16 /
// bfloat16) does on CPU; overflow gives infinity and NaN stays NaN.
#pragma once

#include <cstdint>
#include <span>

namespace loom::ddp {

uint16_t floatToHalf(float value);
float halfToFloat(uint16_t bits);
uint16_t floatToBfloat16(float value);
float bfloat16ToFloat(uint16_t bits);

enum class HalfFormat { kFp16, kBf16 };

// out[i] = round(in[i] * scale) in `format` (scale first, in fp32: dividing by
// the world size before compressing keeps sums of large gradients finite).
void compressScaled(std::span<const float> in, float scale, HalfFormat format, std::span<uint16_t> out);
// out[i] = in[i] widened to fp32 (exact).
void decompress(std::span<const uint16_t> in, HalfFormat format, std::span<float> out);

}  // namespace loom::ddp
