#include "transports/verbs/ibv_provider.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <infiniband/verbs.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/config.h"
#include "common/format.h"
#include "transports/verbs/hca_filter.h"
#include "transports/verbs/gdr_probe.h"

namespace loom::transport::verbs {
namespace {

Status verbsError(int err, const char* call, const std::string& what) {
  return makeError(Code::kSystemError, "%s: %s (%s)", call, std::strerror(err), what.c_str());
}

WcStatus convertStatus(ibv_wc_status s) {
  switch (s) {
    case IBV_WC_SUCCESS: return WcStatus::kSuccess;
    case IBV_WC_LOC_LEN_ERR: return WcStatus::kLocalLengthError;
    case IBV_WC_LOC_PROT_ERR: return WcStatus::kLocalProtectionError;
    case IBV_WC_WR_FLUSH_ERR: return WcStatus::kWrFlushError;
    case IBV_WC_REM_ACCESS_ERR: return WcStatus::kRemoteAccessError;
    case IBV_WC_REM_INV_REQ_ERR: return WcStatus::kRemoteInvalidRequest;
    case IBV_WC_REM_OP_ERR: return WcStatus::kRemoteOperationError;
    case IBV_WC_RETRY_EXC_ERR: return WcStatus::kRetryExceeded;
    case IBV_WC_RNR_RETRY_EXC_ERR: return WcStatus::kRnrRetryExceeded;
    default: return WcStatus::kOther;
  }
}

int accessFlags(uint32_t access) {
  int flags = 0;
  if (access & kAccessLocalWrite) flags |= IBV_ACCESS_LOCAL_WRITE;
  if (access & kAccessRemoteWrite) flags |= IBV_ACCESS_REMOTE_WRITE;
  if (access & kAccessRemoteRead) flags |= IBV_ACCESS_REMOTE_READ;
  return flags;
}

class IbvCq final : public CompletionQueue {
 public:
  IbvCq(ibv_comp_channel* channel, ibv_cq* cq) : channel_(channel), cq_(cq) {}
  ~IbvCq() override {
    drainEvents();
    if (unacked_) ibv_ack_cq_events(cq_, unacked_);
    ibv_destroy_cq(cq_);
    ibv_destroy_comp_channel(channel_);
  }
  Result<int> poll(WorkCompletion* out, int max) override {
    ibv_wc wc[32];
    int n = ibv_poll_cq(cq_, max < 32 ? max : 32, wc);
    if (n < 0) return makeError(Code::kSystemError, "ibv_poll_cq failed (%d): completion queue in error (overrun?)", n);
    for (int i = 0; i < n; ++i) {
      WorkCompletion& w = out[i];
      w = WorkCompletion{};
      w.wrId = wc[i].wr_id;
      w.status = convertStatus(wc[i].status);
      w.vendorStatus = static_cast<int>(wc[i].status);
      w.qpNum = wc[i].qp_num;
      if (wc[i].status == IBV_WC_SUCCESS) {
        w.opcode = wc[i].opcode == IBV_WC_RDMA_WRITE       ? WcOpcode::kRdmaWrite
                   : wc[i].opcode == IBV_WC_RECV_RDMA_WITH_IMM ? WcOpcode::kRecvRdmaWithImm
                                                              : WcOpcode::kOther;
        w.byteLen = wc[i].byte_len;
        w.withImm = (wc[i].wc_flags & IBV_WC_WITH_IMM) != 0;
        if (w.withImm) w.imm = ntohl(wc[i].imm_data);
      }
    }
    return n;
  }
  Status armNotify() override {
    int rc = ibv_req_notify_cq(cq_, 0);
    return rc == 0 ? Status::ok() : verbsError(rc, "ibv_req_notify_cq", "arming the completion channel");
  }
  int eventFd() const override { return channel_->fd; }
  ibv_cq* raw() const { return cq_; }
  void drainEvents() override {
    ibv_cq* cq = nullptr;
    void* context = nullptr;
    while (ibv_get_cq_event(channel_, &cq, &context) == 0) ++unacked_;  // the fd is non-blocking
    // Acknowledging takes a mutex inside libibverbs: batch it.
    if (unacked_ >= 64) {
      ibv_ack_cq_events(cq_, unacked_);
      unacked_ = 0;
    }
  }

