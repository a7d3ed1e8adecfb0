// The verbs transport's RdmaLinks (transports/rdma_memory.h), the resources of
// the GPUDirect RDMA path (src/device/gdr_path.h), separate from the
// transport's own: the transport's links carry chunks through registered host
// rings, these carry RDMA writes straight between registered buffers of any
// kind (device buffers, for GDR), with their own completion queue that only
// their user polls.
//
// One device, PD and CQ per communicator, one RC QP to every other rank, a
// registration cache for the buffers the path writes from and into. Setup is
// collective over the bootstrap (the verbs transport's SetupTable records:
// port, QPN, first PSN), and all ranks agree on its outcome: either every
// rank has connected links, or none uses them.
//
// Every QP keeps kRecvDepth zero-length receives posted, reposted as writes
// with immediate consume them, so a peer never meets an empty receive queue
// (each all-reduce consumes two per peer, and a peer cannot start the next
// call before this rank has joined its record exchange).
//
// Used by one thread at a time (the communicator's executor).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "common/status.h"
#include "common/wait.h"
#include "transports/rdma_memory.h"
#include "transports/verbs/registration_cache.h"
#include "transports/verbs/verbs_api.h"

namespace loom::transport::verbs {

class VerbsRdmaLinks final : public RdmaLinks {
 public:
  static constexpr int kRecvDepth = 8;
  static constexpr int kSendDepth = 80;                         // per QP: 2 x 33 pieces of a 32 GiB slice, and slack
  static constexpr size_t kMaxWriteBytes = size_t{1} << 30;     // one work request moves at most this much

  // Collective. Error: an exchange failed (a rank missing). Success with
  // null: some rank could not set up; *whyNot says why (this rank's own
  // error, or which ranks failed), and every rank got null.
  static Result<std::unique_ptr<RdmaLinks>> connect(int rank, int nranks, Provider& provider,
                                                    bootstrap::Bootstrap& bootstrap, const WaitContext& wait,
                                                    std::string* whyNot);
  ~VerbsRdmaLinks() override;

  const std::string& deviceName() const override { return device_->name(); }
  // Through a registration cache (registration_cache.h) of the last 64 ranges.
  Result<RdmaRegionHandle> registerMemory(void* addr, size_t length, uint32_t access, uint64_t identity) override;
  void invalidate(void* addr, size_t length) override { cache_->invalidate(addr, length); }
  RdmaRegistrationStats registrationStats() const override;

  // Split into pieces of at most kMaxWriteBytes with the immediate on the
  // last, so the peer's receive completes after all of it.
  Status write(int peer, const void* local, uint32_t lkey, uint64_t remote, uint32_t rkey, size_t bytes,
               uint32_t imm) override;
  // Polls the CQ once; reposts a receive for every immediate.
  Status poll(const std::function<Status(int peer, uint32_t imm)>& onImmediate) override;
  bool writesDone() const override { return inFlight_ == 0; }
  // Every QP to ERR.
  void fail() override;

 private:
  VerbsRdmaLinks(int rank, int nranks) : rank_(rank), nranks_(nranks) {}
  Status open(Provider& provider);
  Status connectQps(void* table);

  const int rank_;
  const int nranks_;
  // Declared in creation order; destroyed in reverse (QPs before the PD).
  std::unique_ptr<Device> device_;
  std::unique_ptr<ProtectionDomain> pd_;
  std::unique_ptr<CompletionQueue> cq_;
  std::unique_ptr<RegistrationCache> cache_;
  std::vector<std::unique_ptr<QueuePair>> qps_;  // by rank; null for this rank
  std::vector<uint32_t> psns_;
  std::vector<int> inFlightTo_;  // per peer: posted pieces not yet completed
  int inFlight_ = 0;
};

}  // namespace loom::transport::verbs
