#include "tests/integration/case_matrix.h"

namespace loom::integration {
namespace {

constexpr int kWorldSizes[] = {1, 2, 3, 4, 8};
constexpr int kLargeDtypeOffset[kNumColls] = {0, 4, 8, 7, 2};

int entryIndex(Mode mode, int nranks) {
  int w = nranks % 5;  // world sizes outside the ctest list still rotate
  for (int i = 0; i < 5; ++i)
    if (kWorldSizes[i] == nranks) w = i;
  return 5 * static_cast<int>(mode) + w;
}

// The 1- and 2-byte types, for the rule on RS/AG above four ranks.
constexpr loomDataType_t kNarrowTypes[] = {loomInt8, loomUint8, loomFloat16, loomBfloat16};

bool isNarrow(loomDataType_t dtype) {
  for (auto t : kNarrowTypes)
    if (t == dtype) return true;
  return false;
}

bool isLargeCase(Coll coll, int nranks, int entry, loomDataType_t dtype, loomRedOp_t op, bool inPlace) {
  const int c = static_cast<int>(coll);
  auto largeType = static_cast<loomDataType_t>((entry + kLargeDtypeOffset[c]) % loomNumTypes);
  if (nranks > 4 && (coll == Coll::kReduceScatter || coll == Coll::kAllGather) && !isNarrow(largeType))
    largeType = kNarrowTypes[entry % 4];
  if (dtype != largeType) return false;
  if (!collTakesOp(coll)) return inPlace == ((entry + c) % 2 == 1);
  return op == (entry + c) % kMatrixOps && inPlace == (((entry + c) / kMatrixOps) % 2 == 1);
}

size_t typeSize(loomDataType_t dtype) {
  switch (dtype) {
    case loomInt8: case loomUint8: return 1;
    case loomFloat16: case loomBfloat16: return 2;
    case loomInt32: case loomUint32: case loomFloat32: return 4;
    default: return 8;
  }
}

}  // namespace

std::vector<CaseSpec> buildCases(Coll coll, int nranks, Mode mode, const MatrixOptions& options) {
  const int entry = entryIndex(mode, nranks) + options.largeRotation;
  const int numOps = collTakesOp(coll) ? kMatrixOps : 1;
  std::vector<CaseSpec> cases;
  for (int d = 0; d < loomNumTypes; ++d) {
    const auto dtype = static_cast<loomDataType_t>(d);
    const size_t chunk = options.chunkBytes / typeSize(dtype);
    for (int o = 0; o < numOps; ++o) {
      const auto op = static_cast<loomRedOp_t>(o);
      for (bool inPlace : {false, true}) {
        std::vector<size_t> counts = {0, 1, 7, 1023, chunk - 1, chunk + 1};
        if (options.largeCountEverywhere ||
            (options.largeCount && isLargeCase(coll, nranks, entry, dtype, op, inPlace)))
          counts.push_back(kLargeCount);
        for (size_t count : counts) {
          const auto index = static_cast<int>(cases.size());
          CaseSpec s;
          s.coll = coll;
          s.dtype = dtype;
          s.op = op;
          s.count = count;
          s.inPlace = inPlace;
          s.useBcast = coll == Coll::kBroadcast && inPlace && index % 2 == 1;
          s.misaligned = index % 4 >= 2;
          s.root = index % nranks;
          s.seed = (static_cast<uint64_t>(coll) << 32) + (static_cast<uint64_t>(nranks) << 24) + index + 1;
          cases.push_back(s);
        }
      }
    }
  }
  if (options.onlyCount != SIZE_MAX)
    std::erase_if(cases, [&](const CaseSpec& s) { return s.count != options.onlyCount; });
  return cases;
}

}  // namespace loom::integration
