#include "tests/support/rank_threads.h"

#include <thread>
#include <vector>

namespace loom::testing {

void runRankThreads(int nranks, const std::function<void(int rank)>& body) {
  std::vector<std::thread> threads;
  threads.reserve(nranks);
  for (int r = 0; r < nranks; ++r) threads.emplace_back(body, r);
  for (auto& t : threads) t.join();
}

}  // namespace loom::testing
