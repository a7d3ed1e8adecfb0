#include "tests/unit/ddp/distributed/grad_patterns.h"

#include <cstdint>

namespace loom::ddp::testing {

float gradPattern(int rank, int step, size_t element, bool awayFromZero) {
  // splitmix64 of the three coordinates: cheap, well mixed, reproducible.
  uint64_t z = element * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(rank) * 0xbf58476d1ce4e5b9ull +
               static_cast<uint64_t>(step) * 0x94d049bb133111ebull + 0x1234567ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  const double u = static_cast<double>(z >> 11) * 0x1p-53;  // [0, 1)
  if (!awayFromZero) return static_cast<float>(2.0 * u - 1.0);
  const double magnitude = 0.25 + 0.75 * (2.0 * u - (u >= 0.5 ? 1.0 : 0.0));
  return static_cast<float>(u >= 0.5 ? magnitude : -magnitude);
}

std::unique_ptr<ParameterStore> makeStore(const std::vector<size_t>& sizes, int rank) {
  auto store = std::make_unique<ParameterStore>();
  for (size_t i = 0; i < sizes.size(); ++i) store->add("p" + std::to_string(i), {sizes[i]});
  store->finalize();
  for (size_t i = 0; i < store->totalSize(); ++i) store->values()[i] = gradPattern(rank, -1, i);
  return store;
}

namespace {
void addPattern(ParameterStore& store, size_t param, int rank, int step, bool awayFromZero) {
  const ParamInfo& p = store.info(param);
  for (size_t e = 0; e < p.size; ++e) store.grads()[p.offset + e] += gradPattern(rank, step, p.offset + e, awayFromZero);
}
}  // namespace

void fakeBackward(ParameterStore& store, int rank, int step, size_t stopBefore, bool awayFromZero) {
  for (size_t i = store.count(); i-- > stopBefore;) {
    addPattern(store, i, rank, step, awayFromZero);
    store.markGradReady(i);
  }
}

void finishFakeBackward(ParameterStore& store, int rank, int step, size_t stopBefore, bool awayFromZero) {
  for (size_t i = stopBefore; i-- > 0;) {
    addPattern(store, i, rank, step, awayFromZero);
    store.markGradReady(i);
  }
}

double meanPattern(int nranks, const std::vector<int>& steps, size_t element, bool awayFromZero) {
  double sum = 0;
  for (int r = 0; r < nranks; ++r)
    for (int s : steps) sum += gradPattern(r, s, element, awayFromZero);
  return sum / nranks;
}

}  // namespace loom::ddp::testing
