#include "tests/unit/ddp/data/idx_test_files.h"

#include <stdlib.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace loom::ddp::testing {

std::vector<uint8_t> idxBytes(uint32_t magic, const std::vector<uint32_t>& dims,
                              const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out;
  auto put = [&out](uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(v >> shift));
  };
  put(magic);
  for (uint32_t d : dims) put(d);
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

void writeFile(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw std::runtime_error("cannot write " + path);
}

void writeGzipFile(const std::string& path, const std::vector<uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  if (f == nullptr) throw std::runtime_error("cannot open " + path);
  if (!bytes.empty() && gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) <= 0) {
    gzclose(f);
    throw std::runtime_error("gzwrite failed for " + path);
  }
  if (gzclose(f) != Z_OK) throw std::runtime_error("gzclose failed for " + path);
}

std::vector<uint8_t> readFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

ScratchDir::ScratchDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/ddp_test.XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

ScratchDir::~ScratchDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace loom::ddp::testing
