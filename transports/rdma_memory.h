// RDMA on registered memory of any kind: what a network transport offers to
// code that moves bytes itself, between buffers it registers, by one-sided
// writes. GPUDirect RDMA (src/device/gdr_path.h) is its user: it registers
// device buffers and writes straight between GPUs, which is what NCCL's net
// plugins offer through regMr (with NCCL_PTR_CUDA) and iput.
//
// The verbs transport implements it (transports/verbs/verbs_rdma_memory.h);
// its users see only this contract, never a backend's queue pairs or caches.
//
// A network is probed (cheap, local) and connected (collective over the
// bootstrap: every rank of the group calls connect, and all agree on the
// outcome). The links it returns belong to one communicator and are used by
// one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/status.h"
#include "common/wait.h"

namespace loom::bootstrap { class Bootstrap; }

namespace loom::transport {

// Access rights of a registration.
enum RdmaAccess : uint32_t {
  kRdmaLocalWrite = 1u << 0,   // the NIC may write it locally (receives into it, or must to pin writable memory)
  kRdmaRemoteWrite = 1u << 1,  // peers may write into it
};

// The keys of a registered range: lkey for this rank's writes from it, rkey
// for a peer's writes into it. Held by a shared handle: the range stays
// registered while a handle to it lives.
struct RdmaRegion {
  uint32_t lkey = 0;
  uint32_t rkey = 0;
};
using RdmaRegionHandle = std::shared_ptr<const RdmaRegion>;

// Counters of the registrations kept for reuse.
struct RdmaRegistrationStats {
  uint64_t hits = 0;
  uint64_t misses = 0;         // each one a registration with the NIC
  uint64_t evictions = 0;      // dropped for capacity
  uint64_t merged = 0;         // replaced by a registration of their union with a new range
  uint64_t invalidations = 0;  // dropped by invalidate()
  uint64_t stale = 0;          // dropped for a request with another identity on overlapping pages
};

// Connected links to every other rank of a group.
class RdmaLinks {
 public:
  virtual ~RdmaLinks() = default;

  // The NIC the links use, for logs.
  virtual const std::string& deviceName() const = 0;

  // A registration covering [addr, addr + length) with at least `access`,
  // of the memory known as `identity` (an id unique per allocation, so that
  // memory freed and reallocated at the same address is registered anew;
  // 0: untagged). Registrations are cached: repeated requests for the same
  // memory register nothing.
  virtual Result<RdmaRegionHandle> registerMemory(void* addr, size_t length, uint32_t access, uint64_t identity) = 0;
  // Forgets every registration overlapping [addr, addr + length): call it
  // before that memory is freed.
  virtual void invalidate(void* addr, size_t length) = 0;
  virtual RdmaRegistrationStats registrationStats() const = 0;

  // One RDMA WRITE WITH IMMEDIATE of `bytes` (0 allowed: only the immediate)
  // from registered `local` (its lkey) into `peer`'s registered `remote`
  // (its rkey). The peer's poll() hands it `imm` once all the bytes landed.
  virtual Status write(int peer, const void* local, uint32_t lkey, uint64_t remote, uint32_t rkey, size_t bytes,
                       uint32_t imm) = 0;
  // Polls once: counts this rank's completed writes and hands every
  // immediate that arrived to onImmediate(peer, imm). A failed completion
  // fails with a message naming the peer.
  virtual Status poll(const std::function<Status(int peer, uint32_t imm)>& onImmediate) = 0;
  // No write of this rank is in flight (its source buffers are free again).
  virtual bool writesDone() const = 0;
  // Stops every link at once: after it no peer's write lands in this rank's
  // memory any more, and none of this rank's leaves.
  virtual void fail() = 0;
};

// A network that can connect RdmaLinks.
class RdmaNetwork {
 public:
  virtual ~RdmaNetwork() = default;

  // "" when this host has an RDMA device with an active port, else why not
  // (a phrase for a log line).
  virtual std::string probe() = 0;
  // "" when device (GPU) memory can be registered with it, else why not.
  virtual std::string probeDeviceMemory() = 0;

  // Collective over `bootstrap`. Error: an exchange failed (a rank missing).
  // Success with null: some rank could not connect; *whyNot says why (this
  // rank's own error, or which ranks failed), and every rank got null.
  virtual Result<std::unique_ptr<RdmaLinks>> connect(int rank, int nranks, bootstrap::Bootstrap& bootstrap,
                                                     const WaitContext& wait, std::string* whyNot) = 0;
};

}  // namespace loom::transport
