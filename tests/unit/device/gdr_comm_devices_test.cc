// The GDR path wired into CommDevices (the code every device-buffer call of
// a communicator goes through): ranks on "several hosts" take kDirectGdr
// when every rank's buffers are on a device, and when one rank's are not,
// every rank falls back (device ranks staged, the host rank on its host
// buffers) and the result is still right.
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <vector>

#include "src/device/comm_devices.h"
#include "tests/unit/device/gdr_world.h"
#include "tests/support/rank_threads.h"

namespace loom::testing::gdr {
namespace {

using cuda::CommDevices;
using cuda::DataPath;

// The host step of the staged path: an all-reduce (float sum) through the
// bootstrap, computed in rank order.
cuda::HostCollective hostSum(LocalBootstrap& boot, int nranks) {
  return [&boot, nranks](const algo::CollArgs& a) -> Status {
    const size_t bytes = a.count * sizeof(float);
    std::vector<std::byte> all(bytes * static_cast<size_t>(nranks));
    std::memcpy(all.data() + bytes * static_cast<size_t>(boot.rank()), a.sendbuf, bytes);
    LOOM_TRY(boot.allGather(all.data(), bytes, waitFor(20)));
    auto* out = static_cast<float*>(a.recvbuf);
    for (size_t i = 0; i < a.count; ++i) {
      float acc = 0;
      for (int r = 0; r < nranks; ++r) {
        float v;
        std::memcpy(&v, all.data() + bytes * static_cast<size_t>(r) + i * sizeof(float), sizeof v);
        acc = r == 0 ? v : acc + v;
      }
      out[i] = acc;
    }
    return Status::ok();
  };
}

// Runs one float-sum all-reduce on `n` ranks through CommDevices; ranks in
// `hostRanks` say their buffers are host memory. Returns each rank's path.
std::vector<DataPath> runThroughCommDevices(GdrWorld& w, const std::set<int>& hostRanks, size_t count,
                                            std::vector<std::vector<float>>* outs) {
  const int n = w.nranks;
  std::vector<DataPath> paths(static_cast<size_t>(n));
  outs->assign(static_cast<size_t>(n), std::vector<float>(count, -1.0f));
  std::vector<std::unique_ptr<cuda::CopyEngine>> engines;
  for (int r = 0; r < n; ++r) engines.push_back(cuda::makeHostCopyEngine());
  runRankThreads(n, [&](int r) {
    std::vector<float> send(count);
    for (size_t i = 0; i < count; ++i) send[i] = static_cast<float>(r * 1000 + static_cast<int>(i % 97)) / 3.0f;
    const bool host = hostRanks.count(r) != 0;
    auto classify = [host](const void*, const std::string&) -> Result<cuda::PointerInfo> {
      return host ? hostInfo() : deviceInfo();
    };
    cuda::CopyEngine* engine = engines[static_cast<size_t>(r)].get();
    CommDevices devices(cuda::CommDeviceSetup{r, n, false, w.boots[static_cast<size_t>(r)].get()}, cuda::DeviceSettings{},
                        classify, [engine](int) -> Result<cuda::CopyEngine*> { return engine; });
    devices.useGdrPath(std::move(w.paths[static_cast<size_t>(r)]));
    algo::CollArgs args;
    args.sendbuf = send.data();
    args.recvbuf = (*outs)[static_cast<size_t>(r)].data();
    args.count = count;
    bool handled = false;
    auto runHost = hostSum(*w.boots[static_cast<size_t>(r)], n);
    Status s = devices.runCollective(args, waitFor(20), runHost, &handled);
    EXPECT_TRUE(s.isOk()) << "rank " << r << ": " << s.message();
    EXPECT_TRUE(handled) << "rank " << r;
    paths[static_cast<size_t>(r)] = devices.lastPath();
  });
  return paths;
}

std::vector<float> expectedSum(int n, size_t count) {
  std::vector<float> want(count);
  for (size_t i = 0; i < count; ++i) {
    float acc = 0;
    for (int r = 0; r < n; ++r) {
      const float v = static_cast<float>(r * 1000 + static_cast<int>(i % 97)) / 3.0f;
      acc = r == 0 ? v : acc + v;
    }
    want[i] = acc;
  }
  return want;
}

TEST(GdrCommDevices, DeviceBuffersOnEveryRankTakeTheGdrPath) {
  const int n = 3;
  GdrWorld w = makeGdrWorld(n);
  std::vector<std::vector<float>> outs;
  const auto paths = runThroughCommDevices(w, {}, 1001, &outs);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(paths[r], DataPath::kDirectGdr) << "rank " << r << ": " << cuda::dataPathName(paths[r]);
    EXPECT_EQ(outs[r], expectedSum(n, 1001)) << "rank " << r;
  }
}

TEST(GdrCommDevices, OneRankWithHostBuffersMakesEveryRankFallBackCorrectly) {
  const int n = 3;
  GdrWorld w = makeGdrWorld(n);
  std::vector<std::vector<float>> outs;
  const auto paths = runThroughCommDevices(w, {1}, 1001, &outs);
  EXPECT_EQ(paths[0], DataPath::kStaged);
  EXPECT_EQ(paths[1], DataPath::kHost);
  EXPECT_EQ(paths[2], DataPath::kStaged);
  for (int r = 0; r < n; ++r) EXPECT_EQ(outs[r], expectedSum(n, 1001)) << "rank " << r;
}

}  // namespace
}  // namespace loom::testing::gdr
