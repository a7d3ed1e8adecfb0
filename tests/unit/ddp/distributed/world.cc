#include "tests/unit/ddp/distributed/world.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <exception>
#include <string>
#include <thread>
#include <vector>

namespace loom::ddp::testing {
namespace {
loomComm_t gProcessComm = nullptr;
}

void runThreads(int nranks, const std::function<void(const RankContext&)>& body) {
  std::vector<loomComm_t> comms(nranks);
  ASSERT_EQ(loomCommInitAll(comms.data(), nranks, nullptr), loomSuccess) << loomGetLastError(nullptr);
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(RankContext{comms[r], r, nranks});
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << r << " threw: " << e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (loomComm_t c : comms) loomCommDestroy(c);
}

loomComm_t processComm() {
  if (gProcessComm) return gProcessComm;
  if (!std::getenv("WORLD_SIZE") || !std::getenv("RANK")) return nullptr;
  loomUniqueId id;
  int rank = 0, nranks = 0;
  if (loomGetUniqueIdFromEnv(&id, &rank, &nranks) != loomSuccess) return nullptr;
  if (loomCommInitRank(&gProcessComm, nranks, id, rank) != loomSuccess) return nullptr;
  std::atexit([] { loomCommDestroy(gProcessComm); });
  return gProcessComm;
}

void runProcess(const std::function<void(const RankContext&)>& body) {
  loomComm_t comm = processComm();
  if (!comm) GTEST_SKIP() << "not started by loomrun (run: loomrun -n N ddp_distributed_test --gtest_filter=Process*)";
  int rank = 0, nranks = 0;
  loomCommUserRank(comm, &rank);
  loomCommCount(comm, &nranks);
  try {
    body(RankContext{comm, rank, nranks});
  } catch (const std::exception& e) {
    ADD_FAILURE() << "rank " << rank << " threw: " << e.what();
  }
}

}  // namespace loom::ddp::testing
