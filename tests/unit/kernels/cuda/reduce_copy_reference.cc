#include "tests/unit/kernels/cuda/reduce_copy_reference.h"

#include <cstring>

#include "tests/unit/kernels/reference.h"

namespace loom::kernels::cuda::testing {

std::vector<unsigned char> expectedReduceCopy(DataType type, RedOp op, const std::vector<const void*>& srcs,
                                              size_t count, PostOp post, int nranks, uint64_t scalar) {
  using namespace loom::kernels::testref;
  const bool is16 = type == DataType::kFloat16 || type == DataType::kBfloat16;
  const bool isSum = op == RedOp::kSum || op == RedOp::kAvg;
  std::vector<unsigned char> out(count * dataTypeSize(type));
  const Value factor = load(type, &scalar, 0);
  for (size_t i = 0; i < count; ++i) {
    Value v = load(type, srcs[0], i);
    if (is16 && isSum && srcs.size() > 2) {
      float sum = static_cast<float>(v.d);  // exact: every fp16/bf16 is an fp32
      for (size_t j = 1; j < srcs.size(); ++j) sum += static_cast<float>(load(type, srcs[j], i).d);
      v.d = sum;
      v = roundTo(type, v);
    } else {
      for (size_t j = 1; j < srcs.size(); ++j) v = roundTo(type, combine(op, v, load(type, srcs[j], i)));
    }
    if (post == PostOp::kDivideByRanks) v = divide(v, nranks);
    if (post == PostOp::kMultiplyByScalar) v = combine(RedOp::kProd, v, factor);
    store(type, out.data(), i, v);  // rounds
  }
  return out;
}

GuardedBuffer::GuardedBuffer(size_t bytes, size_t offset)
    : storage_(16 + offset + bytes + kGuardBytes, kSentinel), bytes_(bytes), offset_(offset) {
  const auto address = reinterpret_cast<uintptr_t>(storage_.data());
  base_ = storage_.data() + (16 - address % 16) % 16;
}

bool GuardedBuffer::guardsIntact() const {
  for (size_t k = 0; k < offset_; ++k)
    if (base_[k] != kSentinel) return false;
  for (size_t k = 0; k < kGuardBytes; ++k)
    if (base_[offset_ + bytes_ + k] != kSentinel) return false;
  return true;
}

}  // namespace loom::kernels::cuda::testing
