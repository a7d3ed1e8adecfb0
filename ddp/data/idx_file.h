// Reader for the IDX format of MNIST and Fashion-MNIST
// (http://yann.lecun.com/exdb/mnist/): a 4-byte big-endian magic whose low
// byte is the number of dimensions and whose third byte is the element type
// (0x08 = unsigned byte), then one big-endian uint32 per dimension, then the
// elements in row-major order. Files may be gzipped or plain: zlib's gzread
// passes plain files through unchanged.
//
// Every problem (missing file, bad magic, wrong dimensions, truncated or
// over-long data, gzip errors) is a std::runtime_error whose message starts
// with the file's path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace loom::ddp {

inline constexpr uint32_t kIdxImagesMagic = 0x00000803;  // ubyte, 3 dimensions
inline constexpr uint32_t kIdxLabelsMagic = 0x00000801;  // ubyte, 1 dimension

struct IdxArray {
  std::vector<uint32_t> dims;  // dims[0] is the item count
  std::vector<uint8_t> data;   // product(dims) bytes
};

// The whole file, decompressed when it is gzipped.
std::vector<uint8_t> readPossiblyGzippedFile(const std::string& path);

// Parses `bytes` (the contents of `path`, which only names it in errors) as an
// unsigned-byte IDX array with magic `expectedMagic`.
IdxArray parseIdx(const std::string& path, std::span<const uint8_t> bytes, uint32_t expectedMagic);

// readPossiblyGzippedFile + parseIdx.
IdxArray readIdxFile(const std::string& path, uint32_t expectedMagic);

}  // namespace loom::ddp
