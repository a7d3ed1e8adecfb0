// A communicator: one rank's membership in a group of ranks, with everything
// needed to run collectives among them.
//
// It owns, in creation order: a Config snapshot and Logger, the bootstrap
// (kept for later out-of-band needs), the peer table, one Transport per
// backend in use, the Links table (peer -> connection) that algorithms see,
// and the Executor that runs operations in order.
//
// Errors: an invalid argument is reported to the caller and leaves the
// communicator usable. Any other failure of an operation is sticky (as in
// NCCL): later operations fail at once with the first error, which
// asyncError() reports, until the communicator is destroyed or aborted.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "algorithms/algorithm.h"
#include "bootstrap/bootstrap.h"
#include "comm/algorithm_selection.h"
#include "comm/completion.h"
#include "comm/executor.h"
#include "common/config.h"
#include "common/log.h"
#include "transports/transport.h"

namespace loom {

class Stream;

class Communicator {
 public:
  // Collective over all `nranks` ranks of the job named by `id`.
  static Result<std::unique_ptr<Communicator>> create(const bootstrap::UniqueId& id, int nranks,
                                                      int rank);
  ~Communicator();

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  const Logger& log() const { return log_; }

  // Checks `args` against this communicator (dtype, op, root, buffers,
  // overflow); the message names the argument and this rank.
  Status validate(const algo::CollArgs& args) const;

  // Queues a validated collective. With a stream, returns at once and the
  // stream tracks completion; without one, returns when the collective is done.
  Status enqueue(const algo::CollArgs& args, Stream* stream);
  // Submits for the worker thread and returns the completion (group calls).
  CompletionPtr enqueueAsync(const algo::CollArgs& args, Stream* stream);

  // First error of asynchronous work, or ok.
  Status asyncError() const;
  // Fails every waiting and queued operation at once.
  void abort();
  // Waits for queued operations to finish.
  void flush();

  void setLastError(const std::string& message);
  std::string lastError() const;

 private:
  Communicator(Config config, int rank, int nranks, std::vector<std::string>* warnings);
  Status connectPeers(const bootstrap::UniqueId& id);
  void adaptWaitsToHost();
  Status execute(const algo::CollArgs& args, const CompletionPtr& after);
  WaitContext makeWait() const;
  void recordError(const Status& status);

  class LinkTable;

  Config config_;  // fixed once connectPeers() has adapted it to the host
  const int rank_;
  const int nranks_;
  Logger log_;
  AlgorithmSelector selector_;
  std::unique_ptr<bootstrap::Bootstrap> bootstrap_;
  std::vector<transport::PeerInfo> peers_;
  std::vector<std::unique_ptr<transport::Transport>> transports_;
  std::unique_ptr<LinkTable> links_;
  std::atomic<bool> abort_{false};
  std::atomic<bool> failed_{false};
  mutable std::mutex errorMu_;
  Status asyncError_;
  std::string lastError_;
  std::unique_ptr<Executor> executor_;  // last: its worker uses everything above
};

}  // namespace loom
