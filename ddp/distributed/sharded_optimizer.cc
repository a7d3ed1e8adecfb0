#include "ddp/distributed/sharded_optimizer.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "ddp/optim/step_count.h"

namespace loom::ddp {

ShardedOptimizer::ShardedOptimizer(loomComm_t comm, ParameterStore& store, std::unique_ptr<Optimizer> inner, int stage)
    : comm_(comm), store_(store), inner_(std::move(inner)), stage_(stage) {
  if (!comm) throw std::invalid_argument("ShardedOptimizer: comm is NULL");
  if (!inner_) throw std::invalid_argument("ShardedOptimizer: inner optimizer is NULL");
  if (stage != 1 && stage != 2) throw std::invalid_argument("ShardedOptimizer: stage is " + std::to_string(stage) + ", not 1 or 2");
  if (!store.finalized()) throw std::invalid_argument("ShardedOptimizer: the ParameterStore is not finalized");
  if (loomCommUserRank(comm, &rank_) != loomSuccess || loomCommCount(comm, &nranks_) != loomSuccess)
    throw std::invalid_argument("ShardedOptimizer: comm is not a valid communicator");
  total_ = store.totalSize();
  if (total_ == 0) throw std::invalid_argument("ShardedOptimizer: the ParameterStore holds no parameters");

  // Same model everywhere, else the shards would not line up.
  std::vector<uint64_t> totals(static_cast<size_t>(nranks_));
  totals[rank_] = total_;
  check(loomAllGather(totals.data() + rank_, totals.data(), 1, loomUint64, comm, nullptr), "layout check (all-gather)");
  for (int peer = 0; peer < nranks_; ++peer) {
    if (totals[peer] != total_) {
      throw std::invalid_argument("ShardedOptimizer: " + where() + " has " + std::to_string(total_) +
                                  " parameter elements but rank " + std::to_string(peer) + " has " + std::to_string(totals[peer]));
    }
  }

  const size_t n = static_cast<size_t>(nranks_);
  shard_ = (total_ + n - 1) / n;
  ownBegin_ = std::min(total_, static_cast<size_t>(rank_) * shard_);
  ownCount_ = std::min(total_, ownBegin_ + shard_) - ownBegin_;
  if (stage_ == 2) gradShard_.assign(shard_, 0.0f);
  if (shard_ * n != total_) padded_.assign(shard_ * n, 0.0f);

  check(loomBroadcast(store.values().data(), store.values().data(), total_, loomFloat32, 0, comm, nullptr),
        "broadcast of the initial parameters");
}

void ShardedOptimizer::check(loomResult_t r, const char* what) const {
  if (r == loomSuccess) return;
  std::string detail = loomGetLastError(comm_);
  throw std::runtime_error("ShardedOptimizer: " + std::string(what) + " failed on " + where() + ": " +
                           loomGetErrorString(r) + (detail.empty() ? "" : ": " + detail));
}

void ShardedOptimizer::step() {
  std::span<float> values = store_.values();
  std::span<const float> grads;
  if (stage_ == 2) {
    const float* source = store_.grads().data();
    if (!padded_.empty()) {  // equal shards need the padded length
      std::copy(store_.grads().begin(), store_.grads().end(), padded_.begin());
      std::fill(padded_.begin() + total_, padded_.end(), 0.0f);
      source = padded_.data();
    }
    check(loomReduceScatter(source, gradShard_.data(), shard_, loomFloat32, loomAvg, comm_, nullptr),
          "reduce-scatter of the gradients");
    grads = std::span<const float>(gradShard_).first(ownCount_);
  } else {
    grads = std::span<const float>(store_.grads()).subspan(ownBegin_, ownCount_);
  }

  // A rank whose shard is all padding still steps (on nothing) so that every
  // rank's step count, and so the saved state's header, stay equal.
  inner_->step(values.subspan(ownBegin_, ownCount_), grads);

  if (padded_.empty()) {
    // In place: this rank's shard already sits at values + rank*shard.
    check(loomAllGather(values.data() + ownBegin_, values.data(), shard_, loomFloat32, comm_, nullptr),
          "all-gather of the parameters");
  } else {
    std::copy_n(values.begin() + ownBegin_, ownCount_, padded_.begin() + rank_ * shard_);
    check(loomAllGather(padded_.data() + rank_ * shard_, padded_.data(), shard_, loomFloat32, comm_, nullptr),
          "all-gather of the parameters");
    std::copy_n(padded_.begin(), total_, values.begin());
  }
}

std::vector<float> ShardedOptimizer::saveState() {
  constexpr size_t kHeader = optim::kStepCountFloats;
  const std::vector<float> local = inner_->saveState();
  if (local.size() < kHeader) {
    throw std::runtime_error("ShardedOptimizer::saveState on " + where() + ": the inner optimizer's state has " +
                             std::to_string(local.size()) + " floats, fewer than its step count's " + std::to_string(kHeader));
  }
  const size_t body = local.size() - kHeader;
  // Arrays per element: known from any rank that owns elements.
  if (ownCount_ > 0 && body % ownCount_ != 0) {
    throw std::runtime_error("ShardedOptimizer::saveState on " + where() + ": the inner optimizer's state (" +
                             std::to_string(body) + " floats after the step count) is not a whole number of arrays over its " +
                             std::to_string(ownCount_) + " elements");
  }
  const int64_t arrays = ownCount_ > 0 ? static_cast<int64_t>(body / ownCount_) : -1;

  // Every rank's (arrays, header) must agree: one step count, one layout.
  const size_t record = 1 + kHeader;
  std::vector<float> records(record * nranks_);
  records[record * rank_] = static_cast<float>(arrays);
  std::copy_n(local.begin(), kHeader, records.begin() + record * rank_ + 1);
  check(loomAllGather(records.data() + record * rank_, records.data(), record, loomFloat32, comm_, nullptr),
        "saveState (layout exchange)");
  const float* reference = records.data();  // rank 0 always owns elements
  for (int peer = 0; peer < nranks_; ++peer) {
    const float* theirs = records.data() + record * peer;
    const bool sameArrays = theirs[0] == reference[0] || theirs[0] < 0;
    if (!sameArrays || !std::equal(theirs + 1, theirs + record, reference + 1)) {
      throw std::runtime_error("ShardedOptimizer::saveState on " + where() + ": rank " + std::to_string(peer) +
                               "'s optimizer state (step count or number of arrays) differs from rank 0's");
    }
  }
  const size_t k = static_cast<size_t>(reference[0]);

  std::vector<float> full(kHeader + k * total_);
  std::copy_n(local.begin(), kHeader, full.begin());
  std::vector<float> gathered(shard_ * nranks_);
  for (size_t j = 0; j < k; ++j) {
    float* mine = gathered.data() + rank_ * shard_;
    std::fill(mine, mine + shard_, 0.0f);
    std::copy_n(local.begin() + kHeader + j * ownCount_, ownCount_, mine);
    check(loomAllGather(mine, gathered.data(), shard_, loomFloat32, comm_, nullptr), "saveState (all-gather of the state)");
    std::copy_n(gathered.begin(), total_, full.begin() + kHeader + j * total_);
  }
  return full;
}

void ShardedOptimizer::loadState(std::span<const float> full) {
  constexpr size_t kHeader = optim::kStepCountFloats;
  if (full.size() < kHeader || (full.size() - kHeader) % total_ != 0) {
    throw std::invalid_argument("ShardedOptimizer::loadState on " + where() + ": state has " + std::to_string(full.size()) +
                                " floats, not a step count plus whole arrays over the model's " + std::to_string(total_) + " elements");
  }
  // All ranks must load the same checkpoint layout (cheap check, and it keeps
  // the call collective like saveState).
  std::vector<uint64_t> sizes(nranks_);
  sizes[rank_] = full.size();
  check(loomAllGather(sizes.data() + rank_, sizes.data(), 1, loomUint64, comm_, nullptr), "loadState (size exchange)");
  for (int peer = 0; peer < nranks_; ++peer) {
    if (sizes[peer] != full.size()) {
      throw std::invalid_argument("ShardedOptimizer::loadState on " + where() + ": state has " + std::to_string(full.size()) +
                                  " floats but rank " + std::to_string(peer) + "'s has " + std::to_string(sizes[peer]));
    }
  }
  const size_t k = (full.size() - kHeader) / total_;
  std::vector<float> mine(kHeader + k * ownCount_);
  std::copy_n(full.begin(), kHeader, mine.begin());
  for (size_t j = 0; j < k; ++j)
    std::copy_n(full.begin() + kHeader + j * total_ + ownBegin_, ownCount_, mine.begin() + kHeader + j * ownCount_);
  inner_->loadState(mine);
}

}  // namespace loom::ddp
