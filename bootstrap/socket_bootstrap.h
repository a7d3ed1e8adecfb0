// SocketBootstrap: the Bootstrap formed by Bootstrap::connect(), holding the
// two ring sockets (to rank+1 and from rank-1) for its whole life.
//
// allGather is a ring: in step s (0 <= s < n-1) rank r sends slot (r-s) to
// rank r+1 and receives slot (r-s-1) from rank r-1, so after n-1 steps every
// slot has travelled around the ring. Cost: (n-1) * (alpha + bytes * beta).
// Each step is a Data frame whose length must equal `bytes`, which catches
// ranks that disagree on the size instead of corrupting their buffers.
//
// Thread safety: one thread at a time (see Bootstrap).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/socket_ring.h"
#include "bootstrap/socket.h"

namespace loom::bootstrap {

class SocketBootstrap final : public Bootstrap {
 public:
  // Joins the ring given every rank's listening address; `listener` is this
  // rank's own (table[self.rank]). nranks == 1 needs no sockets at all.
  static Result<std::unique_ptr<Bootstrap>> formRing(const RingIdentity& self, Socket listener,
                                                     const std::vector<SockAddr>& table,
                                                     const WaitContext& wait, const Logger& log);

  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  Status allGather(void* data, size_t bytes, const WaitContext& wait) override;
  Status barrier(const WaitContext& wait) override;

 private:
  SocketBootstrap(int rank, int nranks, Socket next, Socket prev, Logger log);
  Status ringStep(uint8_t* base, size_t bytes, int step, const WaitContext& wait);

  int rank_;
  int nranks_;
  Socket next_;  // to (rank+1) % nranks; invalid when nranks == 1
  Socket prev_;  // from (rank-1) % nranks
  Logger log_;
};

}  // namespace loom::bootstrap
