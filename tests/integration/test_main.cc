// collectives_test: the integration suite over the public C API.
//   collectives_test --gtest_filter='Threads*' --world-size=N   (ranks as threads)
//   loomrun -n N collectives_test --gtest_filter='Process*'     (ranks as processes)
//   --large-count=0 leaves out the 4M+3 case, =all runs it for every case (see case_matrix.h);
//   --large-rotation=K shifts which combination gets 4M+3 (entries sharing a world size);
//   --only-count=N runs only the matrix cases of count N (same roots and seeds).
//   With LOOM_ALGO/LOOM_PROTO set, every matrix call must report the forced
//   algorithm/protocol wherever it can run (forced_algorithm.h).
//   collectives_test --gtest_filter='Deterministic*' checks LOOM_DETERMINISTIC=1.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/integration/test_world.h"

int main(int argc, char** argv) {
  // A hang fails within two minutes instead of the library's default five,
  // unless the caller chose a timeout.
  setenv("LOOM_TIMEOUT", "120", /*overwrite=*/0);
  ::testing::InitGoogleTest(&argc, argv);
  std::string error;
  if (!loom::integration::parseTestOptions(argc, argv, &error)) {
    std::fprintf(stderr, "collectives_test: %s\n", error.c_str());
    return 2;
  }
  int rc = RUN_ALL_TESTS();
  if (!loom::integration::destroyProcessWorld()) rc = 1;
  return rc;
}
