// The common layer: configuration snapshot, log settings, waits.
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/asymmetric_fence.h"
#include "common/config.h"
#include "common/log.h"
#include "common/status.h"
#include "common/wait.h"

namespace loom {
namespace {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_, old_.c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

TEST(Config, DefaultsWhenUnset) {
  unsetenv("LOOM_TIMEOUT");
  unsetenv("LOOM_CHUNK_SIZE");
  Config c = Config::fromEnv();
  EXPECT_EQ(c.timeoutSeconds, 300.0);
  EXPECT_EQ(c.chunkBytes, 256u * 1024);
  EXPECT_EQ(c.fifoSlots, 4);
}

TEST(Config, ParsesSuffixesAndRejectsGarbageWithWarnings) {
  ScopedEnv chunk("LOOM_CHUNK_SIZE", "1M");
  ScopedEnv timeout("LOOM_TIMEOUT", "2.5");
  ScopedEnv slots("LOOM_SHM_SLOTS", "1");  // below the minimum of 2
  std::vector<std::string> warnings;
  Config c = Config::fromEnv(&warnings);
  EXPECT_EQ(c.chunkBytes, 1u << 20);
  EXPECT_EQ(c.timeoutSeconds, 2.5);
  EXPECT_EQ(c.fifoSlots, 4);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("LOOM_SHM_SLOTS"), std::string::npos);
}

TEST(Config, ChunkSizeMustBeMultipleOf64) {
  ScopedEnv chunk("LOOM_CHUNK_SIZE", "5000");
  std::vector<std::string> warnings;
  Config c = Config::fromEnv(&warnings);
  EXPECT_EQ(c.chunkBytes, 256u * 1024);
  EXPECT_EQ(warnings.size(), 1u);
}

TEST(Config, EveryKnobIsDocumented) {
  std::set<std::string> names;
  std::set<std::string> closedSections;
  std::string section;
  for (const auto& k : configKnobs()) {
    const bool launcher = std::string(k.defaultValue).rfind("set by ", 0) == 0;
    // Only the launchers' variables (RANK, MASTER_PORT, OMPI_*, SLURM_*) keep
    // their names, and the NCCL shim NCCL's (NCCL_ALGO, read by libnccl.so.2 only).
    const bool ncclShim = std::string(k.usedBy).find("shim/nccl") != std::string::npos;
    if (!launcher && !ncclShim) EXPECT_EQ(std::string(k.env).rfind("LOOM_", 0), 0u) << k.env;
    if (ncclShim) EXPECT_EQ(std::string(k.env).rfind("NCCL_", 0), 0u) << k.env;
    EXPECT_TRUE(names.insert(k.env).second) << k.env << " declared twice";
    EXPECT_GT(std::string(k.doc).size(), 10u) << k.env;
    EXPECT_FALSE(std::string(k.usedBy).empty()) << k.env;
    // Each section's variables stand together, as the documentation lists them.
    if (section != k.section) {
      closedSections.insert(section);
      EXPECT_EQ(closedSections.count(k.section), 0u) << k.env << " is apart from the rest of " << k.section;
      section = k.section;
    }
  }
  for (const char* launcherSet : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOOM_JOB_SECRET",
                                  "LOOM_LOCAL_CORES", "LOOM_RESTART_COUNT"})
    EXPECT_EQ(names.count(launcherSet), 1u) << launcherSet;
}

TEST(Config, ReadKnobServesDeclaredVariablesOnly) {
  {
    ScopedEnv isa("LOOM_KERNEL_ISA", "avx2");
    ASSERT_NE(readKnob("LOOM_KERNEL_ISA"), nullptr);
    EXPECT_STREQ(readKnob("LOOM_KERNEL_ISA"), "avx2");
  }
  unsetenv("LOOM_KERNEL_ISA");
  EXPECT_EQ(readKnob("LOOM_KERNEL_ISA"), nullptr);
  ScopedEnv stray("LOOM_NOT_A_KNOB", "1");
  EXPECT_DEATH(readKnob("LOOM_NOT_A_KNOB"), "LOOM_NOT_A_KNOB is read but not declared in configKnobs");
}

