// An in-process emulation of the verbs interface (verbs_api.h) for tests:
// every "host" is a device on one shared Fabric, and ranks are threads of
// this process. No RDMA hardware exists on the machines Loom is tested on,
// so this is what runs the transport's protocol in CI.
//
// What it models, because the transport must cope with it:
//  - QP state machine RESET -> INIT -> RTR -> RTS and ERR; a transition out
//    of order fails, a post in RESET/INIT/RTR fails without a completion, a
//    post to a QP in ERR completes with IBV_WC_WR_FLUSH_ERR.
//  - RDMA WRITE (with immediate): checks the local lkey and range, reaches
//    the peer QP by (LID, QPN) only if it is in RTR/RTS, bound back to us and
//    expecting our PSN (else IBV_WC_RETRY_EXC_ERR, as when packets go
//    unanswered); checks the rkey, range and remote-write right in the peer's
//    PD (else IBV_WC_REM_ACCESS_ERR, and both QPs go to ERR); copies the bytes;
//    a write with immediate consumes a posted receive of the peer (none:
//    IBV_WC_RNR_RETRY_EXC_ERR) and completes it with the immediate and length.
//  - CQs with a capacity: one completion too many marks the CQ overrun and
//    every later poll fails. A completion on an armed CQ makes its eventfd
//    readable (the completion channel).
//  - Failure injection: killDevice() puts every QP of a device in ERR (its
//    process died); revokeRemoteAccess() invalidates a device's rkeys.
// Delivery is synchronous inside postWrite (one fabric-wide mutex), which
// orders the copy before the completions the receiver polls.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "transports/verbs/verbs_api.h"

namespace loom::transport::verbs::emulated {

class Fabric {
 public:
  static std::shared_ptr<Fabric> create();
  virtual ~Fabric() = default;

  // A provider whose device is "emu<index>" with LID index + 1. Each call to
  // its openDevice() opens that device again (one per rank thread).
  virtual std::shared_ptr<Provider> provider(int index) = 0;

  // Every QP of device `index` goes to ERR, flushing its receives.
  virtual void killDevice(int index) = 0;
  // Every remote-writable memory region of device `index` stops answering to
  // its rkey (writes to it fail with IBV_WC_REM_ACCESS_ERR).
  virtual void revokeRemoteAccess(int index) = 0;

  // Inspection for tests.
  virtual std::vector<uint32_t> queuePairsOf(int index) const = 0;
  virtual QpState stateOf(uint32_t qpn) const = 0;  // kReset if unknown
  virtual int liveMemoryRegions() const = 0;
  virtual int liveQueuePairs() const = 0;
  virtual uint64_t registrations() const = 0;  // ibv_reg_mr calls that succeeded
  virtual uint64_t rnrErrors() const = 0;      // writes with immediate that found no receive
};

// A provider that finds no device: probe() and openDevice() report `reason`.
std::shared_ptr<Provider> noDeviceProvider(std::string reason);

}  // namespace loom::transport::verbs::emulated
