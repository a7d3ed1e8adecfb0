#include "ddp/checkpoint/checkpoint_file.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "ddp/file_errors.h"

namespace loom::ddp {
namespace {

constexpr char kMagic[8] = {'L', 'O', 'O', 'M', 'C', 'K', 'P', 'T'};
// magic + version + reserved + payload length.
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 8;
constexpr size_t kCrcBytes = 4;

static_assert(std::endian::native == std::endian::little,
              "the checkpoint writer stores floats in native order; add byte swapping");

// The file's path leads every message (ddp/file_errors.h).
[[noreturn]] void fail(const std::string& path, const std::string& problem) { failFile(path, problem); }

class Writer {
 public:
  void u32(uint32_t v) { raw(&v, 4); }
  void u64(uint64_t v) { raw(&v, 8); }
  void raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    bytes_.insert(bytes_.end(), b, b + n);
  }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

// Reads fields from the payload; running past its end means the lengths
// inside do not add up (possible only if a CRC collision let corruption by).
class Reader {
 public:
  Reader(const std::string& path, std::span<const uint8_t> bytes) : path_(path), bytes_(bytes) {}
  uint32_t u32() {
    uint32_t v;
    raw(&v, 4, "a 32-bit field");
    return v;
  }
  uint64_t u64() {
    uint64_t v;
    raw(&v, 8, "a 64-bit field");
    return v;
  }
  void raw(void* out, size_t n, const char* what) {
    if (n > bytes_.size() - pos_) {
      fail(path_, std::string("corrupt: ") + what + " of " + std::to_string(n) +
                      " bytes runs past the payload");
    }
    if (n == 0) return;  // an empty array: out may be null (memcpy's arguments must not be)
    std::memcpy(out, bytes_.data() + pos_, n);
    pos_ += n;
  }
  std::vector<float> floats(const char* what) {
    uint64_t n = u64();
    if (n > (bytes_.size() - pos_) / sizeof(float)) {
      fail(path_, std::string("corrupt: ") + std::to_string(n) + " " + what +
                      " do not fit in the payload");
    }
    std::vector<float> v(n);
    raw(v.data(), n * sizeof(float), what);
    return v;
  }
  size_t left() const { return bytes_.size() - pos_; }

 private:
  const std::string& path_;
  std::span<const uint8_t> bytes_;
  size_t pos_ = 0;
};

uint32_t crc32Of(const uint8_t* data, size_t n) {
  uLong crc = crc32(0L, Z_NULL, 0);
  // zlib takes uInt lengths; feed large buffers in pieces.
  while (n > 0) {
    uInt piece = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    crc = crc32(crc, data, piece);
    data += piece;
    n -= piece;
  }
  return static_cast<uint32_t>(crc);
}

[[noreturn]] void failErrno(const std::string& what, const std::string& path, int err) {
  throw std::runtime_error(path + ": " + what + " failed: " + std::strerror(err));
}

void writeAll(int fd, const std::vector<uint8_t>& bytes, const std::string& path) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) failErrno("write", path, errno);
    done += static_cast<size_t>(n);
  }
}

}  // namespace

std::vector<uint8_t> encodeCheckpoint(const CheckpointState& s) {
  Writer w;
  w.raw(kMagic, sizeof(kMagic));
  w.u32(kCheckpointVersion);
  w.u32(0);
  w.u64(0);  // payload length, patched below
  w.u64(s.step);
  w.u64(s.epoch);
  w.u64(s.stepInEpoch);
  w.u64(s.samplerSeed);
  w.u32(static_cast<uint32_t>(s.config.size()));
  w.raw(s.config.data(), s.config.size());
  w.u64(s.parameters.size());
  w.raw(s.parameters.data(), s.parameters.size() * sizeof(float));
  w.u64(s.optimizerState.size());
  w.raw(s.optimizerState.data(), s.optimizerState.size() * sizeof(float));
  std::vector<uint8_t>& bytes = w.bytes();
  uint64_t payload = bytes.size() - kHeaderBytes;
  std::memcpy(bytes.data() + 16, &payload, 8);
  uint32_t crc = crc32Of(bytes.data(), bytes.size());
  w.u32(crc);
  return std::move(bytes);
}

