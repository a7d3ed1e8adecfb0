// LOOM_IB_HCA (and NCCL_IB_HCA through the shim): NCCL's syntax for which
// RDMA devices and ports the verbs transport may use.
#include "transports/verbs/hca_filter.h"

#include <gtest/gtest.h>

namespace loom::transport::verbs {
namespace {

HcaFilter parsed(const std::string& spec) {
  auto f = HcaFilter::parse(spec);
  EXPECT_TRUE(f.isOk()) << f.status().message();
  return f.isOk() ? f.value() : HcaFilter{};
}

TEST(HcaFilter, EmptyAllowsEveryDeviceAndPort) {
  const HcaFilter f = parsed("");
  EXPECT_TRUE(f.empty());
  EXPECT_TRUE(f.allows("mlx5_0", 1));
  EXPECT_TRUE(f.allows("anything", 7));
}

TEST(HcaFilter, ListedNamesArePrefixesAndPortsAreOptional) {
  const HcaFilter f = parsed("mlx5_0:1,mlx5_1");
  EXPECT_TRUE(f.allows("mlx5_0", 1));
  EXPECT_FALSE(f.allows("mlx5_0", 2));  // only port 1 of mlx5_0
  EXPECT_TRUE(f.allows("mlx5_1", 2));   // any port of mlx5_1
  EXPECT_TRUE(f.allows("mlx5_10", 1));  // "mlx5_1" is a prefix of mlx5_10, as in NCCL
  EXPECT_FALSE(f.allows("mlx5_2", 1));
}

TEST(HcaFilter, EqualsMakesNamesExact) {
  const HcaFilter f = parsed("=mlx5_1");
  EXPECT_TRUE(f.allows("mlx5_1", 1));
  EXPECT_FALSE(f.allows("mlx5_10", 1));
}

TEST(HcaFilter, CaretExcludesTheList) {
  const HcaFilter f = parsed("^mlx5_2:1");
  EXPECT_FALSE(f.allows("mlx5_2", 1));
  EXPECT_TRUE(f.allows("mlx5_2", 2));
  EXPECT_TRUE(f.allows("mlx5_0", 1));
  const HcaFilter exact = parsed("^=mlx5_1");
  EXPECT_FALSE(exact.allows("mlx5_1", 1));
  EXPECT_TRUE(exact.allows("mlx5_10", 1));
}

TEST(HcaFilter, BadPortsAndEmptyNamesAreErrorsNamingTheVariable) {
  for (const char* bad : {"mlx5_0:", "mlx5_0:x", "mlx5_0:0", "mlx5_0:256", ":1"}) {
    auto f = HcaFilter::parse(bad);
    ASSERT_FALSE(f.isOk()) << bad;
    EXPECT_EQ(f.status().code(), Code::kInvalidArgument);
    EXPECT_NE(f.status().message().find("LOOM_IB_HCA"), std::string::npos) << f.status().message();
  }
}

}  // namespace
}  // namespace loom::transport::verbs
