// Where a buffer lives, as far as a collective is concerned.
//
// Only two questions matter to the communicator: can the CPU read and write
// the buffer directly (host and pinned host memory: the host algorithms run
// on it as before), or must its bytes be copied through pinned staging memory
// first (device memory; managed memory too, see below)?
#pragma once

namespace loom::cuda {

enum class MemoryKind {
  kHost,        // pageable host memory, or anything CUDA does not know
  kPinnedHost,  // cudaHostAlloc / cudaHostRegister: host memory the GPU can reach
  kDevice,      // cudaMalloc
  kManaged,     // cudaMallocManaged
};

inline const char* memoryKindName(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kHost: return "host";
    case MemoryKind::kPinnedHost: return "pinned host";
    case MemoryKind::kDevice: return "device";
    case MemoryKind::kManaged: return "managed";
  }
  return "?";
}

// Managed memory is staged like device memory: the CPU may touch it, but on
// devices without concurrent managed access (and under MPS/Windows-style
// drivers) a CPU access while any kernel runs faults, and a page-migrating
// host algorithm is slower than one cudaMemcpy. Staging is always correct.
inline bool needsStaging(MemoryKind kind) { return kind == MemoryKind::kDevice || kind == MemoryKind::kManaged; }

struct PointerInfo {
  MemoryKind kind = MemoryKind::kHost;
  int device = -1;  // the owning device of device/managed memory, -1 for host memory
};

}  // namespace loom::cuda
