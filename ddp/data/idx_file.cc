#include "ddp/data/idx_file.h"

#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "ddp/file_errors.h"

namespace loom::ddp {
namespace {

// The file's path leads every message (ddp/file_errors.h).
[[noreturn]] void fail(const std::string& path, const std::string& problem) { failFile(path, problem); }

uint32_t readBigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

}  // namespace

std::vector<uint8_t> readPossiblyGzippedFile(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) {
    fail(path, std::string("cannot open: ") + (errno != 0 ? std::strerror(errno) : "out of memory"));
  }
  gzbuffer(file, 1 << 16);
  std::vector<uint8_t> bytes;
  constexpr size_t kChunk = 1 << 20;
  while (true) {
    size_t used = bytes.size();
    bytes.resize(used + kChunk);
    int n = gzread(file, bytes.data() + used, static_cast<unsigned>(kChunk));
    if (n < 0) {
      int code = 0;
      std::string message = gzerror(file, &code);
      gzclose(file);
      fail(path, "read failed (" + message + ")");
    }
    bytes.resize(used + static_cast<size_t>(n));
    if (n == 0) break;
  }
  // A gzip stream cut short yields its decompressed prefix and then
  // Z_BUF_ERROR ("unexpected end of file") rather than a failed read.
  int code = Z_OK;
  const char* message = gzerror(file, &code);
  if (code != Z_OK && code != Z_STREAM_END) {
    std::string text = message != nullptr ? message : "unknown zlib error";
    gzclose(file);
    fail(path, "truncated or corrupt gzip data (" + text + ")");
  }
  gzclose(file);
  return bytes;
}

IdxArray parseIdx(const std::string& path, std::span<const uint8_t> bytes, uint32_t expectedMagic) {
  if (bytes.size() < 4) {
    fail(path, "truncated: " + std::to_string(bytes.size()) + " bytes, too short for an IDX header");
  }
  uint32_t magic = readBigEndian32(bytes.data());
  if (magic != expectedMagic) {
    fail(path, "bad magic " + hex32(magic) + " (expected " + hex32(expectedMagic) +
                   ": unsigned bytes in " + std::to_string(expectedMagic & 0xff) +
                   " dimensions); not an IDX file of this kind");
  }
  size_t rank = expectedMagic & 0xff;
  size_t headerBytes = 4 + 4 * rank;
  if (bytes.size() < headerBytes) {
    fail(path, "truncated: " + std::to_string(bytes.size()) + " bytes, the header alone needs " +
                   std::to_string(headerBytes));
  }
  IdxArray array;
  size_t elements = 1;
  for (size_t d = 0; d < rank; ++d) {
    uint32_t dim = readBigEndian32(bytes.data() + 4 + 4 * d);
    array.dims.push_back(dim);
    elements *= dim;
  }
  size_t payload = bytes.size() - headerBytes;
  if (payload < elements) {
    fail(path, "truncated: the header promises " + std::to_string(elements) +
                   " bytes of data, the file holds " + std::to_string(payload));
  }
  if (payload > elements) {
    fail(path, std::to_string(payload - elements) +
                   " bytes after the data the header describes (wrong dimensions?)");
  }
  array.data.assign(bytes.begin() + static_cast<ptrdiff_t>(headerBytes), bytes.end());
  return array;
}

IdxArray readIdxFile(const std::string& path, uint32_t expectedMagic) {
  std::vector<uint8_t> bytes = readPossiblyGzippedFile(path);
  return parseIdx(path, bytes, expectedMagic);
}

}  // namespace loom::ddp
