// The device engine's one layer between its protocol and memory: every flag
// (FIFO head/tail counter) access, every fence and every store of data the
// engine moves goes through a Memory policy, so the same protocol code runs
// on a GPU and on host threads (the emulation), and tests can swap in a
// policy that delays, reorders or drops operations (engine_protocol.h is a
// template over it).
//
// SystemMemory is the real one: acquire loads, release stores and release
// fences at system scope through libcu++'s cuda::atomic_ref (the CUDA
// toolkit ships it; it compiles under g++ too). Peers may be other GPUs or
// other processes, so system scope, not device scope. Where libcu++ is
// missing (a host-only build on a machine without the CUDA toolkit; CMake
// defines LOOM_HAVE_LIBCUXX when it is found) the host falls back to
// std::atomic_ref, whose acquire/release on the host is the same contract.
//
// A policy provides (all static, LOOM_HOST_DEVICE where the device uses them):
//   loadAcquire(flag), storeRelease(flag, value), fenceRelease()
//   storeData(dst, value): one plain store of a Pack or an element
//   loadLine(line), storeLine(line, value): one LL line (engine_layout.h),
//     8 bytes loaded or stored by ONE single-copy-atomic access, so a
//     reader sees the line's data and flag from the same store
//   flushAtExit(): the end of a block (the kernel's end publishes everything)
//   nowNs(), backoff(iteration), loadAbort(flag)
//   kReceiverWaits, kFenceBeforeFlag: true in every real policy; the test
//     mutants set them false to show the tests notice a missing wait/fence.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "common/host_device.h"

#if defined(__CUDACC__) || defined(LOOM_HAVE_LIBCUXX)
#include <cuda/atomic>
#define LOOM_ENGINE_LIBCUXX 1
#else
#include <atomic>
#define LOOM_ENGINE_LIBCUXX 0
#endif

#if !defined(__CUDA_ARCH__)
#include <chrono>
#include <thread>
#endif

namespace loom::kernels::cuda::engine {

struct SystemMemory {
  static constexpr bool kReceiverWaits = true;
  static constexpr bool kFenceBeforeFlag = true;

#if LOOM_ENGINE_LIBCUXX
  using FlagRef = ::cuda::atomic_ref<uint64_t, ::cuda::thread_scope_system>;
  LOOM_HOST_DEVICE static uint64_t loadAcquire(const uint64_t* flag) {
    return FlagRef(*const_cast<uint64_t*>(flag)).load(::cuda::std::memory_order_acquire);
  }
  LOOM_HOST_DEVICE static void storeRelease(uint64_t* flag, uint64_t value) {
    FlagRef(*flag).store(value, ::cuda::std::memory_order_release);
  }
  LOOM_HOST_DEVICE static void fenceRelease() {
    ::cuda::atomic_thread_fence(::cuda::std::memory_order_release, ::cuda::thread_scope_system);
  }
#else
  // Host-only fallback without libcu++: std::atomic_ref gives the same acquire/release on the host.
  static uint64_t loadAcquire(const uint64_t* flag) {
    return std::atomic_ref<uint64_t>(*const_cast<uint64_t*>(flag)).load(std::memory_order_acquire);
  }
  static void storeRelease(uint64_t* flag, uint64_t value) {
    std::atomic_ref<uint64_t>(*flag).store(value, std::memory_order_release);
  }
  static void fenceRelease() { std::atomic_thread_fence(std::memory_order_release); }
#endif

  // LL lines: relaxed, since the flag and the data it vouches for are one
  // atomic word; nothing else is ordered by them.
#if LOOM_ENGINE_LIBCUXX
  LOOM_HOST_DEVICE static uint64_t loadLine(const uint64_t* line) {
    return FlagRef(*const_cast<uint64_t*>(line)).load(::cuda::std::memory_order_relaxed);
  }
  LOOM_HOST_DEVICE static void storeLine(uint64_t* line, uint64_t value) {
    FlagRef(*line).store(value, ::cuda::std::memory_order_relaxed);
  }
#else
  static uint64_t loadLine(const uint64_t* line) {
    return std::atomic_ref<uint64_t>(*const_cast<uint64_t*>(line)).load(std::memory_order_relaxed);
  }
  static void storeLine(uint64_t* line, uint64_t value) {
    std::atomic_ref<uint64_t>(*line).store(value, std::memory_order_relaxed);
  }
#endif

  template <class V>
  LOOM_HOST_DEVICE static void storeData(void* dst, const V& value) {
#if defined(__CUDA_ARCH__)
    *static_cast<V*>(dst) = value;  // callers pass addresses aligned to V
#else
    memcpy(dst, &value, sizeof(V));
#endif
  }

  LOOM_HOST_DEVICE static void flushAtExit() {}

  LOOM_HOST_DEVICE static uint64_t nowNs() {
#if defined(__CUDA_ARCH__)
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
#else
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count());
#endif
  }

  // Between polls of a flag: short sleeps growing to 1 us on the device (the
  // SM's other warps run); the host emulation yields, since its blocks are
  // threads that may outnumber the cores.
  LOOM_HOST_DEVICE static void backoff(uint32_t iteration) {
#if defined(__CUDA_ARCH__)
#if __CUDA_ARCH__ >= 700
    __nanosleep(iteration < 16 ? 0u : (iteration < 1024 ? 64u : 1000u));
#endif
#else
    (void)iteration;
    std::this_thread::yield();
#endif
  }

  // The abort flag is written by a host thread at any time: a relaxed atomic load.
#if LOOM_ENGINE_LIBCUXX
  LOOM_HOST_DEVICE static uint32_t loadAbort(const volatile uint32_t* flag) {
    if (!flag) return 0u;
    return ::cuda::atomic_ref<uint32_t, ::cuda::thread_scope_system>(*const_cast<uint32_t*>(flag))
        .load(::cuda::std::memory_order_relaxed);
  }
#else
  static uint32_t loadAbort(const volatile uint32_t* flag) {
    return flag ? std::atomic_ref<uint32_t>(*const_cast<uint32_t*>(flag)).load(std::memory_order_relaxed) : 0u;
  }
#endif
};

}  // namespace loom::kernels::cuda::engine
