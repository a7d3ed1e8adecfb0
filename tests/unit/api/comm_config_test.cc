// loomCommInitRankConfig's per-communicator chunk size (loomConfig_t's
// chunkBytes): it reaches the transports and the algorithms, a split child
// keeps it, a caller built against the older, smaller struct gets the
// environment's chunk, and a bad value is refused naming the field and rank.
//
// The chunk a communicator uses is visible at LOOM_DEBUG=INFO: every rank logs
// "protocols: Simple (<bytes> B chunks)" once its transports are connected.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "loom/loom.h"

namespace {

// Sets (or with nullptr unsets) a variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_, old_.c_str(), 1);
    else unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

// Communicators created while this lives log their INFO lines of the TUNER
// subsystem to a file of their own (Loom keeps one sink per file name for the
// process's life, so each instance takes a new name), without the
// environment's chunk size.
class ChunkLog {
 public:
  ChunkLog()
      : path_(::testing::TempDir() + "loom_chunk_" + std::to_string(getpid()) + "_" + std::to_string(next_++) + ".log"),
        level_("LOOM_DEBUG", "INFO"),
        subsys_("LOOM_DEBUG_SUBSYS", "TUNER"),
        file_("LOOM_DEBUG_FILE", path_.c_str()),
        chunk_("LOOM_CHUNK_SIZE", nullptr) {
    std::remove(path_.c_str());
  }
  ~ChunkLog() { std::remove(path_.c_str()); }

  // How many ranks logged that their Simple protocol uses `bytes` per chunk.
  int ranksWithChunk(size_t bytes) const {
    std::ifstream in(path_);
    std::stringstream all;
    all << in.rdbuf();
    const std::string text = all.str(), needle = "Simple (" + std::to_string(bytes) + " B chunks)";
    int count = 0;
    for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++count;
    return count;
  }

 private:
  static inline int next_ = 0;
  std::string path_;
  ScopedEnv level_, subsys_, file_, chunk_;
};

constexpr size_t kDefaultChunk = 256 * 1024;  // LOOM_CHUNK_SIZE's documented default

// One clique of n ranks, created from one thread inside a group, each rank
// with its own config.
loomResult_t initClique(const std::vector<loomConfig_t>& configs, std::vector<loomComm_t>* comms) {
  const int n = static_cast<int>(configs.size());
  loomUniqueId id;
  if (loomGetUniqueId(&id) != loomSuccess) return loomSystemError;
  comms->assign(configs.size(), nullptr);
  loomGroupStart();
  for (int i = 0; i < n; ++i) {
    const loomResult_t r = loomCommInitRankConfig(&(*comms)[static_cast<size_t>(i)], n, id, i, &configs[static_cast<size_t>(i)]);
    if (r != loomSuccess) {
      loomGroupEnd();
      return r;
    }
  }
  return loomGroupEnd();
}

void destroyAll(const std::vector<loomComm_t>& comms) {
  for (auto c : comms)
    if (c) EXPECT_EQ(loomCommDestroy(c), loomSuccess);
}

// A sum of many chunks' worth of floats on every rank of `comms`, checked
// against the sum computed here.
void expectPipelinedSumIsRight(const std::vector<loomComm_t>& comms, size_t count) {
  const int n = static_cast<int>(comms.size());
  std::vector<std::vector<float>> bufs(comms.size(), std::vector<float>(count));
  for (int r = 0; r < n; ++r)
    for (size_t k = 0; k < count; ++k) bufs[static_cast<size_t>(r)][k] = static_cast<float>((k % 1000) + 1000 * r);
  ASSERT_EQ(loomGroupStart(), loomSuccess);
  for (int r = 0; r < n; ++r) {
    auto& b = bufs[static_cast<size_t>(r)];
    ASSERT_EQ(loomAllReduce(b.data(), b.data(), count, loomFloat, loomSum, comms[static_cast<size_t>(r)], nullptr),
              loomSuccess);
  }
  ASSERT_EQ(loomGroupEnd(), loomSuccess) << loomGetLastError(nullptr);
  const float rankTerm = 1000.0f * static_cast<float>(n * (n - 1) / 2);
  for (int r = 0; r < n; ++r)
    for (size_t k = 0; k < count; k += 4099)
      ASSERT_EQ(bufs[static_cast<size_t>(r)][k], static_cast<float>(n) * static_cast<float>(k % 1000) + rankTerm)
          << "rank " << r << " element " << k;
}

TEST(CommConfig, ChunkBytesReachesEveryRankAndASplitChildKeepsIt) {
  ChunkLog log;
  constexpr size_t kChunk = 64 * 1024;
  loomConfig_t config = LOOM_CONFIG_INITIALIZER;
  config.chunkBytes = kChunk;
  std::vector<loomComm_t> comms;
  ASSERT_EQ(initClique({config, config}, &comms), loomSuccess) << loomGetLastError(nullptr);
  EXPECT_EQ(log.ranksWithChunk(kChunk), 2);
  EXPECT_EQ(log.ranksWithChunk(kDefaultChunk), 0);
  expectPipelinedSumIsRight(comms, 3 * kChunk / sizeof(float) + 17);  // several chunks and a partial one

  std::vector<loomComm_t> children(2, nullptr);
  std::vector<loomResult_t> rc(2, loomInternalError);
  std::vector<std::thread> ranks;
  for (size_t r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] { rc[r] = loomCommSplit(comms[r], 0, static_cast<int>(r), &children[r]); });
  for (auto& t : ranks) t.join();
  for (size_t r = 0; r < 2; ++r) ASSERT_EQ(rc[r], loomSuccess) << "rank " << r << ": " << loomGetLastError(comms[r]);
  EXPECT_EQ(log.ranksWithChunk(kChunk), 4) << "the split child's two ranks use the parent's chunk too";
  expectPipelinedSumIsRight(children, 2 * kChunk / sizeof(float) + 5);
  destroyAll(children);
  destroyAll(comms);
}

