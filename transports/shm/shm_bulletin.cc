#include "transports/shm/shm_bulletin.h"

#include <atomic>
#include <cstring>

#include "common/format.h"
#include "transports/shm/shm_ll_connection.h"

namespace loom::transport::shm {
namespace {

static_assert(std::atomic_ref<uint64_t>::is_always_lock_free, "bulletin lines need lock-free 64-bit atomics");

inline uint64_t* bufferLines(const BulletinView& view, uint64_t round) {
  return reinterpret_cast<uint64_t*>(view.buffers + (round % kBulletinBuffers) * view.stride);
}

bool validView(const BulletinView& v) {
  return v.control != nullptr && v.buffers != nullptr && v.capacity % kLLPayloadPerLine == 0 &&
         v.capacity < (1ull << 32) && v.stride % kLLLineBytes == 0 &&
         v.stride >= (1 + v.capacity / kLLPayloadPerLine) * kLLLineBytes && v.flagPeriod > kBulletinBuffers;
}

// This rank's message capacity; 0 for a rank outside its views (a misuse).
size_t ownCapacity(int selfRank, const std::vector<BulletinView>& views) {
  return selfRank >= 0 && selfRank < static_cast<int>(views.size()) ? static_cast<size_t>(views[selfRank].capacity)
                                                                     : 0;
}

}  // namespace

ShmBulletin::ShmBulletin(int selfRank, std::vector<BulletinView> views)
    : Bulletin(ownCapacity(selfRank, views)), selfRank_(selfRank), views_(std::move(views)),
      readIn_(views_.size(), 0) {
  const int n = static_cast<int>(views_.size());
  if (selfRank_ < 0 || selfRank_ >= n) {
    // Every later call fails on misuse_; one harmless entry keeps any index in range.
    misuse_ = makeError(Code::kInternalError, "shm bulletin: rank %d outside its %d views", selfRank_, n);
    views_.assign(1, BulletinView{});
    readIn_.assign(1, 0);
    selfRank_ = 0;
    return;
  }
  for (int r = 0; r < n; ++r) {
    if (!validView(views_[r]) && (r == selfRank_ || views_[r].control != nullptr)) {
      misuse_ = makeError(Code::kInternalError, "shm bulletin of rank %d: bad geometry for rank %d", selfRank_, r);
      return;
    }
  }
  // Fresh buffers are zero (flag 0, never valid): as good as a full write
  // in the first round that uses each.
  for (uint32_t b = 0; b < kBulletinBuffers; ++b) fullWrite_[b] = b;
  for (int r = 0; r < n; ++r)
    if (r != selfRank_ && views_[r].control != nullptr) awaited_.push_back({.rank = r});
  peers_ = static_cast<int>(awaited_.size());
}

Status ShmBulletin::post(const void* data, size_t bytes) {
  if (!misuse_.isOk()) return misuse_;
  const BulletinView& own = views_[selfRank_];
  LOOM_ENFORCE(bytes <= own.capacity, Code::kInternalError,
               "shm bulletin of rank %d: a message of %zu bytes exceeds its capacity of %llu", selfRank_, bytes,
               static_cast<unsigned long long>(own.capacity));
  LOOM_ENFORCE(unread_ == 0, Code::kInternalError,
               "shm bulletin of rank %d: round %llu started before round %llu was read from every peer (%d unread)",
               selfRank_, static_cast<unsigned long long>(rounds_), static_cast<unsigned long long>(rounds_ - 1),
               unread_);
  const uint64_t round = rounds_;
  const uint32_t flag = llFlagFor(round, own.flagPeriod);
  uint64_t* lines = bufferLines(own, round);
  auto store = [](uint64_t* line, uint64_t value) {
    std::atomic_ref<uint64_t>(*line).store(value, std::memory_order_release);
  };
  store(&lines[0], llLine(static_cast<uint32_t>(bytes), flag));
  const auto* src = static_cast<const std::byte*>(data);
  const size_t whole = bytes / kLLPayloadPerLine;
  for (size_t i = 0; i < whole; ++i) {
    uint32_t word;
    std::memcpy(&word, src + i * kLLPayloadPerLine, sizeof word);
    store(&lines[1 + i], llLine(word, flag));
  }
  size_t written = whole;
  if (size_t rest = bytes % kLLPayloadPerLine) {
    uint32_t word = 0;  // zero padding: no stray bytes cross to the peers
    std::memcpy(&word, src + whole * kLLPayloadPerLine, rest);
    store(&lines[1 + whole], llLine(word, flag));
    ++written;
  }
  // The buffer is read next in round + kBulletinBuffers; no line may be a flag period old then.
  uint64_t& fullWrite = fullWrite_[round % kBulletinBuffers];
  if (round + kBulletinBuffers - fullWrite >= own.flagPeriod) {
    const size_t capacityLines = static_cast<size_t>(own.capacity / kLLPayloadPerLine);
    for (size_t i = written; i < capacityLines; ++i) store(&lines[1 + i], llLine(0, flag));
    fullWrite = round;
  }
  own.control->posted.notify();
  for (AwaitedHeader& peer : awaited_) {
    const BulletinView& view = views_[peer.rank];
    peer.line = bufferLines(view, round);
    peer.flag = llFlagFor(round, view.flagPeriod);
  }
  rounds_ = round + 1;
  unread_ = peers_;
  return Status::ok();
}

Status ShmBulletin::read(int peer, void* out, size_t bytes, const WaitContext& wait) {
  if (!misuse_.isOk()) return misuse_;
  LOOM_ENFORCE(peer >= 0 && peer < static_cast<int>(views_.size()) && peer != selfRank_ &&
                   views_[peer].control != nullptr,
               Code::kInternalError, "shm bulletin of rank %d: no bulletin of rank %d to read", selfRank_, peer);
  LOOM_ENFORCE(rounds_ > 0, Code::kInternalError,
               "shm bulletin of rank %d: read from rank %d before this rank posted a round", selfRank_, peer);
  const BulletinView& view = views_[peer];
  const uint64_t round = rounds_ - 1;
  LOOM_ENFORCE(bytes <= view.capacity, Code::kInternalError,
               "shm bulletin of rank %d: a read of %zu bytes exceeds the capacity of %llu", selfRank_, bytes,
               static_cast<unsigned long long>(view.capacity));
  const uint32_t flag = llFlagFor(round, view.flagPeriod);
  uint64_t* lines = bufferLines(view, round);
  auto load = [](uint64_t* line) { return std::atomic_ref<uint64_t>(*line).load(std::memory_order_acquire); };
  auto* dst = static_cast<std::byte*>(out);
  const size_t needed = static_cast<size_t>(llDataLines(bytes));
  const size_t whole = bytes / kLLPayloadPerLine;
  bool headerSeen = false;
  uint64_t posted = 0;  // the byte count in the header
  size_t done = 0;
  auto arrived = [&] {
    if (!headerSeen) {
      const uint64_t header = load(&lines[0]);
      if (llLineFlag(header) != flag) return false;
      headerSeen = true;
      posted = llLinePayload(header);
      if (posted != bytes) return true;  // reported below; its lines are not ours to read
    }
    // Locals, not captures: stores through dst (bytes, which alias
    // anything) would otherwise reload every captured value per line.
    uint64_t* const src = lines + 1;
    const uint32_t want = flag;
    std::byte* const to = dst;
    const size_t full = whole, total = needed;
    size_t d = done;
    for (; d < full; ++d) {
      const uint64_t line = load(&src[d]);
      if (llLineFlag(line) != want) break;
      const uint32_t word = llLinePayload(line);
      std::memcpy(to + d * kLLPayloadPerLine, &word, kLLPayloadPerLine);
    }
    if (d == full && d < total) {  // the partial last word
      const uint64_t line = load(&src[d]);
      if (llLineFlag(line) == want) {
        const uint32_t word = llLinePayload(line);
        std::memcpy(to + d * kLLPayloadPerLine, &word, bytes - d * kLLPayloadPerLine);
        ++d;
      }
    }
    done = d;
    return d == total;
  };
  auto what = [&] {
    return strprintf("rank %d's message of round %llu, read by rank %d over shm (%s)", peer,
                     static_cast<unsigned long long>(round), selfRank_,
                     headerSeen ? strprintf("%zu of %zu lines arrived", done, needed).c_str() : "nothing arrived");
  };
  LOOM_TRY(waitUntil(arrived, &view.control->posted, wait, what));
  if (posted != bytes)
    return makeError(Code::kInvalidUsage,
                     "rank %d posted %llu bytes in round %llu where rank %d expected %zu "
                     "(do all ranks call the same collective with the same count and type?)",
                     peer, static_cast<unsigned long long>(posted), static_cast<unsigned long long>(round), selfRank_,
                     bytes);
  if (readIn_[peer] != round + 1) {
    readIn_[peer] = round + 1;
    --unread_;
  }
  return Status::ok();
}

bool ShmBulletin::peersPosted() const {
  // No round posted (or a misused bulletin, which never posts): no answer yet.
  if (rounds_ == 0) return false;
  for (const AwaitedHeader& peer : awaited_) {
    // The header line is stored first: its flag says the peer is in the round.
    const uint64_t header = std::atomic_ref<uint64_t>(*peer.line).load(std::memory_order_acquire);
    if (llLineFlag(header) != peer.flag) return false;
  }
  return true;
}

void ShmBulletin::announceStart(uint64_t seq) {
  views_[selfRank_].control->started.store(seq, std::memory_order_release);
}

bool ShmBulletin::peersStarted(uint64_t seq) const {
  for (int r = 0; r < static_cast<int>(views_.size()); ++r)
    if (r != selfRank_ && views_[r].control && views_[r].control->started.load(std::memory_order_acquire) < seq)
      return false;
  return true;
}

}  // namespace loom::transport::shm
