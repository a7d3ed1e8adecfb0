// The reduce-copy kernel body, run by the host emulation over emulated
// grids, against the independent reference: every DataType x RedOp, 1/2/3/8
// sources into 1/2 destinations, empty to large counts, every misalignment,
// grids with more threads than elements and far fewer, fp16/bf16 rounding and
// specials, Avg's integer truncation, scale-copy, in-place. No GPU needed.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda/reduce_copy_core.h"
#include "kernels/cuda/reduce_copy_emulation.h"
#include "tests/unit/kernels/reference.h"
#include "tests/unit/kernels/test_data.h"
#include "tests/unit/kernels/cuda/reduce_copy_reference.h"

namespace loom::kernels::cuda {
namespace {

using testing::expectedReduceCopy;
using testing::GuardedBuffer;

struct Case {
  DataType type = DataType::kFloat32;
  RedOp op = RedOp::kSum;
  int nsrcs = 2;
  int ndsts = 1;
  size_t count = 0;
  std::vector<size_t> offsets{};  // byte offset from 16-byte alignment per buffer (srcs then dsts); default 0
  LaunchShape shape{3, 64};
  PostOp post = PostOp::kNone;
  int nranks = 1;
  uint64_t scalar = 0;
  bool inPlace = false;  // dsts[0] is srcs[0]

