#include "tests/unit/kernels/test_data.h"

#include <cstring>
#include <limits>
#include <random>

#include "tests/unit/kernels/reference.h"

namespace loom::kernels::testdata {
namespace {

// Bit patterns of the special values of each floating type.
const std::vector<uint64_t>& specials(DataType type) {
  static const std::vector<uint64_t> half = {0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFE55,
                                             0x7BFF, 0xFBFF, 0x0400, 0x0001, 0x8001, 0x03FF, 0x3C00};
  static const std::vector<uint64_t> bf16 = {0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0x7F81, 0xFFA5,
                                             0x7F7F, 0xFF7F, 0x0080, 0x0001, 0x8001, 0x007F, 0x3F80};
  static const std::vector<uint64_t> f32 = {0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000,
                                            0x7F800001, 0x7F7FFFFF, 0x00800000, 0x00000001, 0x807FFFFF,
                                            0x3F800000, 0xBF800000};
  static const std::vector<uint64_t> f64 = {0, 0x8000000000000000, 0x7FF0000000000000, 0xFFF0000000000000,
                                            0x7FF8000000000000, 0x7FF0000000000001, 0x7FEFFFFFFFFFFFFF,
                                            0x0010000000000000, 0x0000000000000001, 0x3FF0000000000000};
  switch (type) {
    case DataType::kFloat16: return half;
    case DataType::kBfloat16: return bf16;
    case DataType::kFloat32: return f32;
    default: return f64;
  }
}

void storeModerate(DataType type, unsigned char* p, double v) {
  testref::Value value;
  value.isFloat = true;
  value.bytes = static_cast<int>(dataTypeSize(type));
  value.d = v;
  testref::store(type, p, 0, value);
}

}  // namespace

std::vector<unsigned char> randomBuffer(DataType type, size_t count, uint64_t seed) {
  const size_t size = dataTypeSize(type);
  std::vector<unsigned char> buf(count * size);
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(type) * 1000003u);
  const bool isFloat = type == DataType::kFloat16 || type == DataType::kFloat32 || type == DataType::kFloat64 ||
                       type == DataType::kBfloat16;
  std::uniform_real_distribution<double> moderate(-64.0, 64.0);
  for (size_t i = 0; i < count; ++i) {
    unsigned char* p = buf.data() + i * size;
    uint64_t bits = rng();
    const unsigned pick = static_cast<unsigned>(rng() % 20);
    if (!isFloat || pick < 7) {
      std::memcpy(p, &bits, size);  // raw bit pattern
    } else if (pick < 17) {
      storeModerate(type, p, moderate(rng));
    } else {
      const auto& list = specials(type);
      bits = list[rng() % list.size()];
      std::memcpy(p, &bits, size);
    }
  }
  return buf;
}

std::vector<DataType> allTypes() {
  std::vector<DataType> types;
  for (int t = 0; t < kNumDataTypes; ++t) types.push_back(static_cast<DataType>(t));
  return types;
}

std::vector<RedOp> allOps() {
  std::vector<RedOp> ops;
  for (int op = 0; op < kNumRedOps; ++op)
    if (!isBitwiseOp(static_cast<RedOp>(op))) ops.push_back(static_cast<RedOp>(op));
  return ops;
}

std::vector<RedOp> opsFor(DataType type) {
  std::vector<RedOp> ops;
  for (int op = 0; op < kNumRedOps; ++op)
    if (opTakesType(static_cast<RedOp>(op), type)) ops.push_back(static_cast<RedOp>(op));
  return ops;
}

std::vector<Isa> allIsas() { return {Isa::kPortable, Isa::kAvx2, Isa::kAvx512}; }

std::string describe(DataType type, RedOp op, Isa isa, size_t count) {
  return std::string(dataTypeName(type)) + " " + redOpName(op) + " " + isaName(isa) +
         " count=" + std::to_string(count);
}

}  // namespace loom::kernels::testdata
