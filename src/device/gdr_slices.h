// How the GPUDirect RDMA all-reduce (src/device/gdr_path.h) cuts a buffer: rank j
// owns slice j, the first count % nranks slices one element longer, so every
// rank computes the same cut from the call's arguments alone. Pure.
#pragma once

#include <cstddef>
#include <cstdint>

namespace loom::cuda {

struct GdrSlice {
  size_t offset = 0;  // elements
  size_t count = 0;
};

inline GdrSlice gdrSliceOf(size_t count, int nranks, int j) {
  const size_t n = static_cast<size_t>(nranks), base = count / n, extra = count % n, idx = static_cast<size_t>(j);
  return {idx * base + (idx < extra ? idx : extra), base + (idx < extra ? 1 : 0)};
}

// One scratch slot holds the longest slice, rounded up to 256 bytes so every
// slot starts aligned for the kernel's vector loads.
inline size_t gdrSlotBytes(size_t count, int nranks, size_t elemBytes) {
  const size_t longest = (count + static_cast<size_t>(nranks) - 1) / static_cast<size_t>(nranks) * elemBytes;
  return (longest + 255) / 256 * 256;
}

// The immediate of a write: which phase of which call it ends. A stale or
// foreign immediate is a protocol error, not data.
enum class GdrPhase : uint32_t { kReduceScatter = 1, kAllGather = 2 };
inline uint32_t gdrImmediate(uint64_t call, GdrPhase phase) {
  return static_cast<uint32_t>((call & 0xFFFFFF) << 8) | static_cast<uint32_t>(phase);
}

}  // namespace loom::cuda
