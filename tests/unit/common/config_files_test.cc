// Settings files (common/config_files.h) and readKnob's sources: the
// environment, then ~/.loom.conf, then <LOOM_SYSTEM_CONF_DIR>/loom.conf.
#include "common/config_files.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/config.h"

namespace loom {
namespace {

TEST(SettingsText, ParsesKeyValueLinesAndSkipsTheRest) {
  const SettingsMap parsed = parseSettingsText(
      "# comment\n"
      "\n"
      "  LOOM_ALGO = ring,tree  \n"
      "LOOM_DEBUG=\"INFO\"\n"
      "LOOM_TRACE='/tmp/a b.json'\n"
      "not a setting\n"
      "=novalue\n"
      "   # indented comment\n"
      "LOOM_EMPTY=\n"
      "LOOM_TWICE=1\n"
      "LOOM_TWICE=2\r\n"
      "LOOM_EQ=a=b\n");
  const SettingsMap expected = {{"LOOM_ALGO", "ring,tree"}, {"LOOM_DEBUG", "INFO"}, {"LOOM_TRACE", "/tmp/a b.json"},
                                {"LOOM_EMPTY", ""},         {"LOOM_TWICE", "2"},    {"LOOM_EQ", "a=b"}};
  EXPECT_EQ(parsed, expected);
}

TEST(SettingsText, FilePathsOfBothFamilies) {
  setenv("HOME", "/home/someone", 1);
  EXPECT_EQ(loomSettingsFiles(nullptr).user, "/home/someone/.loom.conf");
  EXPECT_EQ(loomSettingsFiles(nullptr).system, "/etc/loom.conf");
  EXPECT_EQ(loomSettingsFiles("/opt/x/etc/").system, "/opt/x/etc/loom.conf");
  EXPECT_EQ(ncclSettingsFiles(nullptr, nullptr).user, "/home/someone/.nccl.conf");
  EXPECT_EQ(ncclSettingsFiles("/opt/x/etc", "/my/nccl.conf").user, "/my/nccl.conf");
  EXPECT_EQ(ncclSettingsFiles("/opt/x/etc", "").system, "/opt/x/etc/nccl.conf");
  SettingsMap none;
  EXPECT_FALSE(readSettingsFile("/nonexistent/loom.conf", &none));
  EXPECT_TRUE(none.empty());
}

class KnobSources : public ::testing::Test {
 protected:
  void SetUp() override {
    savedHome_ = std::getenv("HOME") ? std::getenv("HOME") : "";
    root_ = std::filesystem::temp_directory_path() / ("loom-config-files-" + std::to_string(getpid()));
    std::filesystem::create_directories(root_ / "home");
    std::filesystem::create_directories(root_ / "etc");
    setenv("HOME", (root_ / "home").c_str(), 1);
    setenv("LOOM_SYSTEM_CONF_DIR", (root_ / "etc").c_str(), 1);
    for (const char* v : {"LOOM_ALGO", "LOOM_PROTO", "LOOM_TRACE", "RANK"}) unsetenv(v);
  }
  void TearDown() override {
    for (const char* v : {"LOOM_ALGO", "LOOM_PROTO", "LOOM_TRACE", "RANK", "LOOM_SYSTEM_CONF_DIR"}) unsetenv(v);
    setenv("HOME", savedHome_.c_str(), 1);
    std::filesystem::remove_all(root_);
    reloadSettingsFiles();
  }
  void write(const std::string& relative, const std::string& text) { std::ofstream(root_ / relative) << text; }

  std::filesystem::path root_;
  std::string savedHome_;
};

TEST_F(KnobSources, EnvironmentWinsOverTheUsersFileWhichWinsOverTheSystems) {
  write("home/.loom.conf", "LOOM_ALGO=tree\nLOOM_PROTO=ll\n");
  write("etc/loom.conf", "LOOM_ALGO=ring\nLOOM_PROTO=simple\nLOOM_TRACE=/tmp/t.json\n");
  setenv("LOOM_ALGO", "rd", 1);
  reloadSettingsFiles();
  EXPECT_STREQ(readKnob("LOOM_ALGO"), "rd");
  EXPECT_STREQ(readKnob("LOOM_PROTO"), "ll");
  EXPECT_STREQ(readKnob("LOOM_TRACE"), "/tmp/t.json");
  EXPECT_STREQ(readKnobFrom("LOOM_ALGO", SettingSource::kUserFile), "tree");
  EXPECT_STREQ(readKnobFrom("LOOM_ALGO", SettingSource::kSystemFile), "ring");
  EXPECT_EQ(readKnobFrom("LOOM_TRACE", SettingSource::kUserFile), nullptr);
  // Config, built from readKnob, sees the files too.
  const Config config = Config::fromEnv();
  EXPECT_EQ(config.proto, "ll");
  EXPECT_EQ(config.tracePath, "/tmp/t.json");
}

TEST_F(KnobSources, LauncherVariablesAndTheFilesOwnLocationComeFromTheEnvironmentOnly) {
  write("home/.loom.conf", "RANK=3\nLOOM_JOB_SECRET=00112233445566778899aabbccddeeff\nLOOM_SYSTEM_CONF_DIR=/elsewhere\n");
  unsetenv("LOOM_JOB_SECRET");
  reloadSettingsFiles();
  EXPECT_EQ(readKnob("RANK"), nullptr);
  EXPECT_EQ(readKnob("LOOM_JOB_SECRET"), nullptr);
  EXPECT_STREQ(readKnob("LOOM_SYSTEM_CONF_DIR"), (root_ / "etc").c_str());
}

TEST_F(KnobSources, FilesAreReadOnceUntilReloaded) {
  write("home/.loom.conf", "LOOM_ALGO=tree\n");
  reloadSettingsFiles();
  const char* before = readKnob("LOOM_ALGO");
  ASSERT_STREQ(before, "tree");
  write("home/.loom.conf", "LOOM_ALGO=ring\n");
  EXPECT_STREQ(readKnob("LOOM_ALGO"), "tree");
  reloadSettingsFiles();
  EXPECT_STREQ(readKnob("LOOM_ALGO"), "ring");
  EXPECT_STREQ(before, "tree");  // a value handed out earlier stays valid
}

}  // namespace
}  // namespace loom
