// Expected results of a reduce-copy, computed with the kernels tests'
// independent scalar reference (tests/unit/kernels/reference.h: decode to
// int64/double, combine, round with its own IEEE rounding), sharing no code
// with kernels/reduce_ops.h or kernels/cuda/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/types.h"
#include "kernels/cuda/reduce_copy_args.h"

namespace loom::kernels::cuda::testing {

// The `count` elements every destination must hold. Sources combine in index
// order, rounding to `type` after each step, except fp16/bf16 Sum/Avg over
// more than two sources: those add in fp32 and round once (the contract).
std::vector<unsigned char> expectedReduceCopy(DataType type, RedOp op, const std::vector<const void*>& srcs,
                                              size_t count, PostOp post, int nranks, uint64_t scalar);

// A 16-byte aligned region with `offset` bytes before the data and a guard
// after it, filled with kSentinel; checks that nothing outside the data changed.
class GuardedBuffer {
 public:
  static constexpr unsigned char kSentinel = 0xA5;
  static constexpr size_t kGuardBytes = 64;
  GuardedBuffer(size_t bytes, size_t offset);
  unsigned char* data() { return base_ + offset_; }
  const unsigned char* data() const { return base_ + offset_; }
  size_t offset() const { return offset_; }
  bool guardsIntact() const;

 private:
  std::vector<unsigned char> storage_;
  unsigned char* base_;
  size_t bytes_;
  size_t offset_;
};

}  // namespace loom::kernels::cuda::testing
