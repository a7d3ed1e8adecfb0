#include "transports/shm/shm_windows.h"

#include "common/format.h"

namespace loom::transport::shm {

ShmWindows::ShmWindows(int selfRank, std::vector<WindowView> views) : selfRank_(selfRank), views_(std::move(views)) {
  const int n = static_cast<int>(views_.size());
  if (selfRank_ < 0 || selfRank_ >= n) {
    misuse_ = makeError(Code::kInternalError, "shm windows: rank %d outside its %d views", selfRank_, n);
    views_.assign(1, WindowView{});
    selfRank_ = 0;
    return;
  }
  for (int r = 0; r < n; ++r) {
    const WindowView& v = views_[r];
    if (v.control == nullptr || v.data == nullptr || v.bytes != views_[selfRank_].bytes) {
      misuse_ = makeError(Code::kInternalError, "shm windows of rank %d: rank %d's window is %s", selfRank_, r,
                          v.control == nullptr ? "not mapped" : "of another size");
      return;
    }
  }
}

const std::byte* ShmWindows::of(int rank) const {
  if (rank < 0 || rank >= static_cast<int>(views_.size())) return nullptr;
  return views_[rank].data;
}

Status ShmWindows::arrive(uint64_t tag, const WaitContext& wait) {
  if (!misuse_.isOk()) return misuse_;
  const uint64_t phase = phases_ + 1;
  WindowControl& mine = *views_[selfRank_].control;
  mine.tags[phase % 2].store(tag, std::memory_order_relaxed);
  mine.phase.store(phase, std::memory_order_release);  // orders the tag and the phase's window writes
  mine.arrived.notify();
  phases_ = phase;
  const int n = static_cast<int>(views_.size());
  // Peers in turn from the next one: with every rank polling, the first
  // peers each one waits for differ, which spreads the cache-line traffic.
  for (int k = 1; k < n; ++k) {
    const int peer = (selfRank_ + k) % n;
    WindowControl& theirs = *views_[peer].control;
    auto ended = [&] { return theirs.phase.load(std::memory_order_acquire) >= phase; };
    auto what = [&] {
      return strprintf("rank %d to end phase %llu of the shared windows (rank %d waits; rank %d has ended %llu)", peer,
                       static_cast<unsigned long long>(phase), selfRank_, peer,
                       static_cast<unsigned long long>(theirs.phase.load(std::memory_order_relaxed)));
    };
    LOOM_TRY(waitUntil(ended, &theirs.arrived, wait, what));
    const uint64_t theirTag = theirs.tags[phase % 2].load(std::memory_order_relaxed);
    if (theirTag != tag)
      return makeError(Code::kInvalidUsage,
                       "rank %d ended phase %llu of the shared windows with tag %llu where rank %d used %llu "
                       "(do all ranks call the same collective with the same count and type?)",
                       peer, static_cast<unsigned long long>(phase), static_cast<unsigned long long>(theirTag),
                       selfRank_, static_cast<unsigned long long>(tag));
  }
  return Status::ok();
}

}  // namespace loom::transport::shm