// Two ranks created with `config` both run with the built-in chunk.
void expectTheDefaultChunk(const loomConfig_t& config) {
  ChunkLog log;
  std::vector<loomComm_t> comms;
  ASSERT_EQ(initClique({config, config}, &comms), loomSuccess) << loomGetLastError(nullptr);
  EXPECT_EQ(log.ranksWithChunk(kDefaultChunk), 2);
  destroyAll(comms);
}

TEST(CommConfig, ZeroChunkBytesKeepsTheEnvironmentsChunk) {
  loomConfig_t config = LOOM_CONFIG_INITIALIZER;
  EXPECT_EQ(config.chunkBytes, 0u) << "LOOM_CONFIG_INITIALIZER leaves the chunk to the environment";
  expectTheDefaultChunk(config);
}

TEST(CommConfig, AnOlderSmallerStructIgnoresTheFieldsItLacks) {
  // What a caller compiled against a header without chunkBytes passes: its
  // size ends before the field, and the memory there is not its to set.
  loomConfig_t config = LOOM_CONFIG_INITIALIZER;
  config.size = offsetof(loomConfig_t, chunkBytes);
  config.chunkBytes = 1000;  // invalid, so reading it would fail the init
  expectTheDefaultChunk(config);
}

TEST(CommConfig, BadChunkBytesIsRefusedNamingTheFieldAndRank) {
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  // Below 4 KiB, not whole cache lines, above 64 MiB.
  for (size_t bad : {size_t{1000}, size_t{4096 + 8}, (size_t{64} << 20) + 64}) {
    loomConfig_t config = LOOM_CONFIG_INITIALIZER;
    config.chunkBytes = bad;
    loomComm_t comm = nullptr;
    EXPECT_EQ(loomCommInitRankConfig(&comm, 2, id, 1, &config), loomInvalidArgument) << bad;
    EXPECT_EQ(comm, nullptr);
    const std::string message = loomGetLastError(nullptr);
    EXPECT_NE(message.find("config->chunkBytes " + std::to_string(bad)), std::string::npos) << message;
    EXPECT_NE(message.find("rank 1"), std::string::npos) << message;
  }
}

TEST(CommConfig, RanksWithDifferentChunksFailTheInitInsteadOfCorruptingData) {
  // The shared-memory segments are laid out by each rank's chunk size; a
  // rank with another one must be refused at connect time.
  loomConfig_t small = LOOM_CONFIG_INITIALIZER, large = LOOM_CONFIG_INITIALIZER;
  small.chunkBytes = 64 * 1024;
  large.chunkBytes = 128 * 1024;
  small.timeoutSeconds = large.timeoutSeconds = 10;
  ScopedEnv chunk("LOOM_CHUNK_SIZE", nullptr);
  ScopedEnv transport("LOOM_TRANSPORT", "shm");
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  const loomConfig_t configs[2] = {small, large};
  loomComm_t comms[2] = {nullptr, nullptr};
  loomResult_t rc[2] = {loomSuccess, loomSuccess};
  std::string messages[2];
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      rc[r] = loomCommInitRankConfig(&comms[r], 2, id, r, &configs[r]);
      messages[r] = loomGetLastError(nullptr);
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(rc[r], loomInvalidUsage) << "rank " << r << ": " << messages[r];
    EXPECT_NE(messages[r].find("chunkBytes"), std::string::npos) << messages[r];
    EXPECT_EQ(comms[r], nullptr);
    if (comms[r]) loomCommDestroy(comms[r]);
  }
}

}  // namespace
