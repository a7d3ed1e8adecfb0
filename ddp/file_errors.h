// Error helpers shared by the training layer's file readers (IDX data,
// checkpoints): every message starts with the file's path.
#pragma once

#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace loom::ddp {

[[noreturn]] inline void failFile(const std::string& path, const std::string& problem) {
  throw std::runtime_error(path + ": " + problem);
}

inline std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08x", v);
  return buf;
}

}  // namespace loom::ddp
