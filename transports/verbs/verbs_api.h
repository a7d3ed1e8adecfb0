// The few verbs operations the verbs transport uses, behind an abstract
// interface, so the transport's protocol runs over two backends:
//   ibv_provider.h    the real one, over libibverbs (ibv_* calls);
//   emulated_verbs.h  an in-process fabric for tests, whose "hosts" are
//                     threads of one process (no RDMA device exists here).
//
// The vocabulary mirrors libibverbs without including it, so the transport
// compiles (and is tested) without the headers:
//   Provider          finds and opens a device (ibv_get_device_list, ibv_open_device)
//   Device            one opened device and its active port (ibv_query_port, ibv_query_gid)
//   ProtectionDomain  ibv_alloc_pd; memory registration (ibv_reg_mr: lkey/rkey), RC QPs
//   CompletionQueue   ibv_create_cq with a completion channel, whose fd a waiter
//                     sleeps on after ibv_req_notify_cq (armNotify)
//   QueuePair         an RC QP: RESET -> INIT -> RTR -> RTS (ERR on failure),
//                     RDMA WRITE (with immediate) and zero-length receives
//
// Ownership: destroy QPs, then memory regions, then CQs, then the PD, then
// the device (the reverse of creation), as libibverbs requires.
// Thread safety: like libibverbs, posting and polling may come from any
// thread; the transport still drives each object from one thread at a time.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"

