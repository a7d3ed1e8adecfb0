// Where a test's ranks come from.
//   runThreads(n, body): n ranks as threads of this process (loomCommInitAll);
//     an exception in one rank's body is reported as a test failure naming it.
//   processComm(): under `loomrun -n N ddp_distributed_test --gtest_filter=Process*`,
//     this process's rank of the job (created on first use); NULL otherwise.
#pragma once

#include <functional>

#include "loom/loom.h"

namespace loom::ddp::testing {

struct RankContext {
  loomComm_t comm;
  int rank;
  int nranks;
};

void runThreads(int nranks, const std::function<void(const RankContext&)>& body);

loomComm_t processComm();
// Runs body on this process's rank (the same code path as one thread above).
void runProcess(const std::function<void(const RankContext&)>& body);

}  // namespace loom::ddp::testing
