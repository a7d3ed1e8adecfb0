// Test helper: writes small IDX files (plain or gzipped) with chosen headers,
// so the loader can be fed valid and deliberately broken data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace loom::ddp::testing {

// Big-endian magic, dims, then `data` (which need not match the dims).
std::vector<uint8_t> idxBytes(uint32_t magic, const std::vector<uint32_t>& dims,
                              const std::vector<uint8_t>& data);

void writeFile(const std::string& path, const std::vector<uint8_t>& bytes);
void writeGzipFile(const std::string& path, const std::vector<uint8_t>& bytes);
std::vector<uint8_t> readFile(const std::string& path);

// A fresh directory under $TMPDIR (or /tmp), removed with its files.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace loom::ddp::testing