 private:
  ibv_comp_channel* channel_;
  ibv_cq* cq_;
  unsigned unacked_ = 0;
};

class IbvQp final : public QueuePair {
 public:
  explicit IbvQp(ibv_qp* qp) : qp_(qp) {}
  ~IbvQp() override { ibv_destroy_qp(qp_); }
  uint32_t qpn() const override { return qp_->qp_num; }
  QpState state() const override {
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    if (ibv_query_qp(qp_, &attr, IBV_QP_STATE, &init) != 0) return QpState::kError;
    switch (attr.qp_state) {
      case IBV_QPS_RESET: return QpState::kReset;
      case IBV_QPS_INIT: return QpState::kInit;
      case IBV_QPS_RTR: return QpState::kRtr;
      case IBV_QPS_RTS: return QpState::kRts;
      default: return QpState::kError;
    }
  }
  Status toInit(uint8_t portNum, uint32_t access) override {
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_INIT;
    attr.pkey_index = 0;
    attr.port_num = portNum;
    attr.qp_access_flags = accessFlags(access);
    return modify(attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, "INIT");
  }
  Status toRtr(const PortAttributes& local, const RemoteQp& remote) override {
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_RTR;
    attr.path_mtu = static_cast<ibv_mtu>(remote.mtu);
    attr.dest_qp_num = remote.qpn;
    attr.rq_psn = remote.psn;
    attr.max_dest_rd_atomic = 1;
    attr.min_rnr_timer = 12;  // 0.64 ms
    attr.ah_attr.port_num = local.portNum;
    attr.ah_attr.sl = 0;
    if (remote.useGid) {
      attr.ah_attr.is_global = 1;
      std::memcpy(attr.ah_attr.grh.dgid.raw, remote.gid.data(), 16);
      attr.ah_attr.grh.sgid_index = static_cast<uint8_t>(local.gidIndex);
      attr.ah_attr.grh.hop_limit = 255;
    } else {
      attr.ah_attr.dlid = remote.lid;
    }
    return modify(attr,
                  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
                  "RTR");
  }
  Status toRts(uint32_t localPsn) override {
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_RTS;
    attr.timeout = 14;   // 4.096 us x 2^14 = 67 ms per try
    attr.retry_cnt = 7;  // so a dead peer is noticed in about half a second
    attr.rnr_retry = 7;  // infinite: the credits already keep a receive posted
    attr.sq_psn = localPsn;
    attr.max_rd_atomic = 1;
    return modify(attr,
                  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                      IBV_QP_MAX_QP_RD_ATOMIC,
                  "RTS");
  }
  Status toError() override {
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_ERR;
    return modify(attr, IBV_QP_STATE, "ERR");
  }
  Status postWrite(const RdmaWrite& wr) override {
    ibv_sge sge{};
    sge.addr = reinterpret_cast<uint64_t>(wr.localAddr);
    sge.length = wr.length;
    sge.lkey = wr.lkey;
    ibv_send_wr w{};
    w.wr_id = wr.wrId;
    w.sg_list = wr.length ? &sge : nullptr;
    w.num_sge = wr.length ? 1 : 0;
    w.opcode = wr.withImm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
    w.send_flags = IBV_SEND_SIGNALED;
    if (wr.withImm) w.imm_data = htonl(wr.imm);
    w.wr.rdma.remote_addr = wr.remoteAddr;
    w.wr.rdma.rkey = wr.rkey;
    ibv_send_wr* bad = nullptr;
    int rc = ibv_post_send(qp_, &w, &bad);
    return rc == 0 ? Status::ok() : verbsError(rc, "ibv_post_send", strprintf("QP %u", qp_->qp_num));
  }
  Status postRecv(uint64_t wrId) override {
    ibv_recv_wr w{};
    w.wr_id = wrId;
    w.num_sge = 0;
    ibv_recv_wr* bad = nullptr;
    int rc = ibv_post_recv(qp_, &w, &bad);
    return rc == 0 ? Status::ok() : verbsError(rc, "ibv_post_recv", strprintf("QP %u", qp_->qp_num));
  }

