#include "ddp/distributed/exposure_split.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace loom::ddp {
namespace {

TEST(ExposureSplit, EachStepsLeastExposureIsTheLastRanksAndTheRestIsWaiting) {
  // 3 ranks x 2 steps. Step 0: rank 1 ends backward last (2 ms exposed),
  // ranks 0 and 2 wait 10 and 4 ms more. Step 1: rank 0 last (1 ms).
  const std::vector<double> exposed = {
      0.012, 0.001,  // rank 0
      0.002, 0.031,  // rank 1
      0.006, 0.001,  // rank 2
  };
  const ExposureSplit split = splitExposure(exposed, 3, 2);
  EXPECT_NEAR(split.exposedSeconds, 0.053, 1e-12);
  EXPECT_NEAR(split.lastRankExposedSeconds, 0.002 + 0.001, 1e-12);
  EXPECT_NEAR(split.waitingSeconds, (0.010 + 0.000 + 0.004) + (0.000 + 0.030 + 0.000), 1e-12);
}

TEST(ExposureSplit, RanksThatEndTogetherWaitForNobody) {
  const std::vector<double> exposed = {0.005, 0.007, 0.005, 0.007};  // 2 ranks x 2 steps, alike
  const ExposureSplit split = splitExposure(exposed, 2, 2);
  EXPECT_DOUBLE_EQ(split.waitingSeconds, 0.0);
  EXPECT_NEAR(split.lastRankExposedSeconds, 0.012, 1e-12);
  EXPECT_NEAR(split.exposedSeconds, 0.024, 1e-12);
}

TEST(ExposureSplit, OneRankHasNobodyToWaitFor) {
  const std::vector<double> exposed = {0.003, 0.004};
  const ExposureSplit split = splitExposure(exposed, 1, 2);
  EXPECT_DOUBLE_EQ(split.waitingSeconds, 0.0);
  EXPECT_NEAR(split.lastRankExposedSeconds, 0.007, 1e-12);
}

TEST(ExposureSplit, AMismatchedCountIsRefusedNamingIt) {
  const std::vector<double> exposed = {0.001, 0.002, 0.003};
  try {
    splitExposure(exposed, 2, 2);
    FAIL() << "3 values for 2 ranks x 2 steps were accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("3 values"), std::string::npos) << e.what();
  }
  EXPECT_THROW(splitExposure({}, 0, 0), std::invalid_argument);
}

}  // namespace
}  // namespace loom::ddp
