// The 64-bit UCP tags of the UCX transport.
//
// One worker serves every peer of a communicator and tag matching ignores
// which endpoint a message came in on, so each tag names its kind and the
// sending rank; data tags also carry the chunk's sequence number, so a
// preposted receive matches exactly the chunk meant for its slot, whatever
// else is in flight.
//
//   bits 63..60  kind (kData, kCredit, kHello, kGoodbye)
//   bits 59..40  sending rank (up to 2^20 ranks)
//   bits 39..0   chunk sequence number modulo 2^40 (kData), else 0
//
// At most `slots` chunks of one direction are in flight, so sequence numbers
// that wrap after 2^40 chunks are never ambiguous.
#pragma once

#include <cstdint>

namespace loom::transport::ucx {

enum class TagKind : uint64_t { kData = 1, kCredit = 2, kHello = 3, kGoodbye = 4 };

constexpr int kTagRankBits = 20;
constexpr int kTagSeqBits = 40;
constexpr int kMaxTagRanks = 1 << kTagRankBits;
constexpr uint64_t kTagSeqMask = (uint64_t{1} << kTagSeqBits) - 1;
constexpr uint64_t kTagMatchAll = ~uint64_t{0};

constexpr uint64_t makeTag(TagKind kind, int srcRank, uint64_t seq = 0) {
  return (static_cast<uint64_t>(kind) << 60) |
         ((static_cast<uint64_t>(srcRank) & (kMaxTagRanks - 1)) << kTagSeqBits) | (seq & kTagSeqMask);
}
constexpr TagKind tagKind(uint64_t tag) { return static_cast<TagKind>(tag >> 60); }
constexpr int tagRank(uint64_t tag) { return static_cast<int>((tag >> kTagSeqBits) & (kMaxTagRanks - 1)); }
constexpr uint64_t tagSeq(uint64_t tag) { return tag & kTagSeqMask; }

}  // namespace loom::transport::ucx
