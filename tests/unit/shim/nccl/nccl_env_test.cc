// NCCL_* settings on Loom (shim/nccl/nccl_env.h): how each value translates
// to LOOM_* and which source wins when both families are set.
#include "shim/nccl/nccl_env.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/config.h"

namespace loom::nccl_shim {
namespace {

using Assignments = std::vector<std::pair<std::string, std::string>>;

bool anyContains(const std::vector<std::string>& lines, const std::string& text) {
  return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) { return l.find(text) != std::string::npos; });
}

TEST(NcclEnvTranslation, AlgorithmsMapAndNamesWithoutLoomMeaningAreWarned) {
  Translation t = translateNcclSetting("NCCL_ALGO", "Ring,NVLS,Tree", 4);
  EXPECT_EQ(t.assignments, (Assignments{{"LOOM_ALGO", "ring,tree"}}));
  ASSERT_EQ(t.warnings.size(), 1u);
  EXPECT_NE(t.warnings[0].find("NVLS has no Loom meaning"), std::string::npos) << t.warnings[0];

  t = translateNcclSetting("NCCL_ALGO", "allreduce:Tree,Ring;broadcast:^PAT,ring", 4);
  EXPECT_EQ(t.assignments, (Assignments{{"LOOM_ALGO", "allreduce:tree,ring;broadcast:^ring"}}));
  EXPECT_EQ(t.warnings.size(), 1u);

  // Excluding only what Loom lacks leaves Loom's choice alone.
  t = translateNcclSetting("NCCL_ALGO", "^NVLS,CollnetDirect", 4);
  EXPECT_TRUE(t.assignments.empty());
  EXPECT_EQ(t.warnings.size(), 2u);

  t = translateNcclSetting("NCCL_ALGO", "Rnig", 4);
  EXPECT_TRUE(t.assignments.empty());
  ASSERT_EQ(t.warnings.size(), 1u);
  EXPECT_NE(t.warnings[0].find("not a name NCCL knows"), std::string::npos) << t.warnings[0];
}

TEST(NcclEnvTranslation, ProtocolsDebugAndSubsystems) {
  Translation t = translateNcclSetting("NCCL_PROTO", "LL128,Simple", 4);
  EXPECT_EQ(t.assignments, (Assignments{{"LOOM_PROTO", "simple"}}));
  EXPECT_TRUE(anyContains(t.warnings, "LL128 has no Loom meaning"));

  EXPECT_EQ(translateNcclSetting("NCCL_DEBUG", "info", 4).assignments, (Assignments{{"LOOM_DEBUG", "INFO"}}));
  t = translateNcclSetting("NCCL_DEBUG", "ABORT", 4);
  EXPECT_TRUE(t.assignments.empty());
  EXPECT_EQ(t.warnings.size(), 1u);

  t = translateNcclSetting("NCCL_DEBUG_SUBSYS", "INIT,NET,P2P,ALLOC", 4);
  EXPECT_EQ(t.assignments, (Assignments{{"LOOM_DEBUG_SUBSYS", "INIT,TRANSPORT"}}));
  EXPECT_TRUE(anyContains(t.warnings, "ALLOC"));
  EXPECT_EQ(translateNcclSetting("NCCL_DEBUG_SUBSYS", "^SHM,GRAPH", 4).assignments,
            (Assignments{{"LOOM_DEBUG_SUBSYS", "^TRANSPORT,ALGO"}}));
  EXPECT_EQ(translateNcclSetting("NCCL_DEBUG_FILE", "/tmp/log.%h.%p", 4).assignments,
            (Assignments{{"LOOM_DEBUG_FILE", "/tmp/log.%h.%p"}}));
}