  std::string describe() const {
    std::string s = std::string(dataTypeName(type)) + " " + redOpName(op) + " k=" + std::to_string(nsrcs) +
                    " m=" + std::to_string(ndsts) + " count=" + std::to_string(count) + " grid=" +
                    std::to_string(shape.blocks) + "x" + std::to_string(shape.threadsPerBlock) +
                    " post=" + std::to_string(static_cast<int>(post)) + " offsets=";
    for (size_t o : offsets) s += std::to_string(o) + ",";
    return s + (inPlace ? " in-place" : "");
  }
};

size_t offsetOf(const Case& c, size_t buffer) { return buffer < c.offsets.size() ? c.offsets[buffer] : 0; }

// Fills the sources from `seed` (or `inputs` when given), runs the emulation,
// checks every destination and every guard zone.
void runCase(const Case& c, uint64_t seed, const std::vector<std::vector<unsigned char>>* inputs = nullptr) {
  SCOPED_TRACE(c.describe());
  const size_t size = dataTypeSize(c.type);
  const size_t bytes = c.count * size;
  std::vector<GuardedBuffer> srcs, dsts;
  std::vector<const void*> original;
  std::vector<std::vector<unsigned char>> data;
  for (int j = 0; j < c.nsrcs; ++j) {
    data.push_back(inputs ? (*inputs)[j] : testdata::randomBuffer(c.type, c.count, seed + j));
    srcs.emplace_back(bytes, offsetOf(c, j));
    if (bytes) std::memcpy(srcs.back().data(), data.back().data(), bytes);
  }
  for (const auto& d : data) original.push_back(d.data());
  for (int j = 0; j < c.ndsts; ++j) dsts.emplace_back(bytes, offsetOf(c, c.nsrcs + j));
  const std::vector<unsigned char> expected =
      expectedReduceCopy(c.type, c.op, original, c.count, c.post, c.nranks, c.scalar);

  ReduceCopyArgs args;
  args.type = c.type;
  args.op = c.op;
  args.nsrcs = c.nsrcs;
  args.ndsts = c.ndsts;
  args.count = c.count;
  args.post = c.post;
  args.nranks = c.nranks;
  args.scalar = c.scalar;
  for (int j = 0; j < c.nsrcs; ++j) args.srcs[j] = srcs[j].data();
  for (int j = 0; j < c.ndsts; ++j) args.dsts[j] = dsts[j].data();
  if (c.inPlace) args.dsts[0] = srcs[0].data();

  const char* error = emulateReduceCopy(args, c.shape);
  ASSERT_EQ(error, nullptr) << error;
  for (int j = 0; j < c.ndsts; ++j) {
    const unsigned char* out = static_cast<const unsigned char*>(args.dsts[j]);
    const size_t bad = testref::firstMismatch(c.type, expected.data(), out, c.count);
    ASSERT_EQ(bad, c.count) << "destination " << j << " differs at element " << bad;
  }
  for (const auto& b : srcs) EXPECT_TRUE(b.guardsIntact()) << "a source's guard zone changed";
  for (const auto& b : dsts) EXPECT_TRUE(b.guardsIntact()) << "a destination's guard zone changed";
  if (!c.inPlace) {
    for (int j = 0; j < c.nsrcs && bytes > 0; ++j) {
      EXPECT_EQ(std::memcmp(srcs[j].data(), data[j].data(), bytes), 0) << "source " << j << " changed";
    }
  }
}

TEST(ReduceCopyEmulation, EveryTypeOpSourceAndDestinationCount) {
  uint64_t seed = 1;
  for (DataType type : testdata::allTypes())
    for (RedOp op : testdata::opsFor(type))
      for (int k : {1, 2, 3, 8})
        for (int m : {1, 2})
          for (size_t count : {size_t{0}, size_t{1}, size_t{5}, size_t{37}, size_t{1003}}) {
            Case c{.type = type, .op = op, .nsrcs = k, .ndsts = m, .count = count};
            if (op == RedOp::kAvg) {
              c.post = PostOp::kDivideByRanks;
              c.nranks = k + 1;
            }
            runCase(c, seed += 10);
            if (::testing::Test::HasFatalFailure()) return;
          }
}

TEST(ReduceCopyEmulation, AvgWithoutPostStepReducesAsSum) {
  for (DataType type : testdata::allTypes())
    runCase({.type = type, .op = RedOp::kAvg, .nsrcs = 3, .ndsts = 1, .count = 301}, 7);
}

// Same offset everywhere (head/vectors/tail when it is a multiple of the
// element size, else all scalar) and offsets that differ between buffers.
TEST(ReduceCopyEmulation, MisalignedPointers) {
  for (DataType type : testdata::allTypes())
    for (RedOp op : {RedOp::kSum, RedOp::kMax, RedOp::kProd})
      for (size_t offset = 0; offset < 16; ++offset) {
        Case c{.type = type, .op = op, .nsrcs = 3, .ndsts = 2, .count = 133, .shape = {2, 32}};
        c.offsets.assign(5, offset);
        runCase(c, 100 + offset);
        c.offsets = {offset, (offset + 8) % 16, offset, offset, (offset + 4) % 16};
        runCase(c, 200 + offset);
        if (::testing::Test::HasFatalFailure()) return;
      }
}

TEST(ReduceCopyEmulation, PlanSplitsHeadVectorsTail) {
  alignas(16) static unsigned char a[256], b[256], d[256];
  ReduceCopyArgs args;
  args.type = DataType::kFloat32;
  args.nsrcs = 2;
  args.ndsts = 1;
  args.count = 40;
  // All at offset 4: 3 head elements, (40 - 3) / 4 = 9 vectors, 1 tail element.
  args.srcs[0] = a + 4;
  args.srcs[1] = b + 4;
  args.dsts[0] = d + 4;
  ReduceCopyParams p = planReduceCopy(args);
  EXPECT_EQ(p.head, 3u);
  EXPECT_EQ(p.vectors, 9u);
  EXPECT_TRUE(p.elementAligned);
  // Offsets differ: every element is scalar.
  args.dsts[0] = d + 8;
  p = planReduceCopy(args);
  EXPECT_EQ(p.head, 40u);
  EXPECT_EQ(p.vectors, 0u);
  EXPECT_TRUE(p.elementAligned);
  // Same offset but not a multiple of 4: scalar, and byte-wise on the device.
  args.srcs[0] = a + 1;
  args.srcs[1] = b + 1;
  args.dsts[0] = d + 1;
  p = planReduceCopy(args);
  EXPECT_EQ(p.vectors, 0u);
  EXPECT_FALSE(p.elementAligned);
  // Fewer elements than the head: all head.
  args.srcs[0] = a + 4;
  args.srcs[1] = b + 4;
  args.dsts[0] = d + 4;
  args.count = 2;
  p = planReduceCopy(args);
  EXPECT_EQ(p.head, 2u);
  EXPECT_EQ(p.vectors, 0u);
}

TEST(ReduceCopyEmulation, GridShapes) {
  struct Shape {
    LaunchShape shape;
    size_t count;
  };
  const Shape shapes[] = {
      {{4, 256}, 3},      // far more threads than elements
      {{8, 128}, 50},     // more threads than vectors
      {{1, 1}, 4099},     // one thread does everything
      {{2, 3}, 100003},   // elements >> threads, odd thread count
      {{7, 33}, 65536},   // unroll steps straddle the end
      {{0, 0}, 1 << 18},  // the launcher's automatic shape
      {{0, 0}, 1},
  };
  for (const Shape& s : shapes)
    for (DataType type : {DataType::kFloat32, DataType::kFloat16, DataType::kInt8, DataType::kFloat64})
      for (int k : {1, 2, 3}) {
        Case c{.type = type, .op = RedOp::kSum, .nsrcs = k, .ndsts = 2, .count = s.count, .shape = s.shape};
        c.offsets = {dataTypeSize(type), dataTypeSize(type), dataTypeSize(type), dataTypeSize(type),
                     dataTypeSize(type)};
        runCase(c, 300 + k);
        if (::testing::Test::HasFatalFailure()) return;
      }
}

TEST(ReduceCopyEmulation, InPlaceIntoFirstSource) {
  for (DataType type : testdata::allTypes())
    for (RedOp op : {RedOp::kSum, RedOp::kMin})
      runCase({.type = type, .op = op, .nsrcs = 2, .ndsts = 2, .count = 100, .inPlace = true}, 400);
}

TEST(ReduceCopyEmulation, ScaleCopy) {
  for (DataType type : testdata::allTypes()) {
    std::vector<unsigned char> scalar(8, 0);
    testref::Value v;
    v.bytes = static_cast<int>(dataTypeSize(type));
    v.isFloat = type == DataType::kFloat16 || type == DataType::kFloat32 || type == DataType::kFloat64 ||
                type == DataType::kBfloat16;
    v.isSigned = type == DataType::kInt8 || type == DataType::kInt32 || type == DataType::kInt64;
    v.i = -3;
    v.u = static_cast<uint64_t>(-3);
    v.d = -1.5;
    testref::store(type, scalar.data(), 0, v);
    Case c{.type = type, .nsrcs = 1, .ndsts = 2, .count = 77, .post = PostOp::kMultiplyByScalar};
    std::memcpy(&c.scalar, scalar.data(), 8);
    runCase(c, 500);

    // makeScaleCopyArgs builds the same launch.
    const std::vector<unsigned char> src = testdata::randomBuffer(type, 77, 501);
    std::vector<unsigned char> out(src.size());
    void* dst = out.data();
    const ReduceCopyArgs args = makeScaleCopyArgs(type, &dst, 1, src.data(), 77, scalar.data());
    ASSERT_EQ(emulateReduceCopy(args), nullptr);
    const auto expected =
        expectedReduceCopy(type, RedOp::kSum, {src.data()}, 77, PostOp::kMultiplyByScalar, 1, c.scalar);
    EXPECT_EQ(testref::firstMismatch(type, expected.data(), out.data(), 77), 77u) << dataTypeName(type);
  }
}

// ---- Hand-checked values (not only the reference) -------------------------

std::vector<unsigned char> bytesOf16(std::initializer_list<uint16_t> values) {
  std::vector<unsigned char> out(values.size() * 2);
  std::memcpy(out.data(), values.begin(), out.size());
  return out;
}

std::vector<uint16_t> run16(DataType type, RedOp op, const std::vector<std::vector<unsigned char>>& inputs,
                            PostOp post = PostOp::kNone, int nranks = 1) {
  const size_t count = inputs[0].size() / 2;
  ReduceCopyArgs args;
  args.type = type;
  args.op = op;
  args.nsrcs = static_cast<int>(inputs.size());
  args.ndsts = 1;
  args.count = count;
  args.post = post;
  args.nranks = nranks;
  // 16-byte aligned copies: the lanes go through the vector path.
  std::vector<GuardedBuffer> srcs;
  for (size_t j = 0; j < inputs.size(); ++j) {
    srcs.emplace_back(count * 2, 0);
    std::memcpy(srcs.back().data(), inputs[j].data(), count * 2);
    args.srcs[j] = srcs.back().data();
  }
  GuardedBuffer dst(count * 2, 0);
  args.dsts[0] = dst.data();
  EXPECT_EQ(emulateReduceCopy(args, {1, 1}), nullptr);
  std::vector<uint16_t> out(count);
  std::memcpy(out.data(), dst.data(), count * 2);
  return out;
}

bool isHalfNan(uint16_t h) { return (h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0; }
bool isBf16Nan(uint16_t b) { return (b & 0x7F80) == 0x7F80 && (b & 0x7F) != 0; }

TEST(ReduceCopyEmulation, HalfRoundingAndSpecials) {
  // 8 lanes = one vector. Sum of two:
  //   1 + 2^-11 is a tie -> even (1.0); (1 + 2^-10) + 2^-11 -> 1 + 2^-9 (even);
  //   65504 + 16 -> 65520 rounds to inf; inf + -inf -> NaN; NaN + 1 -> NaN;
  //   -0 + -0 -> -0; smallest subnormals 2^-24 + 2^-24 -> 2^-23; 1 + -1 -> +0.
  const auto a = bytesOf16({0x3C00, 0x3C01, 0x7BFF, 0x7C00, 0x7E00, 0x8000, 0x0001, 0x3C00});
  const auto b = bytesOf16({0x1000, 0x1000, 0x4C00, 0xFC00, 0x3C00, 0x8000, 0x0001, 0xBC00});
  const std::vector<uint16_t> sum = run16(DataType::kFloat16, RedOp::kSum, {a, b});
  EXPECT_EQ(sum[0], 0x3C00);
  EXPECT_EQ(sum[1], 0x3C02);
  EXPECT_EQ(sum[2], 0x7C00);
  EXPECT_TRUE(isHalfNan(sum[3]));
  EXPECT_TRUE(isHalfNan(sum[4]));
  EXPECT_EQ(sum[5], 0x8000);
  EXPECT_EQ(sum[6], 0x0002);
  EXPECT_EQ(sum[7], 0x0000);

  // Three sources accumulate in fp32: 1 + 2^-11 + 2^-11 = 1 + 2^-10 exactly
  // (rounding after each step would give 1.0).
  const auto one = bytesOf16({0x3C00, 0x3C00, 0x3C00, 0x3C00, 0x3C00, 0x3C00, 0x3C00, 0x3C00});
  const auto tiny = bytesOf16({0x1000, 0x1000, 0x1000, 0x1000, 0x1000, 0x1000, 0x1000, 0x1000});
  for (uint16_t h : run16(DataType::kFloat16, RedOp::kSum, {one, tiny, tiny})) EXPECT_EQ(h, 0x3C01);
  // Products round after every step: (1 + 2^-10)^2 = 1 + 2^-9 + 2^-20 -> 0x3C02.
  const auto x = bytesOf16({0x3C01, 0x3C01, 0x3C01, 0x3C01, 0x3C01, 0x3C01, 0x3C01, 0x3C01});
  for (uint16_t h : run16(DataType::kFloat16, RedOp::kProd, {x, x})) EXPECT_EQ(h, 0x3C02);

  // Max/Min: NaN wins either way round; +0 vs -0 gives the second operand.
  const auto p = bytesOf16({0x7E00, 0x3C00, 0x0000, 0x8000, 0xFC00, 0x7C00, 0x4000, 0x7D00});
  const auto q = bytesOf16({0x3C00, 0x7E00, 0x8000, 0x0000, 0x3C00, 0x3C00, 0xC000, 0x3C00});
  const std::vector<uint16_t> mx = run16(DataType::kFloat16, RedOp::kMax, {p, q});
  EXPECT_TRUE(isHalfNan(mx[0]));
  EXPECT_TRUE(isHalfNan(mx[1]));
  EXPECT_EQ(mx[2], 0x8000);
  EXPECT_EQ(mx[3], 0x0000);
  EXPECT_EQ(mx[4], 0x3C00);
  EXPECT_EQ(mx[5], 0x7C00);
  EXPECT_EQ(mx[6], 0x4000);
  EXPECT_EQ(mx[7], 0x7F00);  // signalling NaN 0x7D00 comes back quiet, payload kept
  const std::vector<uint16_t> mn = run16(DataType::kFloat16, RedOp::kMin, {p, q});
  EXPECT_TRUE(isHalfNan(mn[0]));
  EXPECT_EQ(mn[4], 0xFC00);
  EXPECT_EQ(mn[6], 0xC000);

  // Avg of 3 ranks: (1 + 2) / 3 = 1.0; 1 / 3 rounds to 0x3555.
  const auto ones = bytesOf16({0x3C00, 0x3C00, 0x3C00, 0x3C00, 0x3C00, 0x3C00, 0x3C00, 0x3C00});
  const auto twos = bytesOf16({0x4000, 0x0000, 0x4000, 0x0000, 0x4000, 0x0000, 0x4000, 0x0000});
  const std::vector<uint16_t> avg = run16(DataType::kFloat16, RedOp::kAvg, {ones, twos}, PostOp::kDivideByRanks, 3);
  EXPECT_EQ(avg[0], 0x3C00);
  EXPECT_EQ(avg[1], 0x3555);
}

TEST(ReduceCopyEmulation, Bf16RoundingAndSpecials) {
  // 1 + 2^-8 is a tie -> 1.0; (1 + 2^-7) + 2^-8 -> 1 + 2^-6; max finite + max
  // finite -> inf; inf + -inf -> NaN; -0 + -0 -> -0; 2^-133 + 2^-133 (smallest
  // subnormal, kept, not flushed); 3 * ... products below.
  const auto a = bytesOf16({0x3F80, 0x3F81, 0x7F7F, 0x7F80, 0x7FC0, 0x8000, 0x0001, 0x3F80});
  const auto b = bytesOf16({0x3B80, 0x3B80, 0x7F7F, 0xFF80, 0x3F80, 0x8000, 0x0001, 0xBF80});
  const std::vector<uint16_t> sum = run16(DataType::kBfloat16, RedOp::kSum, {a, b});
  EXPECT_EQ(sum[0], 0x3F80);
  EXPECT_EQ(sum[1], 0x3F82);
  EXPECT_EQ(sum[2], 0x7F80);
  EXPECT_TRUE(isBf16Nan(sum[3]));
  EXPECT_TRUE(isBf16Nan(sum[4]));
  EXPECT_EQ(sum[5], 0x8000);
  EXPECT_EQ(sum[6], 0x0002);
  EXPECT_EQ(sum[7], 0x0000);
  // Four sources in fp32: 1 + 3 * 2^-8 = 1.01171875, a tie between 0x3F81 and 0x3F82 -> even (0x3F82)
  // (rounding after each step: 1.0 every time).
  const auto one = bytesOf16({0x3F80, 0x3F80, 0x3F80, 0x3F80, 0x3F80, 0x3F80, 0x3F80, 0x3F80});
  const auto tiny = bytesOf16({0x3B80, 0x3B80, 0x3B80, 0x3B80, 0x3B80, 0x3B80, 0x3B80, 0x3B80});
  for (uint16_t h : run16(DataType::kBfloat16, RedOp::kSum, {one, tiny, tiny, tiny})) EXPECT_EQ(h, 0x3F82);
  // Max with NaN; signalling NaN 0x7F81 comes back quiet (0x7FC1).
  const auto p = bytesOf16({0x7F81, 0x3F80, 0x0000, 0x8000, 0xFF80, 0x7F80, 0x4000, 0x3F80});
  const auto q = bytesOf16({0x3F80, 0x7FC0, 0x8000, 0x0000, 0x3F80, 0x3F80, 0xC000, 0x4000});
  const std::vector<uint16_t> mx = run16(DataType::kBfloat16, RedOp::kMax, {p, q});
  EXPECT_EQ(mx[0], 0x7FC1);
  EXPECT_TRUE(isBf16Nan(mx[1]));
  EXPECT_EQ(mx[2], 0x8000);
  EXPECT_EQ(mx[3], 0x0000);
  EXPECT_EQ(mx[5], 0x7F80);
  EXPECT_EQ(mx[7], 0x4000);
}

TEST(ReduceCopyEmulation, AvgTruncatesIntegersTowardZero) {
  // int8: (-7 + 0) / 2 = -3; (100 + 100) wraps to -56, / 2 = -28; uint8 (255 + 255) wraps to 254, / 2 = 127.
  auto runInt = [](DataType type, std::vector<int64_t> a, std::vector<int64_t> b, int nranks) {
    const size_t size = dataTypeSize(type);
    std::vector<unsigned char> ba(a.size() * size), bb(b.size() * size), out(a.size() * size);
    for (size_t i = 0; i < a.size(); ++i) {
      std::memcpy(ba.data() + i * size, &a[i], size);  // little-endian truncation
      std::memcpy(bb.data() + i * size, &b[i], size);
    }
    ReduceCopyArgs args;
    args.type = type;
    args.op = RedOp::kAvg;
    args.nsrcs = 2;
    args.srcs[0] = ba.data();
    args.srcs[1] = bb.data();
    args.ndsts = 1;
    args.dsts[0] = out.data();
    args.count = a.size();
    args.post = PostOp::kDivideByRanks;
    args.nranks = nranks;
    EXPECT_EQ(emulateReduceCopy(args, {1, 2}), nullptr);
    std::vector<int64_t> result(a.size(), 0);
    for (size_t i = 0; i < a.size(); ++i) std::memcpy(&result[i], out.data() + i * size, size);
    return result;
  };
  EXPECT_EQ(runInt(DataType::kInt8, {-7, 100, 7, -1}, {0, 100, 0, 0}, 2), (std::vector<int64_t>{0xFD, 0xE4, 3, 0}));
  EXPECT_EQ(runInt(DataType::kUint8, {255, 3}, {255, 2}, 2), (std::vector<int64_t>{127, 2}));
  EXPECT_EQ(runInt(DataType::kInt32, {-5, 5, -2147483647 - 1}, {0, 0, 0}, 3),
            (std::vector<int64_t>{0xFFFFFFFF, 1, 0xD5555556}));  // -1, 1, -715827882
  EXPECT_EQ(runInt(DataType::kInt64, {-9, INT64_MIN}, {0, 0}, 4), (std::vector<int64_t>{-2, INT64_MIN / 4}));
  EXPECT_EQ(runInt(DataType::kUint32, {0xFFFFFFFF}, {0}, 7), (std::vector<int64_t>{0xFFFFFFFF / 7}));
}

TEST(ReduceCopyEmulation, RejectsInvalidArguments) {
  float a[4] = {}, d[4] = {};
  ReduceCopyArgs ok;
  ok.nsrcs = 1;
  ok.srcs[0] = a;
  ok.ndsts = 1;
  ok.dsts[0] = d;
  ok.count = 4;
  EXPECT_EQ(reduceCopyArgsError(ok), nullptr);
  auto expectError = [&](ReduceCopyArgs args, LaunchShape shape, const char* what) {
    const char* error = emulateReduceCopy(args, shape);
    ASSERT_NE(error, nullptr) << what;
    EXPECT_NE(std::string(error).find(what), std::string::npos) << error;
  };
  ReduceCopyArgs bad = ok;
  bad.nsrcs = 0;
  expectError(bad, {}, "nsrcs");
  bad.nsrcs = kMaxSources + 1;
  expectError(bad, {}, "nsrcs");
  bad = ok;
  bad.ndsts = 0;
  expectError(bad, {}, "ndsts");
  bad = ok;
  bad.dsts[0] = nullptr;
  expectError(bad, {}, "destination");
  bad = ok;
  bad.srcs[0] = nullptr;
  expectError(bad, {}, "source");
  bad = ok;
  bad.post = PostOp::kDivideByRanks;
  bad.nranks = 0;
  expectError(bad, {}, "nranks");
  bad = ok;
  bad.type = static_cast<DataType>(kNumDataTypes);
  expectError(bad, {}, "type");
  expectError(ok, {0, 32}, "blocks");
  expectError(ok, {1, kMaxThreadsPerBlock + 1}, "threadsPerBlock");
  // Null pointers are fine when there is nothing to do.
  bad = ok;
  bad.count = 0;
  bad.srcs[0] = nullptr;
  EXPECT_EQ(emulateReduceCopy(bad), nullptr);
}

}  // namespace
}  // namespace loom::kernels::cuda