TEST(Config, HostAndDeviceKnobsComeThroughTheSnapshot) {
  {
    Config c = Config::fromEnv();
    EXPECT_EQ(c.hostId, "");
    EXPECT_EQ(c.localCores, 0);
    EXPECT_EQ(c.cudaP2P, "");
    EXPECT_EQ(c.netGdr, "");
    EXPECT_EQ(c.cudaCopyChunk, "");
  }
  ScopedEnv host("LOOM_HOST_ID", "emulated-a");
  ScopedEnv p2p("LOOM_CUDA_P2P", "yes");  // kept as given: src/device parses it and words the warning
  ScopedEnv gdr("LOOM_NET_GDR", "1");
  ScopedEnv chunk("LOOM_CUDA_COPY_CHUNK", "2M");
  std::vector<std::string> warnings;
  Config c = Config::fromEnv(&warnings);
  EXPECT_EQ(c.hostId, "emulated-a");
  EXPECT_EQ(c.cudaP2P, "yes");
  EXPECT_EQ(c.netGdr, "1");
  EXPECT_EQ(c.cudaCopyChunk, "2M");
  EXPECT_TRUE(warnings.empty()) << warnings[0];
  // LOOM_LOCAL_CORES is atoi'd and taken when positive, silently otherwise.
  const std::vector<std::pair<const char*, int>> cores = {{"6", 6}, {"0", 0}, {"-3", 0}, {"abc", 0}, {"4x", 4}};
  for (const auto& [text, expected] : cores) {
    ScopedEnv local("LOOM_LOCAL_CORES", text);
    EXPECT_EQ(Config::fromEnv().localCores, expected) << text;
  }
}

TEST(LogSettings, SubsystemMaskParsing) {
  EXPECT_EQ(LogSettings::parseSubsys("INIT"), static_cast<uint32_t>(kSubsysInit));
  EXPECT_EQ(LogSettings::parseSubsys("init,algo"), static_cast<uint32_t>(kSubsysInit | kSubsysAlgo));
  uint32_t excl = LogSettings::parseSubsys("^BOOTSTRAP");
  EXPECT_EQ(excl & kSubsysBootstrap, 0u);
  EXPECT_NE(excl & kSubsysInit, 0u);
  EXPECT_EQ(LogSettings::parseLevel("info"), LogLevel::kInfo);
  EXPECT_EQ(LogSettings::parseLevel("TRACE"), LogLevel::kTrace);
}

TEST(Logger, FiltersByLevelAndSubsystem) {
  LogSettings s;
  s.level = LogLevel::kInfo;
  s.subsysMask = kSubsysInit;
  Logger log(s, 3);
  EXPECT_TRUE(log.enabled(LogLevel::kInfo, kSubsysInit));
  EXPECT_FALSE(log.enabled(LogLevel::kInfo, kSubsysAlgo));
  EXPECT_TRUE(log.enabled(LogLevel::kWarn, kSubsysAlgo));  // warnings ignore the mask
  EXPECT_FALSE(log.enabled(LogLevel::kTrace, kSubsysInit));
}

TEST(Logger, LinePrefixHasHostPidAndRank) {
  char path[] = "/tmp/loom_log_test_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  FILE* f = fdopen(fd, "w+");
  LogSettings s;
  s.level = LogLevel::kInfo;
  s.sink = f;
  Logger(s, 5).log(LogLevel::kInfo, kSubsysInit, "hello %d", 42);
  fflush(f);
  rewind(f);
  char line[512] = {0};
  ASSERT_NE(fgets(line, sizeof(line), f), nullptr);
  std::string text(line);
  EXPECT_NE(text.find(":" + std::to_string(getpid()) + ":"), std::string::npos) << text;
  EXPECT_NE(text.find("[5] LOOM INFO INIT hello 42"), std::string::npos) << text;
  fclose(f);
  unlink(path);
}

TEST(Wait, TimesOutWithDescription) {
  WaitContext ctx;
  ctx.deadline = Deadline::after(0.05);
  WaitSignal sig;
  auto start = Clock::now();
  Status s = waitUntil([] { return false; }, &sig, ctx, [] { return std::string("the moon"); });
  EXPECT_EQ(s.code(), Code::kTimeout);
  EXPECT_NE(s.message().find("the moon"), std::string::npos);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
}

TEST(Wait, AbortFlagStopsTheWait) {
  std::atomic<bool> abort{false};
  WaitContext ctx;
  ctx.abort = &abort;
  WaitSignal sig;
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    abort = true;
  });
  Status s = waitUntil([] { return false; }, &sig, ctx, [] { return std::string("x"); });
  aborter.join();
  EXPECT_EQ(s.code(), Code::kRemoteError);
}