TEST(NcclEnvTranslation, TransportsBuffersAndGdr) {
  EXPECT_EQ(translateNcclSetting("NCCL_IB_DISABLE", "1", 4).assignments, (Assignments{{"LOOM_IB_DISABLE", "1"}}));
  EXPECT_EQ(translateNcclSetting("NCCL_SHM_DISABLE", "0", 4).assignments, (Assignments{{"LOOM_SHM_DISABLE", "0"}}));
  EXPECT_EQ(translateNcclSetting("NCCL_SOCKET_IFNAME", "^docker,lo", 4).assignments,
            (Assignments{{"LOOM_SOCKET_IFNAME", "^docker,lo"}}));
  EXPECT_EQ(translateNcclSetting("NCCL_IB_HCA", "=mlx5_0:1,mlx5_1", 4).assignments,
            (Assignments{{"LOOM_IB_HCA", "=mlx5_0:1,mlx5_1"}}));
  EXPECT_EQ(translateNcclSetting("NCCL_P2P_DISABLE", "1", 4).assignments,
            (Assignments{{"LOOM_CUDA_ENGINE", "0"}, {"LOOM_CUDA_P2P", "0"}}));
  EXPECT_TRUE(translateNcclSetting("NCCL_P2P_DISABLE", "0", 4).assignments.empty());
  EXPECT_EQ(translateNcclSetting("NCCL_NET_GDR_LEVEL", "LOC", 4).assignments, (Assignments{{"LOOM_NET_GDR", "0"}}));
  EXPECT_EQ(translateNcclSetting("NCCL_NET_GDR_LEVEL", "phb", 4).assignments, (Assignments{{"LOOM_NET_GDR", "1"}}));
  EXPECT_EQ(translateNcclSetting("NCCL_NET_GDR_LEVEL", "3", 4).assignments, (Assignments{{"LOOM_NET_GDR", "1"}}));
  EXPECT_EQ(translateNcclSetting("NCCL_NET_GDR_LEVEL", "near", 4).warnings.size(), 1u);
  EXPECT_EQ(translateNcclSetting("NCCL_NET", "Socket", 4).assignments,
            (Assignments{{"LOOM_IB_DISABLE", "1"}, {"LOOM_UCX_DISABLE", "1"}}));
  EXPECT_EQ(translateNcclSetting("NCCL_NET", "AWS Libfabric", 4).warnings.size(), 1u);

  // NCCL's 4 MiB default over Loom's 4 slots is 1 MiB per chunk; 8 slots halve it.
  EXPECT_EQ(translateNcclSetting("NCCL_BUFFSIZE", "4194304", 4).assignments,
            (Assignments{{"LOOM_CHUNK_SIZE", std::to_string(4194304 / 4)}}));
  EXPECT_EQ(translateNcclSetting("NCCL_BUFFSIZE", "16M", 8).assignments,
            (Assignments{{"LOOM_CHUNK_SIZE", std::to_string((16 << 20) / 8)}}));
  EXPECT_EQ(translateNcclSetting("NCCL_BUFFSIZE", "100000", 4).assignments,
            (Assignments{{"LOOM_CHUNK_SIZE", std::to_string(100000 / 4 / 64 * 64)}}));
  EXPECT_TRUE(translateNcclSetting("NCCL_BUFFSIZE", "8192", 4).assignments.empty());  // 2K chunks: too small
  EXPECT_TRUE(translateNcclSetting("NCCL_BUFFSIZE", "-1", 4).assignments.empty());

  Translation t = translateNcclSetting("NCCL_CROSS_NIC", "1", 4);
  EXPECT_TRUE(t.assignments.empty());
  EXPECT_TRUE(anyContains(t.warnings, "NCCL_CROSS_NIC has no Loom meaning"));
}

// Every mapped name is declared in Loom's settings table (readKnobFrom
// would abort otherwise) and documented there.
TEST(NcclEnvTranslation, MappedNamesAreDeclaredAndDocumented) {
  for (const char* name : {"NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE", "NCCL_ALGO", "NCCL_PROTO",
                           "NCCL_SOCKET_IFNAME", "NCCL_IB_DISABLE", "NCCL_SHM_DISABLE", "NCCL_P2P_DISABLE",
                           "NCCL_NET_GDR_LEVEL", "NCCL_BUFFSIZE", "NCCL_NET", "NCCL_IB_HCA"}) {
    EXPECT_TRUE(isMappedNcclVariable(name)) << name;
    const auto& knobs = configKnobs();
    EXPECT_TRUE(std::any_of(knobs.begin(), knobs.end(), [&](const KnobDoc& k) { return std::string(k.env) == name; }))
        << name << " is not in configKnobs()";
  }
}

