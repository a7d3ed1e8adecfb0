// The GDR path's pure parts: the peer-memory probe, the local availability
// reason, path selection (kDirectGdr), the slice cut and immediates.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "src/device/comm_devices.h"
#include "src/device/gdr_availability.h"
#include "src/device/gdr_slices.h"
#include "src/device/path_selection.h"
#include "src/device/runtime.h"
#include "transports/verbs/gdr_probe.h"
#include "transports/verbs/verbs_rdma_memory.h"

namespace loom::cuda {
namespace {

namespace verbs = transport::verbs;

// A fake /sys tree with the given files.
class FakeSys {
 public:
  FakeSys() {
    char tmpl[] = "/tmp/loom_gdr_sysXXXXXX";
    root_ = ::mkdtemp(tmpl);
  }
  ~FakeSys() { std::system(("rm -rf " + root_).c_str()); }
  void add(const std::string& path) {
    std::string dir = root_;
    size_t start = 1;
    for (size_t slash; (slash = path.find('/', start)) != std::string::npos; start = slash + 1)
      ::mkdir((dir + path.substr(0, slash)).c_str(), 0755);
    std::ofstream(root_ + path) << "1.1\n";
  }
  void addDir(const std::string& path) {
    add(path + "/x");
  }
  const std::string& root() const { return root_; }

