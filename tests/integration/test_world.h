// The ranks a test runs on: a clique of communicators in this process, one
// thread per rank (Threads* tests), or this process as one rank of a job
// started by loomrun (Process* tests). Plus the command-line options of
// collectives_test.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <loom/loom.h>

#include "tests/integration/case_matrix.h"

namespace loom::integration {

struct TestOptions {
  int threadWorldSize = 2;  // --world-size=N or LOOM_TEST_WORLD_SIZE (Threads* tests)
  MatrixOptions matrix;     // chunkBytes from LOOM_CHUNK_SIZE; --large-count=0|1, --only-count=N
};
TestOptions& testOptions();
// Parses the arguments gtest left over; false with *error on a bad one.
bool parseTestOptions(int argc, char** argv, std::string* error);

// ndev communicators from loomCommInitAll, destroyed with the object.
class Clique {
 public:
  explicit Clique(int nranks);
  ~Clique();
  Clique(const Clique&) = delete;
  Clique& operator=(const Clique&) = delete;

  loomResult_t initResult() const { return initResult_; }
  const std::string& initError() const { return initError_; }
  int size() const { return static_cast<int>(comms_.size()); }
  loomComm_t comm(int rank) const { return comms_[rank]; }

 private:
  std::vector<loomComm_t> comms_;
  loomResult_t initResult_;
  std::string initError_;
};

// Runs body(rank) on one thread per rank and joins them all.
void runOnRankThreads(int nranks, const std::function<void(int rank)>& body);

// This process's rank of a loomrun job, created on first use and destroyed
// by destroyProcessWorld() at the end of main (false if that failed; the
// reason is printed).
struct ProcessWorld {
  loomComm_t comm = nullptr;
  int rank = -1;
  int nranks = 0;
  std::string error;    // why comm is null
  bool broken = false;  // a call failed: later collectives would not match across ranks
};
bool startedByLauncher();  // RANK and WORLD_SIZE are set
ProcessWorld& processWorld();
bool destroyProcessWorld();

// Runs every case on one rank with a NULL (blocking) stream, checking each
// result. Stops at the first call that does not return loomSuccess, since
// the ranks' later calls would no longer match; returns false then.
bool runCasesOnRank(const std::vector<CaseSpec>& cases, loomComm_t comm, int rank, int nranks);

}  // namespace loom::integration
