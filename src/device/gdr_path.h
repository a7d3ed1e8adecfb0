// The GPUDirect RDMA path (src/device/path_selection.h, kDirectGdr): ranks on
// several hosts all-reduce device buffers with the RDMA NIC reading and
// writing GPU memory directly (ibv_reg_mr on cudaMalloc memory, which
// nvidia-peermem makes possible), no host staging copy on either side.
//
// Setup, on the first eligible call (collective): links to every peer from the
// network's connect (transports/rdma_memory.h; the verbs transport's: PD, CQ,
// one RC QP per peer). If any rank fails, all agree, log why, and stage from
// then on.
//
// One all-reduce of `count` elements, two-shot, on every rank r:
//  1. register sendbuff, recvbuff and a device scratch of n slots (grown,
//     kept) through the registration cache, so repeated calls on the same
//     buffers register nothing (user buffers' registrations are tagged with
//     their allocation's buffer id, src/device/allocation_identity.h: a buffer
//     freed and reallocated at the same address is registered anew, and one
//     whose identity cannot be learned is not ready); then exchange
//     (bootstrap all-gather) one
//     record: ready, count, recvbuff and scratch address + rkey. Unless every
//     rank is ready (device buffers, registrations done), every rank returns
//     "not run" and the call is staged; nothing was written;
//  2. reduce-scatter: RDMA WRITE WITH IMMEDIATE of sendbuff slice j
//     (src/device/gdr_slices.h) into rank j's scratch slot r, for every peer j;
//  3. when the n-1 immediates arrived: one reduce-copy of the n sources in
//     rank order (own slice from sendbuff, the others from scratch; the same
//     order on every rank, so all compute identical bits) into recvbuff slice r;
//  4. all-gather: WRITE WITH IMMEDIATE of recvbuff slice r into slice r of
//     every peer's recvbuff; wait for the n-1 immediates and for this rank's
//     own writes to complete.
// No closing handshake is needed: a peer writes into our buffers exactly
// twice per call, each write ending with an immediate we count, and it
// cannot start the next call (and write our scratch again) before we join
// that call's record exchange. In place works too: a peer overwrites our
// slice j only after our write of slice j to it has completed.
// On any failure every QP goes to ERR at once (no peer's write lands in our
// buffers after we return) and the path stays failed.
//
// Every wait observes the WaitContext; errors name this rank and the peer.
// Used by the communicator's executor thread, one call at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "algorithms/algorithm.h"
#include "bootstrap/bootstrap.h"
#include "common/log.h"
#include "common/status.h"
#include "common/wait.h"
#include "src/device/allocation_identity.h"
#include "src/device/device_reducer.h"
#include "src/device/memory_kind.h"
#include "transports/rdma_memory.h"

namespace loom::cuda {

struct GdrPathOptions {
  int rank = 0;
  int nranks = 1;
  bootstrap::Bootstrap* bootstrap = nullptr;
  std::shared_ptr<transport::RdmaNetwork> network;       // the verbs transport's (libibverbs, or the tests' emulated fabric)
  ReducerFactory makeReducer;                            // makeCudaReducer, or the tests' emulation
  AllocationIdentityFn identify;                         // of user buffers; empty: driverAllocationIdentity
  Logger log;
};

class GdrPath {
 public:
  explicit GdrPath(GdrPathOptions options);
  ~GdrPath();

  // Runs `args` (an all-reduce) over GDR if every rank can; *ran false means
  // all ranks agreed to stage instead and nothing was touched. Collective:
  // every rank calls it for every gdrEligible() call.
  Status allReduce(const algo::CollArgs& args, const PointerInfo& send, const PointerInfo& recv,
                   const WaitContext& wait, bool* ran);

  // Registration cache counters (zero before setup), for tests and logs.
  transport::RdmaRegistrationStats registrationStats() const;
  // Setup happened and failed on some rank: every call stages.
  bool unavailable() const { return unavailable_; }

 private:
  struct CallRecord;
  struct Registered;
  Status setUp(const WaitContext& wait);
  // Registers this call's buffers and fills this rank's record; "" when
  // ready, else why not (the call is then staged by every rank).
  std::string prepare(const algo::CollArgs& args, const PointerInfo& send, const PointerInfo& recv, CallRecord* mine,
                      Registered* regs);
  // Registers user buffer `what` ([ptr, ptr + bytes)) tagged with its
  // allocation's identity; "" when done, else why not.
  std::string registerUserBuffer(const char* what, void* ptr, size_t bytes, uint32_t access,
                                 transport::RdmaRegionHandle* out);
  Status ensureScratch(size_t bytes);
  Status runTwoShot(const algo::CollArgs& args, const CallRecord* records, const Registered& regs,
                    const WaitContext& wait);
  Status onImmediate(int peer, uint32_t imm);
  // Polls until every peer's immediate of `phase` came (and, with
  // `ownWrites`, every write of this rank completed).
  Status await(int phase, bool ownWrites, const char* what, const WaitContext& wait);

  GdrPathOptions options_;
  std::unique_ptr<DeviceReducer> reducer_;
  int device_ = -1;
  void* scratch_ = nullptr;
  size_t scratchBytes_ = 0;
  std::unique_ptr<transport::RdmaLinks> links_;  // the destructor drops it first: registrations go before the scratch
  bool unavailable_ = false;
  Status failed_;        // the error that broke the path
  uint64_t calls_ = 0;   // calls that ran, the same count on every rank
  std::vector<uint8_t> arrived_[2];  // per phase (reduce-scatter, all-gather), per peer: its immediate came
  std::string notReadyLogged_;    // the last local "not ready" reason logged
};

}  // namespace loom::cuda