// A scratch HOME and system folder; every variable the test touches is
// cleared first and restored to unset after.
class NcclEnvPrecedence : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() / ("loom-nccl-env-" + std::to_string(getpid()));
    std::filesystem::create_directories(root_ / "home");
    std::filesystem::create_directories(root_ / "etc");
    for (const char* v : kTouched) unsetenv(v);
    setenv("HOME", (root_ / "home").c_str(), 1);
    setenv("LOOM_SYSTEM_CONF_DIR", (root_ / "etc").c_str(), 1);
  }
  void TearDown() override {
    for (const char* v : kTouched) unsetenv(v);
    std::filesystem::remove_all(root_);
    reloadSettingsFiles();
  }
  void write(const std::string& relative, const std::string& text) { std::ofstream(root_ / relative) << text; }
  static std::string env(const char* name) {
    const char* v = std::getenv(name);
    return v ? v : "(unset)";
  }

  static constexpr const char* kTouched[] = {
      "NCCL_ALGO", "NCCL_PROTO", "NCCL_DEBUG", "NCCL_SHM_DISABLE", "NCCL_SOCKET_IFNAME", "NCCL_CONF_FILE",
      "NCCL_IB_DISABLE", "NCCL_NET", "NCCL_UNKNOWN_KNOB", "LOOM_ALGO", "LOOM_PROTO", "LOOM_DEBUG",
      "LOOM_SHM_DISABLE", "LOOM_SOCKET_IFNAME", "LOOM_IB_DISABLE", "LOOM_UCX_DISABLE", "LOOM_SYSTEM_CONF_DIR"};
  std::filesystem::path root_;
};

TEST_F(NcclEnvPrecedence, EnvironmentThenUserFileThenSystemFileAndLoomWinsWithinASource) {
  write("home/.nccl.conf", "# user's NCCL settings\nNCCL_ALGO = Tree\nNCCL_PROTO=LL\n");
  write("home/.loom.conf", "LOOM_PROTO=simple\n");
  write("etc/nccl.conf", "NCCL_ALGO=Ring\nNCCL_SOCKET_IFNAME=eth9\nNCCL_UNKNOWN_KNOB=1\n");
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("LOOM_DEBUG", "WARN", 1);
  setenv("NCCL_SHM_DISABLE", "1", 1);
  reloadSettingsFiles();

  const AppliedSettings applied = applyNcclSettings();
  EXPECT_EQ(env("LOOM_ALGO"), "tree");             // the user's nccl.conf over the system's
  EXPECT_EQ(env("LOOM_PROTO"), "(unset)");         // ~/.loom.conf's LOOM_PROTO wins over ~/.nccl.conf's
  EXPECT_STREQ(readKnob("LOOM_PROTO"), "simple");  // ... and Loom reads it from there
  EXPECT_EQ(env("LOOM_SOCKET_IFNAME"), "eth9");    // only the system file has it
  EXPECT_EQ(env("LOOM_DEBUG"), "WARN");            // LOOM_DEBUG in the environment wins
  EXPECT_EQ(env("LOOM_SHM_DISABLE"), "1");
  EXPECT_TRUE(anyContains(applied.notes, "LOOM_PROTO=simple (user file) wins")) << ::testing::PrintToString(applied.notes);
  EXPECT_TRUE(anyContains(applied.notes, "LOOM_DEBUG=WARN (environment) wins"));
  EXPECT_TRUE(anyContains(applied.warnings, "NCCL_UNKNOWN_KNOB (settings file) has no Loom meaning"))
      << ::testing::PrintToString(applied.warnings);
}

TEST_F(NcclEnvPrecedence, EnvironmentNcclWinsOverLoomFilesAndConfFileReplacesTheUsersFile) {
  write("home/.loom.conf", "LOOM_PROTO=simple\n");
  write("home/.nccl.conf", "NCCL_ALGO=Tree\n");
  write("other.conf", "NCCL_ALGO=Ring\n");
  setenv("NCCL_PROTO", "LL", 1);
  setenv("NCCL_CONF_FILE", (root_ / "other.conf").c_str(), 1);
  setenv("NCCL_UNKNOWN_KNOB", "7", 1);
  reloadSettingsFiles();

  const AppliedSettings applied = applyNcclSettings();
  EXPECT_EQ(env("LOOM_PROTO"), "ll");   // the environment beats every file
  EXPECT_EQ(env("LOOM_ALGO"), "ring");  // NCCL_CONF_FILE, not ~/.nccl.conf
  EXPECT_TRUE(anyContains(applied.warnings, "NCCL_UNKNOWN_KNOB=7 (environment) has no Loom meaning"));
}

TEST_F(NcclEnvPrecedence, TheFirstMappingOfATargetWinsWithinASource) {
  setenv("NCCL_IB_DISABLE", "0", 1);
  setenv("NCCL_NET", "Socket", 1);  // would disable IB, but NCCL_IB_DISABLE says it explicitly
  reloadSettingsFiles();
  applyNcclSettings();
  EXPECT_EQ(env("LOOM_IB_DISABLE"), "0");
  EXPECT_EQ(env("LOOM_UCX_DISABLE"), "1");
}

}  // namespace
}  // namespace loom::nccl_shim