CheckpointState decodeCheckpoint(const std::string& path, std::span<const uint8_t> bytes) {
  if (bytes.size() < kHeaderBytes) {
    fail(path, "truncated: " + std::to_string(bytes.size()) + " bytes, a checkpoint header needs " +
                   std::to_string(kHeaderBytes));
  }
  if (std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    fail(path, "not a Loom checkpoint (bad magic; expected \"LOOMCKPT\")");
  }
  uint32_t version;
  std::memcpy(&version, bytes.data() + 8, 4);
  if (version != kCheckpointVersion) {
    fail(path, "checkpoint version " + std::to_string(version) + " is not supported (this build reads version " +
                   std::to_string(kCheckpointVersion) + ")");
  }
  uint64_t payload;
  std::memcpy(&payload, bytes.data() + 16, 8);
  uint64_t available = bytes.size() - kHeaderBytes;
  if (available < kCrcBytes || payload > available - kCrcBytes) {
    fail(path, "truncated: the header promises " + std::to_string(payload + kCrcBytes) +
                   " bytes after it, the file holds " + std::to_string(available) +
                   " (torn write or cut copy)");
  }
  if (payload < available - kCrcBytes) {
    fail(path, std::to_string(available - kCrcBytes - payload) +
                   " unexpected bytes after the checkpoint's end");
  }
  size_t crcAt = kHeaderBytes + payload;
  uint32_t stored;
  std::memcpy(&stored, bytes.data() + crcAt, 4);
  uint32_t computed = crc32Of(bytes.data(), crcAt);
  if (stored != computed) {
    fail(path, "CRC32 mismatch: stored " + hex32(stored) + ", computed " + hex32(computed) +
                   " (the file is corrupted)");
  }
  Reader r(path, bytes.subspan(kHeaderBytes, payload));
  CheckpointState s;
  s.step = r.u64();
  s.epoch = r.u64();
  s.stepInEpoch = r.u64();
  s.samplerSeed = r.u64();
  uint32_t configBytes = r.u32();
  s.config.resize(configBytes);
  r.raw(s.config.data(), configBytes, "the config text");
  s.parameters = r.floats("parameters");
  s.optimizerState = r.floats("optimizer state floats");
  if (r.left() != 0) {
    fail(path, "corrupt: " + std::to_string(r.left()) + " bytes of the payload belong to no field");
  }
  return s;
}

void writeCheckpointFile(const std::string& path, const CheckpointState& state) {
  std::vector<uint8_t> bytes = encodeCheckpoint(state);
  std::filesystem::path target(path);
  std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : ".";
  // Same directory: rename(2) is atomic only within one file system.
  std::string temp = path + ".tmp." + std::to_string(getpid());
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) failErrno("creating the temporary checkpoint", temp, errno);
  try {
    writeAll(fd, bytes, temp);
    if (::fsync(fd) != 0) failErrno("fsync", temp, errno);
  } catch (...) {
    ::close(fd);
    ::unlink(temp.c_str());
    throw;
  }
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(temp.c_str());
    failErrno("close", temp, err);
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(temp.c_str());
    failErrno("rename to " + path, temp, err);
  }
  // The rename itself is durable only once the directory entry is.
  int dirFd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirFd < 0) failErrno("opening the directory for fsync", dir.string(), errno);
  int rc = ::fsync(dirFd);
  int err = errno;
  ::close(dirFd);
  if (rc != 0) failErrno("fsync", dir.string(), err);
}

CheckpointState readCheckpointFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) failErrno("open", path, errno);
  std::vector<uint8_t> bytes;
  uint8_t buf[1 << 16];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      failErrno("read", path, err);
    }
    if (n == 0) break;
    bytes.insert(bytes.end(), buf, buf + n);
  }
  ::close(fd);
  return decodeCheckpoint(path, bytes);
}

}  // namespace loom::ddp