namespace loom::transport::verbs {

enum class QpState { kReset, kInit, kRtr, kRts, kError };
const char* qpStateName(QpState state);

// Memory access rights (IBV_ACCESS_*). Remote write requires local write.
enum Access : uint32_t {
  kAccessLocalWrite = 1u << 0,
  kAccessRemoteWrite = 1u << 1,
  kAccessRemoteRead = 1u << 2,
};

// The completion statuses the transport distinguishes (IBV_WC_*).
enum class WcStatus {
  kSuccess,
  kLocalLengthError,      // IBV_WC_LOC_LEN_ERR
  kLocalProtectionError,  // IBV_WC_LOC_PROT_ERR: bad lkey or range
  kWrFlushError,          // IBV_WC_WR_FLUSH_ERR: the QP is in error, work request discarded
  kRemoteAccessError,     // IBV_WC_REM_ACCESS_ERR: bad rkey, range or rights at the peer
  kRemoteInvalidRequest,  // IBV_WC_REM_INV_REQ_ERR
  kRemoteOperationError,  // IBV_WC_REM_OP_ERR
  kRetryExceeded,         // IBV_WC_RETRY_EXC_ERR: no ACK (peer gone, its QP in error, link down)
  kRnrRetryExceeded,      // IBV_WC_RNR_RETRY_EXC_ERR: the peer had no receive posted
  kOther,                 // anything else (the message carries the number)
};
const char* wcStatusName(WcStatus status);

enum class WcOpcode { kRdmaWrite, kRecvRdmaWithImm, kOther };

struct WorkCompletion {
  uint64_t wrId = 0;
  WcStatus status = WcStatus::kSuccess;
  int vendorStatus = 0;  // the raw ibv_wc_status, for messages
  WcOpcode opcode = WcOpcode::kOther;  // only meaningful on success
  uint32_t qpNum = 0;
  uint32_t byteLen = 0;  // receive of a write with immediate: bytes the peer wrote
  uint32_t imm = 0;      // host byte order
  bool withImm = false;
};

struct MemoryRegion {
  void* addr = nullptr;
  size_t length = 0;
  uint32_t lkey = 0;
  uint32_t rkey = 0;
  uint32_t access = 0;
  void* handle = nullptr;  // the backend's object (struct ibv_mr*)
};

// The local port a QP binds to, as the peer needs it to reach us.
struct PortAttributes {
  uint8_t portNum = 1;
  uint16_t lid = 0;
  std::array<uint8_t, 16> gid{};
  int gidIndex = 0;
  bool ethernet = false;  // RoCE: routed by GID (global route header), LIDs are 0
  int activeMtu = 5;      // enum ibv_mtu: 1..5 = 256..4096 bytes
};

// What the peer sent during setup: enough to move our QP to RTR.
struct RemoteQp {
  uint32_t qpn = 0;
  uint32_t psn = 0;  // the peer's first send PSN = our expected receive PSN
  uint16_t lid = 0;
  std::array<uint8_t, 16> gid{};
  bool useGid = false;
  int mtu = 5;
};

// One RDMA WRITE (optionally with immediate data) of one contiguous range.
struct RdmaWrite {
  uint64_t wrId = 0;
  const void* localAddr = nullptr;
  uint32_t length = 0;  // 0: no scatter/gather entry at all
  uint32_t lkey = 0;
  uint64_t remoteAddr = 0;
  uint32_t rkey = 0;
  bool withImm = false;
  uint32_t imm = 0;  // host byte order (backends convert)
};

class CompletionQueue {
 public:
  virtual ~CompletionQueue() = default;
  // Up to `max` completions into `out`; a failed Status if the CQ itself
  // failed (overrun: more completions than its capacity).
  virtual Result<int> poll(WorkCompletion* out, int max) = 0;
  // Requests one event on the completion channel at the next completion.
  virtual Status armNotify() = 0;
  // Readable (POLLIN) once an armed CQ received a completion.
  virtual int eventFd() const = 0;
  // Consumes and acknowledges pending channel events; never blocks.
  virtual void drainEvents() = 0;
};

class QueuePair {
 public:
  virtual ~QueuePair() = default;
  virtual uint32_t qpn() const = 0;
  virtual QpState state() const = 0;
  // RESET -> INIT with the access rights remote peers get on this QP.
  virtual Status toInit(uint8_t portNum, uint32_t access) = 0;
  // INIT -> RTR: bind to the peer's QP and expect its PSN.
  virtual Status toRtr(const PortAttributes& local, const RemoteQp& remote) = 0;
  // RTR -> RTS: start sending at `localPsn`.
  virtual Status toRts(uint32_t localPsn) = 0;
  // Any state -> ERR: outstanding work requests are flushed.
  virtual Status toError() = 0;
  // Posts a signaled RDMA write. Fails (without a completion) if the QP is
  // not in RTS or ERR, or the send queue is full.
  virtual Status postWrite(const RdmaWrite& wr) = 0;
  // Posts a receive without buffers: a write with immediate consumes one and
  // completes it with the immediate and the written length.
  virtual Status postRecv(uint64_t wrId) = 0;
};

struct QpCapacity {
  int maxSendWr = 16;
  int maxRecvWr = 16;
};

class ProtectionDomain {
 public:
  virtual ~ProtectionDomain() = default;
  virtual Result<MemoryRegion> registerMemory(void* addr, size_t length, uint32_t access) = 0;
  virtual Status deregisterMemory(const MemoryRegion& mr) = 0;
  // An RC QP whose sends complete on `sendCq` and receives on `recvCq`.
  virtual Result<std::unique_ptr<QueuePair>> createRcQp(CompletionQueue& sendCq, CompletionQueue& recvCq,
                                                        const QpCapacity& capacity) = 0;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual const std::string& name() const = 0;
  virtual const PortAttributes& port() const = 0;
  virtual Result<std::unique_ptr<ProtectionDomain>> allocPd() = 0;
  // A CQ of at least `capacity` entries with its own completion channel.
  virtual Result<std::unique_ptr<CompletionQueue>> createCq(int capacity) = 0;
};

class Provider {
 public:
  virtual ~Provider() = default;
  // "" if a device with an active port exists, else why not, e.g. "no RDMA
  // device (ibv_get_device_list: Function not implemented)". Cheap enough
  // for canConnect (the caller caches it).
  virtual std::string probe() = 0;
  // "" if this backend can register GPU (cudaMalloc) memory for RDMA
  // (GPUDirect RDMA: libibverbs needs nvidia-peermem, gdr_probe.h), else why not.
  virtual std::string probeDeviceMemory() = 0;
  // Opens the first device with an active port (kSystemError saying why not).
  virtual Result<std::unique_ptr<Device>> openDevice() = 0;
};

}  // namespace loom::transport::verbs
