// One training checkpoint on disk: everything needed to continue a run
// bit for bit (step, sampler position, flat parameters, optimizer state).
//
// Layout (integers little-endian, floats IEEE binary32 little-endian):
//   "LOOMCKPT"                       8 bytes magic
//   u32 version (1), u32 reserved (0)
//   u64 payload bytes                everything from here to the CRC
//   u64 step, u64 epoch, u64 stepInEpoch, u64 samplerSeed
//   u32 n, n bytes of config text
//   u64 n, n floats of parameters
//   u64 n, n floats of optimizer state
//   u32 CRC32 (zlib) of every byte before it
// The payload length catches truncation before the CRC is even read; the
// CRC catches corruption anywhere.
//
// writeCheckpointFile is atomic: the bytes go to a temporary file in the same
// directory, which is fsynced, renamed over `path` and the directory fsynced,
// so a crash leaves either the old file or the complete new one, never a torn
// one (rename(2) is atomic within a file system).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace loom::ddp {

inline constexpr uint32_t kCheckpointVersion = 1;

struct CheckpointState {
  uint64_t step = 0;         // optimizer steps completed
  uint64_t epoch = 0;        // epoch the next step belongs to
  uint64_t stepInEpoch = 0;  // batches of that epoch already consumed (sampler position)
  uint64_t samplerSeed = 0;
  // What the run was configured with (model shape, optimizer, world size...),
  // so a resume under another configuration is refused instead of misread.
  std::string config;
  std::vector<float> parameters;
  std::vector<float> optimizerState;

  bool operator==(const CheckpointState&) const = default;
};

std::vector<uint8_t> encodeCheckpoint(const CheckpointState& state);
// Validates everything (size, magic, version, payload length, CRC, field
// lengths); std::runtime_error "<path>: <problem>" otherwise. `path` only
// names the source in messages.
CheckpointState decodeCheckpoint(const std::string& path, std::span<const uint8_t> bytes);

// Atomic write (see above); std::runtime_error naming the path and errno text.
void writeCheckpointFile(const std::string& path, const CheckpointState& state);
CheckpointState readCheckpointFile(const std::string& path);

}  // namespace loom::ddp
