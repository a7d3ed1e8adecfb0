#include "tests/integration/test_world.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <thread>

#include "tests/integration/collective_case.h"
#include "tests/integration/forced_algorithm.h"

namespace loom::integration {
namespace {

// LOOM_CHUNK_SIZE as the library documents it: bytes with an optional K/M/G
// suffix (powers of 1024), a multiple of 64 in [4K, 64M]; the library keeps
// its default for anything else, and so does this parser.
bool parseChunkBytes(const char* text, size_t* out) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (end == text) return false;
  unsigned long long mult = 1;
  if (*end == 'K' || *end == 'k') mult = 1ull << 10, ++end;
  else if (*end == 'M' || *end == 'm') mult = 1ull << 20, ++end;
  else if (*end == 'G' || *end == 'g') mult = 1ull << 30, ++end;
  const unsigned long long bytes = v * mult;
  if (*end != '\0' || bytes < 4096 || bytes > (64ull << 20) || bytes % 64 != 0) return false;
  *out = static_cast<size_t>(bytes);
  return true;
}

bool parseWorldSize(const char* text, int* out) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < 1 || v > kMaxRanks) return false;
  *out = static_cast<int>(v);
  return true;
}

}  // namespace

TestOptions& testOptions() {
  static TestOptions options;
  return options;
}

bool parseTestOptions(int argc, char** argv, std::string* error) {
  TestOptions& o = testOptions();
  if (const char* v = std::getenv("LOOM_TEST_WORLD_SIZE"); v && *v && !parseWorldSize(v, &o.threadWorldSize)) {
    *error = std::string("LOOM_TEST_WORLD_SIZE=") + v + ": expected an integer in [1, " +
             std::to_string(kMaxRanks) + "]";
    return false;
  }
  if (const char* v = std::getenv("LOOM_CHUNK_SIZE"); v && *v) parseChunkBytes(v, &o.matrix.chunkBytes);
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (std::strncmp(a, "--world-size=", 13) == 0) {
      if (!parseWorldSize(a + 13, &o.threadWorldSize)) {
        *error = std::string(a) + ": expected an integer in [1, " + std::to_string(kMaxRanks) + "]";
        return false;
      }
    } else if (std::strcmp(a, "--large-count=0") == 0) {
      o.matrix.largeCount = false;
    } else if (std::strcmp(a, "--large-count=1") == 0) {
      o.matrix.largeCount = true;
    } else if (std::strcmp(a, "--large-count=all") == 0) {
      o.matrix.largeCountEverywhere = true;
    } else if (std::strncmp(a, "--large-rotation=", 17) == 0) {
      char* end = nullptr;
      const long v = std::strtol(a + 17, &end, 10);
      if (end == a + 17 || *end != '\0' || v < 0 || v > 1000000) {
        *error = std::string(a) + ": expected a non-negative integer";
        return false;
      }
      o.matrix.largeRotation = static_cast<int>(v);
    } else if (std::strncmp(a, "--only-count=", 13) == 0) {
      char* end = nullptr;
      o.matrix.onlyCount = std::strtoull(a + 13, &end, 10);
      if (end == a + 13 || *end != '\0') {
        *error = std::string(a) + ": expected a number of elements";
        return false;
      }
    } else {
      *error = std::string("unknown argument ") + a +
               " (expected --world-size=N, --large-count=0|1|all, --large-rotation=K or --only-count=N)";
      return false;
    }
  }
  return forcedAlgorithm().parseEnvironment(o.matrix.chunkBytes, error);
}

Clique::Clique(int nranks) : comms_(nranks, nullptr) {
  initResult_ = loomCommInitAll(comms_.data(), nranks, nullptr);
  if (initResult_ != loomSuccess) {
    initError_ = loomGetLastError(nullptr);
    comms_.clear();
  }
}

Clique::~Clique() {
  for (loomComm_t c : comms_) EXPECT_EQ(loomCommDestroy(c), loomSuccess) << loomGetLastError(nullptr);
}

void runOnRankThreads(int nranks, const std::function<void(int rank)>& body) {
  std::vector<std::thread> threads;
  threads.reserve(nranks);
  for (int r = 0; r < nranks; ++r) threads.emplace_back(body, r);
  for (auto& t : threads) t.join();
}

bool startedByLauncher() { return std::getenv("RANK") != nullptr && std::getenv("WORLD_SIZE") != nullptr; }

namespace {
std::optional<ProcessWorld> gProcessWorld;  // created by the first Process* test
}  // namespace

ProcessWorld& processWorld() {
  if (gProcessWorld) return *gProcessWorld;
  ProcessWorld& world = gProcessWorld.emplace();
  loomUniqueId id;
  if (loomGetUniqueIdFromEnv(&id, &world.rank, &world.nranks) != loomSuccess) {
    world.error = std::string("loomGetUniqueIdFromEnv: ") + loomGetLastError(nullptr);
    return world;
  }
  if (loomCommInitRank(&world.comm, world.nranks, id, world.rank) != loomSuccess) {
    world.error = std::string("loomCommInitRank: ") + loomGetLastError(nullptr);
    world.comm = nullptr;
  }
  return world;
}

bool destroyProcessWorld() {
  if (!gProcessWorld || gProcessWorld->comm == nullptr) return true;
  ProcessWorld& world = *gProcessWorld;
  // A broken job may have peers that are gone: do not wait for them.
  const loomResult_t rc = world.broken ? loomCommAbort(world.comm) : loomCommDestroy(world.comm);
  world.comm = nullptr;
  if (rc == loomSuccess) return true;
  std::fprintf(stderr, "rank %d: destroying the communicator returned %s: %s\n", world.rank,
               loomGetErrorString(rc), loomGetLastError(nullptr));
  return false;
}

bool runCasesOnRank(const std::vector<CaseSpec>& cases, loomComm_t comm, int rank, int nranks) {
  for (const CaseSpec& spec : cases) {
    CaseRun run(spec, rank, nranks);
    SCOPED_TRACE(run.trace());
    run.prepare();
    const loomResult_t rc = run.launch(comm, nullptr);
    if (rc != loomSuccess) {
      ADD_FAILURE() << "returned " << loomGetErrorString(rc) << ": " << loomGetLastError(comm)
                    << " (stopping this rank's sequence)";
      return false;
    }
    run.verify();
    if (forcedAlgorithm().active()) {
      char name[64] = {};
      const loomResult_t got = loomCommGetLastAlgorithm(comm, name, sizeof name);
      if (got != loomSuccess) {
        ADD_FAILURE() << "loomCommGetLastAlgorithm returned " << loomGetErrorString(got) << ": "
                      << loomGetLastError(comm);
        continue;
      }
      forcedAlgorithm().check(spec, name);
    }
  }
  return true;
}

}  // namespace loom::integration