 private:
  Status modify(ibv_qp_attr& attr, int mask, const char* to) {
    int rc = ibv_modify_qp(qp_, &attr, mask);
    return rc == 0 ? Status::ok() : verbsError(rc, "ibv_modify_qp", strprintf("QP %u to %s", qp_->qp_num, to));
  }
  ibv_qp* qp_;
};

class IbvPd final : public ProtectionDomain {
 public:
  explicit IbvPd(ibv_pd* pd) : pd_(pd) {}
  ~IbvPd() override { ibv_dealloc_pd(pd_); }
  Result<MemoryRegion> registerMemory(void* addr, size_t length, uint32_t access) override {
    ibv_mr* mr = ibv_reg_mr(pd_, addr, length, accessFlags(access));
    if (!mr) return verbsError(errno, "ibv_reg_mr", strprintf("%zu bytes at %p", length, addr));
    MemoryRegion out;
    out.addr = addr;
    out.length = length;
    out.lkey = mr->lkey;
    out.rkey = mr->rkey;
    out.access = access;
    out.handle = mr;
    return out;
  }
  Status deregisterMemory(const MemoryRegion& mr) override {
    int rc = ibv_dereg_mr(static_cast<ibv_mr*>(mr.handle));
    return rc == 0 ? Status::ok() : verbsError(rc, "ibv_dereg_mr", strprintf("lkey 0x%x", mr.lkey));
  }
  Result<std::unique_ptr<QueuePair>> createRcQp(CompletionQueue& sendCq, CompletionQueue& recvCq,
                                                const QpCapacity& capacity) override;

