#include "ddp/distributed/parameter_server.h"

#include <algorithm>
#include <stdexcept>

namespace loom::ddp {

ParameterServer::ParameterServer(loomComm_t comm, ParameterStore& store, std::unique_ptr<Optimizer> inner, int servers)
    : comm_(comm), store_(store), inner_(std::move(inner)), servers_(servers) {
  if (!comm || loomCommUserRank(comm, &rank_) != loomSuccess || loomCommCount(comm, &nranks_) != loomSuccess)
    throw std::invalid_argument("ParameterServer: comm is not a valid communicator");
  if (!inner_) throw std::invalid_argument("ParameterServer: inner optimizer is NULL");
  if (!store.finalized()) throw std::invalid_argument("ParameterServer: the ParameterStore is not finalized");
  if (servers < 1 || servers > nranks_) {
    throw std::invalid_argument("ParameterServer on " + where() + ": servers = " + std::to_string(servers) +
                                " is outside [1, " + std::to_string(nranks_) + "]");
  }
  total_ = store.totalSize();
  shard_ = (total_ + servers - 1) / servers;
  if (isServer()) {
    received_.assign(shard_ * nranks_, 0.0f);
    average_.assign(shardCount(rank_), 0.0f);
  }
  check(loomBroadcast(store.values().data(), store.values().data(), total_, loomFloat32, 0, comm, nullptr),
        "broadcast of the initial parameters");
}

void ParameterServer::check(loomResult_t r, const std::string& what) const {
  if (r == loomSuccess) return;
  throw std::runtime_error("ParameterServer: " + what + " failed on " + where() + ": " + loomGetErrorString(r) + ": " +
                           loomGetLastError(comm_));
}

size_t ParameterServer::shardBegin(int s) const { return std::min(total_, static_cast<size_t>(s) * shard_); }
size_t ParameterServer::shardCount(int s) const { return std::min(total_, shardBegin(s) + shard_) - shardBegin(s); }

void ParameterServer::step() {
  const float* grads = store_.grads().data();
  float* values = store_.values().data();
  // Push: gradient shards to their servers.
  check(loomGroupStart(), "loomGroupStart");
  loomResult_t r = loomSuccess;
  for (int s = 0; s < servers_ && r == loomSuccess; ++s)
    if (shardCount(s) > 0) r = loomSend(grads + shardBegin(s), shardCount(s), loomFloat32, s, comm_, nullptr);
  if (isServer() && shardCount(rank_) > 0)
    for (int w = 0; w < nranks_ && r == loomSuccess; ++w)
      r = loomRecv(received_.data() + w * shard_, shardCount(rank_), loomFloat32, w, comm_, nullptr);
  loomResult_t end = loomGroupEnd();
  check(r != loomSuccess ? r : end, "push of the gradients");

  if (isServer()) {
    const size_t count = shardCount(rank_);
    std::copy_n(received_.begin(), count, average_.begin());
    for (int w = 1; w < nranks_; ++w) {
      const float* part = received_.data() + w * shard_;
      for (size_t i = 0; i < count; ++i) average_[i] += part[i];
    }
    const float scale = 1.0f / static_cast<float>(nranks_);
    for (float& g : average_) g *= scale;
    inner_->step(std::span<float>(values + shardBegin(rank_), count), average_);
  }

  // Pull: every server's updated shard to every worker.
  check(loomGroupStart(), "loomGroupStart");
  r = loomSuccess;
  if (isServer() && shardCount(rank_) > 0)
    for (int w = 0; w < nranks_ && r == loomSuccess; ++w)
      if (w != rank_) r = loomSend(values + shardBegin(rank_), shardCount(rank_), loomFloat32, w, comm_, nullptr);
  for (int s = 0; s < servers_ && r == loomSuccess; ++s)
    if (s != rank_ && shardCount(s) > 0) r = loomRecv(values + shardBegin(s), shardCount(s), loomFloat32, s, comm_, nullptr);
  end = loomGroupEnd();
  check(r != loomSuccess ? r : end, "pull of the parameters");
}

}  // namespace loom::ddp