TEST(Wait, SleepingWaiterIsWokenBySignal) {
  std::atomic<bool> ready{false};
  WaitSignal sig;
  WaitContext ctx;
  ctx.spinMicros = 0;
  ctx.yieldMicros = 0;  // go straight to the futex
  ctx.deadline = Deadline::after(10);
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ready.store(true);
    sig.notify();
  });
  auto start = Clock::now();
  Status s = waitUntil([&] { return ready.load(); }, &sig, ctx, [] { return std::string("x"); });
  writer.join();
  EXPECT_TRUE(s.isOk());
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
}

// ---- Who fences for WaitSignal (common/asymmetric_fence.h) ----

TEST(AsymmetricFence, EnableIsStableAndTheSleepersBarrierWorks) {
  const bool registered = asymmetric_fence::enable();
  if (!registered)
    std::printf("note: membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) is not available here: writers keep their fence\n");
  EXPECT_EQ(asymmetric_fence::enable(), registered);
  EXPECT_EQ(asymmetric_fence::writersSkipFence(), registered);
  EXPECT_TRUE(asymmetric_fence::sleeperBarrier());
}

TEST(AsymmetricFence, ForkedChildStartsUnregisteredAndRegistersAgain) {
  const bool registered = asymmetric_fence::enable();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // 1: still marked registered after fork; 2: enable() disagrees with the parent.
    if (asymmetric_fence::writersSkipFence()) _exit(1);
    _exit(asymmetric_fence::enable() == registered ? 0 : 2);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// Two processes hand a counter back and forth through shared memory, each
// going straight to sleep on the other's WaitSignal, with the writers'
// fence left to the sleepers where the kernel allows. A sleeper follows the
// documented protocol by hand (count itself, barrier, re-check, sleep) with a
// one-second futex timeout, so a wake-up that the writer missed shows as a
// sleep that ended with the signal unchanged and the value already there.
TEST(AsymmetricFence, NoWakeUpIsMissedBetweenProcesses) {
  struct Shared {
    std::atomic<uint64_t> value[2];
    WaitSignal signal[2];
    std::atomic<uint32_t> missed[2];
  };
  void* mem = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto* sh = new (mem) Shared{};
  constexpr uint64_t kRounds = 20000;
  auto play = [sh](int me) {
    (void)asymmetric_fence::enable();
    const int peer = 1 - me;
    auto& signal = sh->signal[me];
    for (uint64_t round = 1; round <= kRounds; ++round) {
      // Player 0 opens each round, player 1 answers it.
      const uint64_t want = me == 0 ? round - 1 : round;
      auto arrived = [&] { return sh->value[peer].load(std::memory_order_acquire) >= want; };
      while (!arrived()) {
        const uint32_t seen = signal.seq.load(std::memory_order_seq_cst);
        signal.sleepers.fetch_add(1, std::memory_order_seq_cst);
        const bool paired = asymmetric_fence::sleeperBarrier();
        if (!arrived()) {
          signal.sleep(seen, paired ? 1000 : 1);
          if (paired && signal.seq.load(std::memory_order_seq_cst) == seen && arrived()) sh->missed[me].fetch_add(1);
        }
        signal.sleepers.fetch_sub(1, std::memory_order_seq_cst);
      }
      sh->value[me].store(round, std::memory_order_release);
      sh->signal[peer].notify();
    }
  };
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    play(1);
    _exit(0);
  }
  play(0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(sh->value[0].load(), kRounds);
  EXPECT_EQ(sh->value[1].load(), kRounds);
  EXPECT_EQ(sh->missed[0].load() + sh->missed[1].load(), 0u) << "wake-ups missed";
  munmap(mem, sizeof(Shared));
}

TEST(Status, ErrorsCarryCodeAndMessage) {
  Status s = makeError(Code::kInvalidArgument, "root %d out of range", 9);
  EXPECT_FALSE(s.isOk());
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "root 9 out of range");
  EXPECT_EQ(s.withContext("rank 2: ").message(), "rank 2: root 9 out of range");
  Status sys = makeSystemError(ENOENT, "open %s", "/x");
  EXPECT_EQ(sys.code(), Code::kSystemError);
  EXPECT_NE(sys.message().find("No such file"), std::string::npos);
}

}  // namespace
}  // namespace loom
