// Who pays for WaitSignal's store-load ordering (common/wait.h).
//
// WaitSignal is a Dekker pair: a writer publishes data, then reads
// `sleepers`; a waiter about to sleep adds itself to `sleepers`, then
// re-reads the data. Each side needs a full fence between its store and its
// load, or both can miss each other and the waiter sleeps through the
// message. The writer's side runs once per message (every chunk, every tiny
// all-reduce); the waiter's side once per sleep, after it has already spun and
// yielded for a while. So where Linux offers membarrier(2) with
// MEMBARRIER_CMD_GLOBAL_EXPEDITED, the waiter pays for both: its membarrier
// makes every running thread of every process registered for it execute a
// full barrier (a thread not running has one at its next context switch), so
// a writer's publish either is visible to the re-read that follows, or comes
// after the barrier and then its read of `sleepers` sees the waiter.
//
// A process registers with enable() (at communicator creation); from then on
// its writers skip the fence. Until then, where the kernel lacks the command,
// or under ThreadSanitizer (which does not know membarrier), they fence as
// before. A waiter always issues the barrier when the kernel has the command,
// since it cannot know which processes write to it; if the call fails it
// sleeps in short slices instead, so a missed wake-up costs a millisecond.
//
// Measured here (2 processes, 8-byte all-reduce, the two ways alternating in
// one run): the writer's fence was 3-8% of a call.
#pragma once

#include <atomic>

namespace loom::asymmetric_fence {

namespace detail {
extern std::atomic<bool> writersSkipFence;
}

// True once this process is registered: WaitSignal::notify() needs only a
// compiler barrier.
inline bool writersSkipFence() { return detail::writersSkipFence.load(std::memory_order_relaxed); }

// Registers this process (idempotent, thread-safe). False where the kernel
// does not offer MEMBARRIER_CMD_GLOBAL_EXPEDITED or it is disabled here.
bool enable();

// The waiter's side, after it counted itself in `sleepers`: a full fence,
// plus the barrier on every registered process's running threads when the
// kernel offers it. False if that call failed: the caller must then not rely
// on being woken.
bool sleeperBarrier();

}  // namespace loom::asymmetric_fence