 private:
  ibv_pd* pd_;
};

class IbvDevice final : public Device {
 public:
  IbvDevice(ibv_context* ctx, std::string name, PortAttributes port)
      : ctx_(ctx), name_(std::move(name)), port_(port) {}
  ~IbvDevice() override { ibv_close_device(ctx_); }
  const std::string& name() const override { return name_; }
  const PortAttributes& port() const override { return port_; }
  Result<std::unique_ptr<ProtectionDomain>> allocPd() override {
    ibv_pd* pd = ibv_alloc_pd(ctx_);
    if (!pd) return verbsError(errno, "ibv_alloc_pd", name_);
    return std::unique_ptr<ProtectionDomain>(std::make_unique<IbvPd>(pd));
  }
  Result<std::unique_ptr<CompletionQueue>> createCq(int capacity) override {
    ibv_comp_channel* channel = ibv_create_comp_channel(ctx_);
    if (!channel) return verbsError(errno, "ibv_create_comp_channel", name_);
    int flags = fcntl(channel->fd, F_GETFL);
    if (flags < 0 || fcntl(channel->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
      int err = errno;
      ibv_destroy_comp_channel(channel);
      return verbsError(err, "fcntl(O_NONBLOCK) on the completion channel", name_);
    }
    ibv_cq* cq = ibv_create_cq(ctx_, capacity, nullptr, channel, 0);
    if (!cq) {
      int err = errno;
      ibv_destroy_comp_channel(channel);
      return verbsError(err, "ibv_create_cq", strprintf("%s, %d entries", name_.c_str(), capacity));
    }
    return std::unique_ptr<CompletionQueue>(std::make_unique<IbvCq>(channel, cq));
  }

 private:
  ibv_context* ctx_;
  std::string name_;
  PortAttributes port_;
};

// Picks the GID index of a RoCE port: RoCE v2 with an IPv4-mapped address if any.
int pickGidIndex(ibv_context* ctx, uint8_t port, int tableLen) {
  for (int i = 0; i < tableLen; ++i) {
    ibv_gid_entry entry{};
    if (ibv_query_gid_ex(ctx, port, static_cast<uint32_t>(i), &entry, 0) != 0) continue;
    const uint8_t* g = entry.gid.raw;
    bool v4mapped = std::all_of(g, g + 10, [](uint8_t b) { return b == 0; }) && g[10] == 0xff && g[11] == 0xff;
    if (entry.gid_type == IBV_GID_TYPE_ROCE_V2 && v4mapped) return i;
  }
  return 0;
}

// Finds the first device with an active port that LOOM_IB_HCA allows. With
// `out` it stays open and is returned there; without, it is closed again (a probe).
Status findDevice(std::unique_ptr<Device>* out) {
  const char* spec = readKnob("LOOM_IB_HCA");
  auto filter = HcaFilter::parse(spec ? spec : "");
  LOOM_TRY(filter.status());
  int count = 0;
  errno = 0;
  ibv_device** list = ibv_get_device_list(&count);
  if (!list) {
    int err = errno ? errno : ENODEV;
    return makeError(Code::kSystemError, "no RDMA device (ibv_get_device_list: %s)", std::strerror(err));
  }
  std::string tried;
  bool found = false;
  for (int d = 0; d < count && !found; ++d) {
    const char* name = ibv_get_device_name(list[d]);
    ibv_context* ctx = ibv_open_device(list[d]);
    if (!ctx) {
      tried += strprintf("%s%s: ibv_open_device: %s", tried.empty() ? "" : "; ", name, std::strerror(errno));
      continue;
    }
    ibv_device_attr dev{};
    if (ibv_query_device(ctx, &dev) == 0) {
      for (uint8_t p = 1; p <= dev.phys_port_cnt && !found; ++p) {
        ibv_port_attr attr{};
        if (ibv_query_port(ctx, p, &attr) != 0) continue;
        if (!filter.value().allows(name, p)) {
          tried += strprintf("%s%s port %u: not in LOOM_IB_HCA=%s", tried.empty() ? "" : "; ", name, p,
                             filter.value().spec().c_str());
          continue;
        }
        if (attr.state != IBV_PORT_ACTIVE) {
          tried += strprintf("%s%s port %u: %s", tried.empty() ? "" : "; ", name, p, ibv_port_state_str(attr.state));
          continue;
        }
        found = true;
        if (!out) break;
        PortAttributes port;
        port.portNum = p;
        port.lid = attr.lid;
        port.activeMtu = attr.active_mtu;
        port.ethernet = attr.link_layer == IBV_LINK_LAYER_ETHERNET;
        port.gidIndex = port.ethernet ? pickGidIndex(ctx, p, attr.gid_tbl_len) : 0;
        ibv_gid gid{};
        if (ibv_query_gid(ctx, p, port.gidIndex, &gid) == 0) std::memcpy(port.gid.data(), gid.raw, 16);
        *out = std::make_unique<IbvDevice>(ctx, name, port);
        ctx = nullptr;  // owned by the device now
      }
    }
    if (ctx) ibv_close_device(ctx);
  }
  ibv_free_device_list(list);
  if (found) return Status::ok();
  if (count == 0) return makeError(Code::kSystemError, "no RDMA device (ibv_get_device_list found none)");
  return makeError(Code::kSystemError, "no RDMA device with an active port (%s)", tried.c_str());
}

class IbvProvider final : public Provider {
 public:
  std::string probe() override {
    Status s = findDevice(nullptr);
    return s.isOk() ? "" : s.message();
  }
  std::string probeDeviceMemory() override { return peerMemoryReason(readPeerMemFacts("/sys")); }
  Result<std::unique_ptr<Device>> openDevice() override {
    std::unique_ptr<Device> device;
    LOOM_TRY(findDevice(&device));
    return device;
  }
};

Result<std::unique_ptr<QueuePair>> IbvPd::createRcQp(CompletionQueue& sendCq, CompletionQueue& recvCq,
                                                     const QpCapacity& capacity) {
  ibv_qp_init_attr init{};
  auto* s = dynamic_cast<IbvCq*>(&sendCq);
  auto* r = dynamic_cast<IbvCq*>(&recvCq);
  if (!s || !r) return makeError(Code::kInternalError, "verbs: CQ of another backend");
  init.send_cq = s->raw();
  init.recv_cq = r->raw();
  init.qp_type = IBV_QPT_RC;
  init.sq_sig_all = 0;
  init.cap.max_send_wr = static_cast<uint32_t>(capacity.maxSendWr);
  init.cap.max_recv_wr = static_cast<uint32_t>(capacity.maxRecvWr);
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  ibv_qp* qp = ibv_create_qp(pd_, &init);
  if (!qp) return verbsError(errno, "ibv_create_qp", "RC");
  return std::unique_ptr<QueuePair>(std::make_unique<IbvQp>(qp));
}

}  // namespace

std::shared_ptr<Provider> ibvProvider() { return std::make_shared<IbvProvider>(); }

}  // namespace loom::transport::verbs