 private:
  std::string root_;
};

TEST(GdrProbe, ReadsEachSignOfAPeerMemoryClient) {
  {
    FakeSys sys;
    const verbs::PeerMemFacts f = verbs::readPeerMemFacts(sys.root());
    EXPECT_FALSE(f.nvMemVersion || f.nvidiaPeermem || f.legacyNvPeerMem);
  }
  {
    FakeSys sys;
    sys.add("/kernel/mm/memory_peers/nv_mem/version");
    EXPECT_TRUE(verbs::readPeerMemFacts(sys.root()).nvMemVersion);
  }
  {
    FakeSys sys;
    sys.addDir("/module/nvidia_peermem");
    const verbs::PeerMemFacts f = verbs::readPeerMemFacts(sys.root());
    EXPECT_TRUE(f.nvidiaPeermem);
    EXPECT_FALSE(f.nvMemVersion || f.legacyNvPeerMem);
  }
  {
    FakeSys sys;
    sys.addDir("/module/nv_peer_mem");
    EXPECT_TRUE(verbs::readPeerMemFacts(sys.root()).legacyNvPeerMem);
  }
}

TEST(GdrProbe, AnySignIsEnoughAndNoneSaysHowToFixIt) {
  verbs::PeerMemFacts none;
  const std::string why = verbs::peerMemoryReason(none);
  EXPECT_NE(why.find("nvidia-peermem"), std::string::npos) << why;
  for (int sign = 0; sign < 3; ++sign) {
    verbs::PeerMemFacts f;
    (sign == 0 ? f.nvMemVersion : sign == 1 ? f.nvidiaPeermem : f.legacyNvPeerMem) = true;
    EXPECT_EQ(verbs::peerMemoryReason(f), "") << sign;
  }
}

TEST(GdrAvailability, LocalReasonNamesTheFirstMissingPiece) {
  GdrLocalFacts ok;
  ok.cudaUsable = true;
  ok.kernelsBuilt = true;
  EXPECT_EQ(gdrLocalReason(ok), "");
  auto with = [&](auto change) {
    GdrLocalFacts f = ok;
    change(f);
    return gdrLocalReason(f);
  };
  EXPECT_NE(with([](GdrLocalFacts& f) { f.kernelsBuilt = false; }).find("without the CUDA kernels"), std::string::npos);
  EXPECT_NE(with([](GdrLocalFacts& f) { f.cudaUsable = false; }).find("no usable CUDA device"), std::string::npos);
  EXPECT_NE(with([](GdrLocalFacts& f) { f.transport = "tcp"; }).find("LOOM_TRANSPORT=tcp"), std::string::npos);
  EXPECT_EQ(with([](GdrLocalFacts& f) { f.transport = "ib"; }), "");
  EXPECT_NE(with([](GdrLocalFacts& f) { f.ibDisabled = true; }).find("LOOM_IB_DISABLE"), std::string::npos);
  EXPECT_EQ(with([](GdrLocalFacts& f) { f.rdmaReason = "no RDMA device (x)"; }), "no RDMA device (x)");
  EXPECT_EQ(with([](GdrLocalFacts& f) { f.peerMemReason = "no peermem"; }), "no peermem");
  // No CUDA outranks the probes (which are then not even run).
  EXPECT_NE(with([](GdrLocalFacts& f) {
              f.cudaUsable = false;
              f.rdmaReason = "no RDMA device (x)";
            }).find("CUDA"),
            std::string::npos);
}

TEST(GdrAvailability, AProcessWithoutCudaDeviceSaysSo) {
  if (devicesUsable()) GTEST_SKIP() << "this machine has a CUDA device: the no-device reason cannot be checked";
  const std::string why = gdrLocalReason(probeGdrLocalFacts("", false, *transport::defaultVerbsRdmaNetwork()));
  EXPECT_NE(why.find("CUDA"), std::string::npos) << why;
}

TEST(GdrAvailability, SwitchFromTheEnvironment) {
  std::vector<std::string> warnings;
  unsetenv("LOOM_NET_GDR");
  EXPECT_FALSE(DeviceSettings::fromConfig(Config::fromEnv(), &warnings).netGdr);  // off unless asked for
  setenv("LOOM_NET_GDR", "1", 1);
  EXPECT_TRUE(DeviceSettings::fromConfig(Config::fromEnv(), &warnings).netGdr);
  EXPECT_TRUE(warnings.empty());
  setenv("LOOM_NET_GDR", "on", 1);
  EXPECT_FALSE(DeviceSettings::fromConfig(Config::fromEnv(), &warnings).netGdr);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("LOOM_NET_GDR='on'"), std::string::npos) << warnings[0];
  unsetenv("LOOM_NET_GDR");
}

GdrFacts eligibleGdr() {
  GdrFacts f;
  f.agreed = true;
  f.kernelsBuilt = true;
  f.singleHost = false;
  f.nranks = 4;
  f.type = algo::CollType::kAllReduce;
  f.bytes = 4096;
  return f;
}

TEST(GdrPathSelection, GdrNeedsEverySharedFact) {
  EXPECT_TRUE(gdrEligible(eligibleGdr()));
  auto without = [](auto change) {
    GdrFacts f = eligibleGdr();
    change(f);
    return gdrEligible(f);
  };
  EXPECT_FALSE(without([](GdrFacts& f) { f.agreed = false; }));       // LOOM_NET_GDR unset, or some rank cannot
  EXPECT_FALSE(without([](GdrFacts& f) { f.kernelsBuilt = false; }));
  EXPECT_FALSE(without([](GdrFacts& f) { f.singleHost = true; }));    // CUDA IPC's territory
  EXPECT_FALSE(without([](GdrFacts& f) { f.nranks = 1; }));
  EXPECT_FALSE(without([](GdrFacts& f) { f.nranks = 9; }));           // one reduce-copy of at most 8 sources
  EXPECT_FALSE(without([](GdrFacts& f) { f.bytes = 0; }));
  EXPECT_FALSE(without([](GdrFacts& f) { f.bytes = size_t{200} << 30; }));  // 50 GiB slices: beyond the QP depth
  for (auto t : {algo::CollType::kBroadcast, algo::CollType::kReduce, algo::CollType::kReduceScatter,
                 algo::CollType::kAllGather})
    EXPECT_FALSE(without([t](GdrFacts& f) { f.type = t; })) << algo::collTypeName(t);
  EXPECT_TRUE(without([](GdrFacts& f) { f.nranks = 2; }));
  EXPECT_TRUE(without([](GdrFacts& f) { f.nranks = 8; }));
  EXPECT_TRUE(without([](GdrFacts& f) { f.bytes = 1; }));
}

TEST(GdrPathSelection, ChoosesGdrOnlyWhenEveryRankWasReady) {
  EXPECT_EQ(choosePath(true, true, true, DataPath::kDirectGdr), DataPath::kDirectGdr);
  EXPECT_EQ(choosePath(true, true, false, DataPath::kDirectGdr), DataPath::kDirectGdr);
  EXPECT_EQ(choosePath(true, false, true, DataPath::kDirectGdr), DataPath::kStaged);
  EXPECT_EQ(choosePath(true, false, false, DataPath::kDirectGdr), DataPath::kHost);
  EXPECT_EQ(choosePath(false, false, true, DataPath::kDirectGdr), DataPath::kStaged);
  EXPECT_EQ(choosePath(true, true, true), DataPath::kDirectP2P);  // the default is still the IPC path
  EXPECT_STREQ(dataPathName(DataPath::kDirectGdr), "direct-gdr");
}

TEST(GdrSlices, CoverTheBufferInOrderWithoutGaps) {
  for (int n = 1; n <= 8; ++n) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1001}, size_t{4096}}) {
      size_t next = 0, longest = 0;
      for (int j = 0; j < n; ++j) {
        const GdrSlice s = gdrSliceOf(count, n, j);
        EXPECT_EQ(s.offset, next) << n << " ranks, count " << count << ", slice " << j;
        next += s.count;
        longest = std::max(longest, s.count);
        EXPECT_LE(s.count, count / n + 1);
      }
      EXPECT_EQ(next, count);
      const size_t slot = gdrSlotBytes(count, n, 4);
      EXPECT_GE(slot, longest * 4);
      EXPECT_EQ(slot % 256, 0u);
    }
  }
}

TEST(GdrSlices, ImmediatesTellPhasesAndCallsApart) {
  EXPECT_NE(gdrImmediate(5, GdrPhase::kReduceScatter), gdrImmediate(5, GdrPhase::kAllGather));
  EXPECT_NE(gdrImmediate(5, GdrPhase::kAllGather), gdrImmediate(6, GdrPhase::kAllGather));
  EXPECT_EQ(gdrImmediate(5, GdrPhase::kAllGather), gdrImmediate(5 + (uint64_t{1} << 24), GdrPhase::kAllGather));
}

}  // namespace
}  // namespace loom::cuda
