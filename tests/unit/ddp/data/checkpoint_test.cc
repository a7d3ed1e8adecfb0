// Checkpoint files: a round trip keeps every field bit for bit, and every
// way a file can be damaged (torn, truncated, corrupted, foreign, from a
// future version) is refused with a message naming the file and the problem.
#include <cmath>
#include <filesystem>

#include <gtest/gtest.h>

#include "ddp/checkpoint/checkpoint_directory.h"
#include "ddp/checkpoint/checkpoint_file.h"
#include "tests/unit/ddp/data/idx_test_files.h"

namespace loom::ddp {
namespace {

using testing::readFile;
using testing::ScratchDir;
using testing::writeFile;

CheckpointState sampleState(uint64_t step) {
  CheckpointState s;
  s.step = step;
  s.epoch = 3;
  s.stepInEpoch = 17;
  s.samplerSeed = 0x123456789abcdefull;
  s.config = "mlp 784,256,10 adamw world 4";
  for (int i = 0; i < 1000; ++i) s.parameters.push_back(static_cast<float>(i) * 0.37f - 11.0f);
  s.parameters[5] = -0.0f;  // sign of zero must survive
  for (int i = 0; i < 301; ++i) s.optimizerState.push_back(1.0f / static_cast<float>(i + 1));
  return s;
}

std::string decodeError(const std::vector<uint8_t>& bytes) {
  try {
    decodeCheckpoint("ckpt", bytes);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(CheckpointFile, RoundTripIsExact) {
  ScratchDir dir;
  CheckpointState s = sampleState(40);
  writeCheckpointFile(dir.file("a.ckpt"), s);
  CheckpointState back = readCheckpointFile(dir.file("a.ckpt"));
  EXPECT_EQ(back, s);
  EXPECT_TRUE(std::signbit(back.parameters[5]));
  // Empty vectors and config are fine too.
  CheckpointState empty;
  writeCheckpointFile(dir.file("b.ckpt"), empty);
  EXPECT_EQ(readCheckpointFile(dir.file("b.ckpt")), empty);
}

TEST(CheckpointFile, AtomicWriteLeavesNoTemporaryAndReplacesOld) {
  ScratchDir dir;
  writeCheckpointFile(dir.file("c.ckpt"), sampleState(1));
  writeCheckpointFile(dir.file("c.ckpt"), sampleState(2));
  EXPECT_EQ(readCheckpointFile(dir.file("c.ckpt")).step, 2u);
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    ++files;
    EXPECT_EQ(e.path().filename(), "c.ckpt");
  }
  EXPECT_EQ(files, 1u);
}

TEST(CheckpointFile, EveryTruncationIsRefused) {
  std::vector<uint8_t> good = encodeCheckpoint(sampleState(9));
  // Every cut point inside the header and the small fields, then a stride
  // through the floats: none may decode.
  for (size_t keep = 0; keep < good.size(); keep += keep < 200 ? 1 : 97) {
    std::vector<uint8_t> cut(good.begin(), good.begin() + static_cast<ptrdiff_t>(keep));
    std::string e = decodeError(cut);
    ASSERT_NE(e.find("ckpt: truncated"), std::string::npos) << "keep " << keep << ": " << e;
  }
  std::string e = decodeError(std::vector<uint8_t>(good.begin(), good.end() - 1));
  EXPECT_NE(e.find("ckpt: truncated: the header promises"), std::string::npos) << e;
}

TEST(CheckpointFile, CorruptionAnywhereFailsTheCrc) {
  std::vector<uint8_t> good = encodeCheckpoint(sampleState(9));
  // Past the header (whose own checks come first), any flipped bit is caught.
  for (size_t at = 24; at < good.size(); at += 13) {
    std::vector<uint8_t> bad = good;
    bad[at] ^= 0x10;
    std::string e = decodeError(bad);
    ASSERT_NE(e.find("ckpt: CRC32 mismatch"), std::string::npos) << "byte " << at << ": " << e;
  }
}

TEST(CheckpointFile, ForeignOrFutureFilesAreRefused) {
  std::vector<uint8_t> good = encodeCheckpoint(sampleState(9));
  std::vector<uint8_t> bad = good;
  bad[0] = 'X';
  EXPECT_NE(decodeError(bad).find("not a Loom checkpoint"), std::string::npos);
  bad = good;
  bad[8] = 2;  // version 2
  EXPECT_NE(decodeError(bad).find("checkpoint version 2 is not supported"), std::string::npos);
  bad = good;
  bad.push_back(0);
  EXPECT_NE(decodeError(bad).find("1 unexpected bytes after the checkpoint's end"), std::string::npos);
}

TEST(CheckpointFile, MissingFileNamesIt) {
  ScratchDir dir;
  try {
    readCheckpointFile(dir.file("none.ckpt"));
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(dir.file("none.ckpt") + ": open failed"), std::string::npos)
        << e.what();
  }
}

TEST(CheckpointDirectory, KeepsTheNewestAndLoadsTheLatest) {
  ScratchDir dir;
  CheckpointDirectory ckpts(dir.file("run"), 2);
  EXPECT_FALSE(ckpts.loadLatest().has_value()) << "no directory yet: nothing to resume";
  for (uint64_t step : {10, 20, 30}) ckpts.save(sampleState(step));
  std::vector<std::string> files = ckpts.list();
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0], ckpts.pathForStep(20));
  EXPECT_EQ(files[1], ckpts.pathForStep(30));
  std::optional<LoadedCheckpoint> latest = ckpts.loadLatest();
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->path, ckpts.pathForStep(30));
  EXPECT_EQ(latest->state, sampleState(30));
}

TEST(CheckpointDirectory, TornNewestFileFallsBackToTheOlderOne) {
  ScratchDir dir;
  CheckpointDirectory ckpts(dir.path(), 3);
  ckpts.save(sampleState(10));
  ckpts.save(sampleState(20));
  // A torn newest file (as a non-atomic writer would leave) and the leftover
  // temporary of an interrupted save.
  std::vector<uint8_t> bytes = readFile(ckpts.pathForStep(20));
  writeFile(ckpts.pathForStep(20), std::vector<uint8_t>(bytes.begin(), bytes.begin() + 100));
  writeFile(ckpts.pathForStep(30) + ".tmp.4242", std::vector<uint8_t>(bytes.begin(), bytes.begin() + 50));
  std::vector<std::string> skipped;
  std::optional<LoadedCheckpoint> latest = ckpts.loadLatest(&skipped);
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->state.step, 10u);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].find(ckpts.pathForStep(20) + ": truncated"), std::string::npos) << skipped[0];
}

TEST(CheckpointDirectory, FileWhoseStepDisagreesWithItsNameIsSkipped) {
  ScratchDir dir;
  CheckpointDirectory ckpts(dir.path(), 3);
  ckpts.save(sampleState(10));
  writeCheckpointFile(ckpts.pathForStep(50), sampleState(40));
  std::vector<std::string> skipped;
  std::optional<LoadedCheckpoint> latest = ckpts.loadLatest(&skipped);
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->state.step, 10u);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].find("holds step 40 but is named for step 50"), std::string::npos);
}

}  // namespace
}  // namespace loom::ddp
