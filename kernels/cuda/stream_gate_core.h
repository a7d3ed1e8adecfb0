// The wait protocol of a stream gate, written once as __host__ __device__
// code: the 1-thread gate kernel (stream_gate.cu) runs it on the user's CUDA
// stream, and the host tests run the same function on an emulated stream's
// thread (tests/unit/device/emulated_cuda.h). Compiles with g++ too.
//
// A gate is two 64-bit words in memory that both the host and the device
// can address (cudaHostAllocMapped on a GPU):
//   released  the highest sequence number whose operation has completed; the
//             host only ever raises it (release-store), so a gate only moves
//             forward;
//   aborted   nonzero once the gate is torn down: every wait ends at once.
// The kernel for sequence s returns when released >= s (or aborted), so work
// enqueued after it on the stream starts only after operation s completed.
//
// Memory order: the host's release-store of `released` follows the
// operation's writes to the user's buffers; the kernel's acquire-load that
// sees it orders those writes before everything after the kernel on the
// stream. Both go through one layer: libcu++'s cuda::atomic_ref with system
// scope where the CUDA toolkit's libcu++ is found (nvcc always; g++ when the
// build adds its include directory), else std::atomic_ref on the host.
#pragma once

#include <cstdint>

#if defined(__CUDACC__) || __has_include(<cuda/atomic>)
#include <cuda/atomic>
#define LOOM_GATE_LIBCUXX 1
#else
#include <atomic>
#define LOOM_GATE_LIBCUXX 0
#endif

#if defined(__CUDACC__)
#define LOOM_GATE_HD __host__ __device__
#else
#define LOOM_GATE_HD
#endif

namespace loom::kernels::cuda {

// The two words of one gate, each on its own 64-byte line (the device polls
// `released` over the bus; the host writes it from another core).
struct alignas(64) StreamGateWords {
  uint64_t released;
  uint64_t pad0[7];
  uint64_t aborted;
  uint64_t pad1[7];
};
static_assert(sizeof(StreamGateWords) == 128, "two 64-byte lines");

enum StreamGateOutcome : int {
  kStreamGateOpen = 0,     // the awaited sequence was released
  kStreamGateAborted = 1,  // the gate was torn down first
};

// nvcc's and g++'s copies of these inline functions differ (the device pause,
// maybe the atomics layer): one namespace per compiler keeps them apart when
// both end up in one program.
#if defined(__CUDACC__)
inline namespace gate_nvcc {
#else
inline namespace gate_host {
#endif


LOOM_GATE_HD inline uint64_t gateLoadAcquire(const uint64_t* word) {
#if LOOM_GATE_LIBCUXX
  ::cuda::atomic_ref<uint64_t, ::cuda::thread_scope_system> ref(*const_cast<uint64_t*>(word));
  return ref.load(::cuda::std::memory_order_acquire);
#else
  return std::atomic_ref<uint64_t>(*const_cast<uint64_t*>(word)).load(std::memory_order_acquire);
#endif
}

LOOM_GATE_HD inline void gateStoreRelease(uint64_t* word, uint64_t value) {
#if LOOM_GATE_LIBCUXX
  ::cuda::atomic_ref<uint64_t, ::cuda::thread_scope_system> ref(*word);
  ref.store(value, ::cuda::std::memory_order_release);
#else
  std::atomic_ref<uint64_t>(*word).store(value, std::memory_order_release);
#endif
}

// Waits until `gate` released `target` or was aborted. `pause(round)` backs
// off between polls: __nanosleep on the device (the poll crosses the bus, and
// a sleeping warp leaves its SM's issue slots to the kernels beside it), a
// yield or sleep on the host.
template <class Pause>
LOOM_GATE_HD inline StreamGateOutcome gateWait(const StreamGateWords* gate, uint64_t target, Pause&& pause) {
  for (uint32_t round = 0;; ++round) {
    if (gateLoadAcquire(&gate->released) >= target) return kStreamGateOpen;
    if (gateLoadAcquire(&gate->aborted) != 0) {
      // An abort may race with the last release: report what was reached.
      return gateLoadAcquire(&gate->released) >= target ? kStreamGateOpen : kStreamGateAborted;
    }
    pause(round);
  }
}

// The host's side: raise `released` to `sequence` (never lowers it: the
// caller releases in stream order, stream_gate.h), and tear a gate down.
inline void gateRelease(StreamGateWords* gate, uint64_t sequence) { gateStoreRelease(&gate->released, sequence); }
inline void gateAbort(StreamGateWords* gate) { gateStoreRelease(&gate->aborted, 1); }

}  // namespace gate_nvcc / gate_host
}  // namespace loom::kernels::cuda
