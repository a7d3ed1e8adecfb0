#include "tests/support/local_bootstrap.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "common/format.h"

namespace loom::testing {

std::shared_ptr<LocalBootstrapGroup> LocalBootstrapGroup::create(int nranks) {
  return std::make_shared<LocalBootstrapGroup>(nranks);
}

LocalBootstrapGroup::LocalBootstrapGroup(int nranks) : nranks_(nranks), present_(nranks, 0) {}

std::string LocalBootstrapGroup::missingRanksLocked() const {
  std::string who;
  for (int r = 0; r < nranks_; ++r)
    if (!present_[r]) who += (who.empty() ? "" : ", ") + std::to_string(r);
  return who;
}

Status LocalBootstrapGroup::failLocked(std::string message) {
  if (broken_.empty()) broken_ = std::move(message);
  cv_.notify_all();
  return {Code::kRemoteError, broken_};
}

Status LocalBootstrapGroup::exchange(int rank, void* data, size_t bytes, const WaitContext& wait) {
  if (rank < 0 || rank >= nranks_)
    return makeError(Code::kInvalidArgument, "local bootstrap: rank %d out of range [0, %d)", rank, nranks_);
  std::unique_lock<std::mutex> lock(mutex_);
  if (!broken_.empty()) return {Code::kRemoteError, broken_};
  if (arrived_ == 0) {
    roundBytes_ = bytes;
    gathering_.assign(bytes * nranks_, std::byte{0});
  } else if (bytes != roundBytes_) {
    return failLocked(strprintf("local bootstrap: rank %d passed %zu bytes to allGather, others %zu", rank, bytes,
                                roundBytes_));
  }
  if (present_[rank])
    return failLocked(strprintf("local bootstrap: rank %d entered one round twice", rank));
  present_[rank] = 1;
  std::memcpy(gathering_.data() + rank * bytes, static_cast<const std::byte*>(data) + rank * bytes, bytes);
  const uint64_t myRound = round_;
  if (++arrived_ == nranks_) {
    results_[myRound % 2] = std::move(gathering_);
    gathering_.clear();
    std::fill(present_.begin(), present_.end(), 0);
    arrived_ = 0;
    ++round_;
    cv_.notify_all();
  }
  while (round_ == myRound) {
    if (!broken_.empty()) return {Code::kRemoteError, broken_};
    if (wait.aborted()) return failLocked(strprintf("local bootstrap: rank %d aborted while waiting", rank));
    if (wait.deadline.expired())
      return failLocked(strprintf("local bootstrap: rank %d timed out waiting for rank(s) %s", rank,
                                  missingRanksLocked().c_str()));
    // Short slices so the abort flag (which has no way to notify us) is seen promptly.
    auto slice = std::min(wait.deadline.at, Clock::now() + std::chrono::milliseconds(10));
    cv_.wait_until(lock, slice);
  }
  std::memcpy(data, results_[myRound % 2].data(), bytes * nranks_);
  return Status::ok();
}

LocalBootstrap::LocalBootstrap(std::shared_ptr<LocalBootstrapGroup> group, int rank)
    : group_(std::move(group)), rank_(rank) {}

Status LocalBootstrap::allGather(void* data, size_t bytes, const WaitContext& wait) {
  return group_->exchange(rank_, data, bytes, wait);
}

Status LocalBootstrap::barrier(const WaitContext& wait) {
  std::vector<std::byte> token(nranks());
  return group_->exchange(rank_, token.data(), 1, wait);
}

}  // namespace loom::testing
