// copyStreaming(): the same bytes as memcpy for every length and alignment
// (head, non-temporal body and tail), and nothing written outside dst.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/stream_copy.h"

namespace {

TEST(StreamCopy, MatchesMemcpyAtEveryAlignmentAndLength) {
  constexpr size_t kGuard = 128;
  const size_t lengths[] = {0, 1, 15, 63, 64, 255, 256, 257, 1000, 4096, 4097, 65536 + 13};
  std::vector<uint8_t> src(65536 + 256);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 131 + 7);
  for (size_t len : lengths) {
    for (size_t srcOffset : {0, 1, 8, 33}) {
      for (size_t dstOffset = 0; dstOffset < 64; dstOffset += 7) {
        std::vector<uint8_t> dst(len + 2 * kGuard + 64, 0xA5);
        uint8_t* target = dst.data() + kGuard + dstOffset;
        loom::kernels::copyStreaming(target, src.data() + srcOffset, len);
        ASSERT_EQ(std::memcmp(target, src.data() + srcOffset, len), 0)
            << "len " << len << " src offset " << srcOffset << " dst offset " << dstOffset;
        for (uint8_t* p = dst.data(); p < target; ++p) ASSERT_EQ(*p, 0xA5) << "wrote before dst, len " << len;
        for (uint8_t* p = target + len; p < dst.data() + dst.size(); ++p)
          ASSERT_EQ(*p, 0xA5) << "wrote past dst, len " << len << " dst offset " << dstOffset;
      }
    }
  }
}

TEST(StreamCopy, LargeCopyOfAMessageSizedBuffer) {
  const size_t bytes = loom::kernels::kStreamingOutputBytes + 4093;
  std::vector<uint32_t> src(bytes / 4 + 1), dst(bytes / 4 + 1, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint32_t>(i * 2654435761u);
  loom::kernels::copyStreaming(dst.data(), src.data(), bytes);
  EXPECT_EQ(std::memcmp(dst.data(), src.data(), bytes), 0);
  const auto* after = reinterpret_cast<const uint8_t*>(dst.data()) + bytes;
  EXPECT_EQ(after[0], 0) << "wrote past the end";
}

}  // namespace
