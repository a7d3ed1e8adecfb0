#include "tests/unit/transports/shm/shm_test_util.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>

#include "common/format.h"

namespace loom::testing::shm {

std::string uniqueJobTag() {
  static std::atomic<int> counter{0};
  return strprintf("ut%d-%d", static_cast<int>(getpid()), counter.fetch_add(1));
}

Config smallConfig(size_t chunkBytes, int slots) {
  Config c;
  c.chunkBytes = chunkBytes;
  c.fifoSlots = slots;
  c.timeoutSeconds = 20;
  return c;
}

WaitContext waitFor(double seconds, const std::atomic<bool>* abort) {
  WaitContext w;
  w.deadline = Deadline::after(seconds);
  w.abort = abort;
  return w;
}

std::vector<int> allPeersOf(int rank, int nranks) {
  std::vector<int> peers;
  for (int r = 0; r < nranks; ++r)
    if (r != rank) peers.push_back(r);
  return peers;
}

size_t chunkSizeFor(int src, int dst, uint64_t chunk, size_t chunkBytes) {
  switch (chunk % 5) {
    case 0: return chunkBytes;
    case 1: return 0;
    case 2: return 1;
    default: return static_cast<size_t>((chunk * 7919 + src * 131 + dst * 17) % (chunkBytes + 1));
  }
}

void fillPattern(std::byte* out, size_t bytes, int src, int dst, uint64_t chunk) {
  for (size_t i = 0; i < bytes; ++i) out[i] = static_cast<std::byte>(patternByte(src, dst, chunk, i));
}

std::string checkPattern(const std::byte* data, size_t bytes, int src, int dst, uint64_t chunk) {
  for (size_t i = 0; i < bytes; ++i) {
    uint8_t want = patternByte(src, dst, chunk, i);
    if (static_cast<uint8_t>(data[i]) != want)
      return strprintf("chunk %llu from rank %d to rank %d: byte %zu is 0x%02x, expected 0x%02x",
                       static_cast<unsigned long long>(chunk), src, dst, i, static_cast<unsigned>(data[i]), want);
  }
  return {};
}

Status sendPatternChunk(transport::SendConnection& conn, int src, int dst, uint64_t chunk, size_t bytes,
                        const WaitContext& wait) {
  std::byte* slot = nullptr;
  LOOM_TRY(conn.acquire(&slot, wait));
  fillPattern(slot, bytes, src, dst, chunk);
  conn.commit(bytes);
  return Status::ok();
}

Status recvPatternChunk(transport::RecvConnection& conn, int src, int dst, uint64_t chunk, size_t expectBytes,
                        const WaitContext& wait) {
  const std::byte* data = nullptr;
  size_t bytes = 0;
  LOOM_TRY(conn.acquire(&data, &bytes, wait));
  LOOM_ENFORCE(bytes == expectBytes, Code::kInternalError, "chunk %llu from rank %d to rank %d: %zu bytes, expected %zu",
               static_cast<unsigned long long>(chunk), src, dst, bytes, expectBytes);
  std::string bad = checkPattern(data, bytes, src, dst, chunk);
  conn.release();
  LOOM_ENFORCE(bad.empty(), Code::kInternalError, "%s", bad.c_str());
  return Status::ok();
}

std::vector<std::string> leftoverSegments(const std::string& jobTag, const std::string& dir) {
  std::vector<std::string> found;
  std::string prefix = "loom-" + jobTag + "-";
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    if (name.compare(0, prefix.size(), prefix) == 0) found.push_back(entry.path().string());
  }
  return found;
}

}  // namespace loom::testing::shm
