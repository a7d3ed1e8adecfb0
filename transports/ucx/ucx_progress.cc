#include "transports/ucx/ucx_progress.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include <ucs/config/global_opts.h>

#include "common/format.h"
#include "transports/ucx/ucx_tags.h"

namespace loom::transport::ucx {
namespace {

void onSendDone(void* request, ucs_status_t status, void* user) {
  auto* op = static_cast<PendingOp*>(user);
  ucp_request_free(request);
  op->request = nullptr;
  op->engine->completed(*op, status);
}

void onRecvDone(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info, void* user) {
  auto* op = static_cast<PendingOp*>(user);
  if (info) op->info = *info;
  ucp_request_free(request);
  op->request = nullptr;
  op->engine->completed(*op, status);
}

void onEndpointError(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* link = static_cast<PeerLink*>(arg);
  link->engine->endpointFailed(*link, status);
}

// ucp_ep_create that keeps UCX from logging an ERROR when no transport to
// the peer handles peer failure (we fall back then): UCX's log level is
// process-wide, so the change is made under a lock and undone at once,
// and not at all when the user set UCX_LOG_LEVEL.
ucs_status_t createQuietly(ucp_worker_h worker, const ucp_ep_params_t& params, ucp_ep_h* ep) {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  char previous[64] = {};
  const bool quiet = !std::getenv("UCX_LOG_LEVEL") &&
                     ucs_global_opts_get_value("LOG_LEVEL", previous, sizeof previous) == UCS_OK &&
                     ucs_global_opts_set_value("LOG_LEVEL", "fatal") == UCS_OK;
  ucs_status_t st = ucp_ep_create(worker, &params, ep);
  if (quiet) (void)ucs_global_opts_set_value("LOG_LEVEL", previous);
  return st;
}

const char* opName(OpKind kind) {
  switch (kind) {
    case OpKind::kDataSend: return "sending a chunk";
    case OpKind::kDataRecv: return "receiving a chunk";
    case OpKind::kCreditSend: return "sending credit";
    case OpKind::kCreditRecv: return "receiving credit";
    case OpKind::kHelloSend: return "sending the hello";
    case OpKind::kHelloRecv: return "receiving the hello";
    case OpKind::kGoodbyeSend: return "sending the goodbye";
    case OpKind::kGoodbyeRecv: return "receiving the goodbye";
  }
  return "?";
}

}  // namespace

PeerLink::PeerLink(int selfRank, int peerRank, std::string peerHost, size_t chunkBytes, int slots,
                   ProgressEngine* engine_)
    : engine(engine_),
      state(selfRank, peerRank, std::move(peerHost)),
      send(chunkBytes, slots, &state, engine_),
      recv(chunkBytes, slots, &state, engine_),
      creditLimit(static_cast<uint64_t>(slots)),
      sendOps(static_cast<size_t>(slots)),
      recvOps(static_cast<size_t>(slots)) {
  auto init = [&](PendingOp& op, OpKind kind) {
    op.link = this;
    op.engine = engine;
    op.kind = kind;
  };
  for (auto& op : sendOps) init(op, OpKind::kDataSend);
  for (auto& op : recvOps) init(op, OpKind::kDataRecv);
  init(creditSend, OpKind::kCreditSend);
  init(creditRecv, OpKind::kCreditRecv);
  init(helloSend, OpKind::kHelloSend);
  init(helloRecv, OpKind::kHelloRecv);
  init(goodbyeSend, OpKind::kGoodbyeSend);
  init(goodbyeRecv, OpKind::kGoodbyeRecv);
}

ProgressEngine::ProgressEngine(UcxWorker* worker, int selfRank) : worker_(worker), selfRank_(selfRank) {}

ProgressEngine::~ProgressEngine() {
  stop();
  for (PeerLink* link : links_)
    if (link->pidFd >= 0) ::close(link->pidFd);
  if (epollFd_ >= 0) ::close(epollFd_);
  if (eventFd_ >= 0) ::close(eventFd_);
}

Status ProgressEngine::createEndpoint(PeerLink& link, const std::vector<uint8_t>& peerAddress, int peerPid) {
  links_.push_back(&link);
  link.peerPid = peerPid;
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address = reinterpret_cast<const ucp_address_t*>(peerAddress.data());
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = &onEndpointError;
  params.err_handler.arg = &link;
  ucs_status_t st = createQuietly(worker_->worker(), params, &link.ep);
  if (st == UCS_ERR_UNREACHABLE) {
    // Only transports without peer failure handling reach this peer (both
    // sides of the pair see the same transports, so both fall back).
    params.err_mode = UCP_ERR_HANDLING_MODE_NONE;
    st = ucp_ep_create(worker_->worker(), &params, &link.ep);
    link.peerErrorHandling = false;
  }
  LOOM_ENFORCE(st == UCS_OK, Code::kSystemError,
               "ucx: creating the endpoint from rank %d to rank %d (host %s) failed: %s (no common transport? "
               "check UCX_TLS and UCX_NET_DEVICES on both)",
               selfRank_, link.state.peerRank(), link.state.peerHost().c_str(), ucxStatusText(st).c_str());
  if (!link.peerErrorHandling && peerPid > 0 && peerPid != ::getpid()) {
    link.pidFd = static_cast<int>(::syscall(SYS_pidfd_open, peerPid, 0));
    LOOM_ENFORCE(link.pidFd >= 0 || errno != ESRCH, Code::kRemoteError,
                 "ucx: rank %d (host %s, pid %d) is gone before rank %d connected to it", link.state.peerRank(),
                 link.state.peerHost().c_str(), peerPid, selfRank_);
  }
  return Status::ok();
}

void ProgressEngine::checkWatchedPeers() {
  for (PeerLink* link : links_) {
    if (link->pidFd < 0 || link->state.failed()) continue;
    pollfd pfd{link->pidFd, POLLIN, 0};
    if (::poll(&pfd, 1, 0) <= 0) continue;
    epoll_ctl(epollFd_, EPOLL_CTL_DEL, link->pidFd, nullptr);  // stays readable: never wake on it again
    drainWorker();  // a goodbye sent just before a clean exit is handled first
    if (link->state.failed()) continue;
    link->state.fail(makeError(Code::kRemoteError,
                               "ucx: rank %d (host %s, pid %d) died: its process exited without closing its "
                               "connection to rank %d (killed or crashed)",
                               link->state.peerRank(), link->state.peerHost().c_str(), link->peerPid, selfRank_));
  }
}

void ProgressEngine::postSend(PeerLink& link, PendingOp& op, const void* buffer, size_t bytes, uint64_t tag) {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.send = &onSendDone;
  param.user_data = &op;
  op.done = false;
  ucs_status_ptr_t req = ucp_tag_send_nbx(link.ep, buffer, bytes, tag, &param);
  if (req == nullptr) {
    completed(op, UCS_OK);
  } else if (UCS_PTR_IS_ERR(req)) {
    completed(op, UCS_PTR_STATUS(req));
  } else {
    op.request = req;
  }
}

void ProgressEngine::postRecv(PeerLink& link, PendingOp& op, void* buffer, size_t bytes, uint64_t tag) {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_RECV_INFO;
  param.cb.recv = &onRecvDone;
  param.user_data = &op;
  param.recv_info.tag_info = &op.info;
  op.done = false;
  ucs_status_ptr_t req = ucp_tag_recv_nbx(worker_->worker(), buffer, bytes, tag, kTagMatchAll, &param);
  if (req == nullptr) {
    completed(op, UCS_OK);  // matched a message that had already arrived; op.info is filled
  } else if (UCS_PTR_IS_ERR(req)) {
    completed(op, UCS_PTR_STATUS(req));
  } else {
    op.request = req;
  }
}

void ProgressEngine::failLink(PeerLink& link, ucs_status_t status, const char* during) {
  if (link.state.failed()) return;
  link.state.fail(makeError(Code::kRemoteError,
                            "ucx: connection between rank %d and rank %d (host %s) failed while %s: %s",
                            selfRank_, link.state.peerRank(), link.state.peerHost().c_str(), during,
                            ucxStatusText(status).c_str()));
}

void ProgressEngine::endpointFailed(PeerLink& link, ucs_status_t status) {
  link.epFailed = true;
  if (link.state.failed()) return;  // includes a peer that said goodbye first
  link.state.fail(makeError(Code::kRemoteError,
                            "ucx: connection between rank %d and rank %d (host %s) failed: %s (peer process "
                            "exited or was killed, or the network failed)",
                            selfRank_, link.state.peerRank(), link.state.peerHost().c_str(),
                            ucxStatusText(status).c_str()));
}

void ProgressEngine::completed(PendingOp& op, ucs_status_t status) {
  PeerLink& link = *op.link;
  op.done = true;
  op.status = status;
  if (status != UCS_OK) {
    if (!(closing_ && status == UCS_ERR_CANCELED)) failLink(link, status, opName(op.kind));
    return;
  }
  switch (op.kind) {
    case OpKind::kDataSend:
      link.send.markSent(op.seq);
      break;
    case OpKind::kDataRecv:
      if (op.info.length > link.recv.chunkBytes()) {
        failLink(link, UCS_ERR_MESSAGE_TRUNCATED, "receiving an oversized chunk");
        break;
      }
      link.recv.markArrived(op.seq, static_cast<uint32_t>(op.info.length));
      break;
    case OpKind::kCreditRecv:
      link.creditLimit = std::max(link.creditLimit, link.creditIn + link.send.slots());
      break;  // pump() posts the next credit receive
    case OpKind::kGoodbyeRecv: {
      link.goodbyeIn.cause[sizeof link.goodbyeIn.cause - 1] = '\0';
      const std::string cause = link.goodbyeIn.cause;
      if (cause.empty())
        link.state.fail(makeError(Code::kRemoteError,
                                  "ucx: rank %d (host %s) closed its connection to rank %d (communicator destroyed)",
                                  link.state.peerRank(), link.state.peerHost().c_str(), selfRank_),
                        /*clean=*/true);
      else  // it gave up because of another rank's failure: pass that on
        link.state.fail(makeError(Code::kRemoteError, "%s (reported by rank %d (host %s), which then closed)",
                                  cause.c_str(), link.state.peerRank(), link.state.peerHost().c_str()));
      break;
    }
    case OpKind::kCreditSend:
    case OpKind::kHelloSend:
    case OpKind::kHelloRecv:
    case OpKind::kGoodbyeSend:
      break;
  }
}

Status ProgressEngine::exchangeHellos(const std::vector<PeerLink*>& links, const WaitContext& wait) {
  for (PeerLink* link : links) {
    postRecv(*link, link->helloRecv, &link->helloIn, sizeof(Hello), makeTag(TagKind::kHello, link->state.peerRank()));
    postSend(*link, link->helloSend, &link->helloOut, sizeof(Hello), makeTag(TagKind::kHello, selfRank_));
  }
  auto ready = [&] {
    while (ucp_worker_progress(worker_->worker()) != 0) {
    }
    return std::all_of(links.begin(), links.end(), [](PeerLink* l) {
      return (l->helloSend.done && l->helloRecv.done) || l->state.failed();
    });
  };
  auto what = [&] {
    std::string missing;
    for (PeerLink* l : links)
      if (!l->helloRecv.done) missing += (missing.empty() ? "" : ", ") + std::to_string(l->state.peerRank());
    return strprintf("the ucx hello of rank(s) %s on rank %d", missing.c_str(), selfRank_);
  };
  // No signal: the last phase polls every millisecond, which drives progress.
  Status s = waitUntil(ready, nullptr, wait, what);
  for (PeerLink* l : links)
    if (l->state.failed()) return l->state.error();
  return s;
}

void ProgressEngine::postInitialReceives(const std::vector<PeerLink*>& links) {
  for (PeerLink* link : links) {
    postRecv(*link, link->goodbyeRecv, &link->goodbyeIn, sizeof(Goodbye),
             makeTag(TagKind::kGoodbye, link->state.peerRank()));
    pump(*link);
  }
}

bool ProgressEngine::pump(PeerLink& link) {
  if (link.state.failed()) return false;
  bool moved = false;
  const uint32_t slots = link.recv.slots();
  const int peer = link.state.peerRank();
  // A receive into every slot the executor gave back.
  const uint64_t tail = link.recv.released();
  while (link.nextRecv < tail + slots && !link.state.failed()) {
    const uint64_t seq = link.nextRecv++;
    PendingOp& op = link.recvOps[seq % slots];
    op.seq = seq;
    postRecv(link, op, link.recv.chunkData(seq), link.recv.chunkBytes(), makeTag(TagKind::kData, peer, seq));
    moved = true;
  }
  // Those releases become the sender's credit (one message in flight at a time).
  if (tail > link.creditGranted && !link.creditSend.request && !link.state.failed()) {
    link.creditOut = tail;
    link.creditGranted = tail;
    postSend(link, link.creditSend, &link.creditOut, sizeof link.creditOut, makeTag(TagKind::kCredit, selfRank_));
    moved = true;
  }
  if (!link.creditRecv.request && !link.state.failed()) {
    postRecv(link, link.creditRecv, &link.creditIn, sizeof link.creditIn, makeTag(TagKind::kCredit, peer));
    moved = true;
  }
  // Committed chunks the peer has a receive posted for.
  const uint64_t head = link.send.committed();
  while (link.nextSend < head && link.nextSend < link.creditLimit && !link.state.failed()) {
    const uint64_t seq = link.nextSend++;
    PendingOp& op = link.sendOps[seq % link.send.slots()];
    op.seq = seq;
    postSend(link, op, link.send.chunkData(seq), link.send.chunkBytesOf(seq), makeTag(TagKind::kData, selfRank_, seq));
    moved = true;
  }
  return moved;
}

bool ProgressEngine::hasWork(PeerLink& link) const {
  if (link.state.failed()) return false;
  const uint64_t tail = link.recv.released();
  return link.nextRecv < tail + link.recv.slots() || (tail > link.creditGranted && !link.creditSend.request) ||
         !link.creditRecv.request || (link.nextSend < link.send.committed() && link.nextSend < link.creditLimit);
}

bool ProgressEngine::drainWorker() {
  bool any = false;
  while (ucp_worker_progress(worker_->worker()) != 0) any = true;
  return any;
}

Status ProgressEngine::start(int spinMicros) {
  spinMicros_ = std::max(0, spinMicros);
  epollFd_ = epoll_create1(EPOLL_CLOEXEC);
  LOOM_ENFORCE(epollFd_ >= 0, Code::kSystemError, "ucx: epoll_create1 failed: %s", std::strerror(errno));
  eventFd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  LOOM_ENFORCE(eventFd_ >= 0, Code::kSystemError, "ucx: eventfd failed: %s", std::strerror(errno));
  for (int fd : {eventFd_, worker_->eventFd()}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    LOOM_ENFORCE(epoll_ctl(epollFd_, EPOLL_CTL_ADD, fd, &ev) == 0, Code::kSystemError,
                 "ucx: epoll_ctl failed: %s", std::strerror(errno));
  }
  for (PeerLink* link : links_) {
    if (link->pidFd < 0) continue;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = link->pidFd;
    LOOM_ENFORCE(epoll_ctl(epollFd_, EPOLL_CTL_ADD, link->pidFd, &ev) == 0, Code::kSystemError,
                 "ucx: epoll_ctl(pidfd of rank %d) failed: %s", link->state.peerRank(), std::strerror(errno));
  }
  thread_ = std::thread([this] { run(); });
  return Status::ok();
}

void ProgressEngine::stop() {
  if (!thread_.joinable()) return;
  stop_.store(true, std::memory_order_seq_cst);
  uint64_t one = 1;
  ssize_t n = ::write(eventFd_, &one, sizeof one);
  (void)n;
  thread_.join();
}

void ProgressEngine::wake() {
  // Only a sleeping thread needs the system call; the seq_cst pair (ring
  // counter store in commit/release, this load; sleeping_ store, then the
  // counters' load in run()) means one side always sees the other.
  if (!sleeping_.load(std::memory_order_seq_cst)) return;
  uint64_t one = 1;
  ssize_t n = ::write(eventFd_, &one, sizeof one);
  (void)n;
}

void ProgressEngine::run() {
  auto idleSince = Clock::now();
  epoll_event events[4];
  while (!stop_.load(std::memory_order_acquire)) {
    if (Clock::now() >= nextPeerCheck_) {
      checkWatchedPeers();
      nextPeerCheck_ = Clock::now() + std::chrono::milliseconds(5);
    }
    bool moved = false;
    for (PeerLink* link : links_) moved |= pump(*link);
    moved |= drainWorker();
    if (moved) {
      idleSince = Clock::now();
      continue;
    }
    if (Clock::now() - idleSince < std::chrono::microseconds(spinMicros_)) {
      cpuRelax();
      continue;
    }
    // Arm first: events from here on make the worker's fd readable.
    ucs_status_t armed = ucp_worker_arm(worker_->worker());
    if (armed == UCS_ERR_BUSY) continue;
    sleeping_.store(true, std::memory_order_seq_cst);
    bool work = stop_.load(std::memory_order_seq_cst);
    for (PeerLink* link : links_) work = work || hasWork(*link);
    if (!work) {
      // Without a working arm (never expected) poll every millisecond instead of sleeping long.
      const int timeoutMs = armed == UCS_OK ? 100 : 1;
      int n = epoll_wait(epollFd_, events, 4, timeoutMs);
      for (int i = 0; i < n; ++i) {
        if (events[i].data.fd == eventFd_) {
          uint64_t count;
          ssize_t r = ::read(eventFd_, &count, sizeof count);
          (void)r;
        } else if (events[i].data.fd != worker_->eventFd()) {
          nextPeerCheck_ = Clock::time_point{};  // a watched peer's process ended
        }
      }
    }
    sleeping_.store(false, std::memory_order_seq_cst);
    idleSince = Clock::now();
  }
}

template <class Done>
void ProgressEngine::progressUntil(Done&& done, double seconds) {
  const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  while (!done() && Clock::now() < end) {
    if (!drainWorker()) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

void ProgressEngine::shutdown(double seconds) {
  closing_ = true;
  // 1. Goodbye to every peer still connected, after everything committed.
  std::vector<PeerLink*> all = links_;
  std::string cause;
  for (PeerLink* link : all)
    if (cause.empty() && link->state.failedUncleanly()) cause = link->state.error().message();
  for (PeerLink* link : all) {
    if (!link->ep || link->state.failed()) continue;
    link->goodbyeOut.committed = link->send.committed();
    std::snprintf(link->goodbyeOut.cause, sizeof link->goodbyeOut.cause, "%s", cause.c_str());
    postSend(*link, link->goodbyeSend, &link->goodbyeOut, sizeof(Goodbye), makeTag(TagKind::kGoodbye, selfRank_));
  }
  progressUntil([&] { return std::all_of(all.begin(), all.end(), [](PeerLink* l) { return !l->goodbyeSend.request; }); },
                seconds / 3);
  // 2. Cancel every receive still posted; their callbacks run with UCS_ERR_CANCELED.
  auto forEachOp = [&](auto&& fn) {
    for (PeerLink* link : all) {
      for (auto& op : link->sendOps) fn(op);
      for (auto& op : link->recvOps) fn(op);
      for (PendingOp* op : {&link->creditSend, &link->creditRecv, &link->helloSend, &link->helloRecv,
                            &link->goodbyeSend, &link->goodbyeRecv})
        fn(*op);
    }
  };
  forEachOp([&](PendingOp& op) {
    if (op.request && (op.kind == OpKind::kDataRecv || op.kind == OpKind::kCreditRecv ||
                       op.kind == OpKind::kHelloRecv || op.kind == OpKind::kGoodbyeRecv))
      ucp_request_cancel(worker_->worker(), op.request);
  });
  bool pending = true;
  progressUntil([&] {
    pending = false;
    forEachOp([&](PendingOp& op) { pending = pending || (op.request && op.kind != OpKind::kDataSend &&
                                                          op.kind != OpKind::kCreditSend); });
    return !pending;
  }, seconds / 3);
  // 3. Close the endpoints: flushed if healthy, forced if UCX reported them broken.
  std::vector<void*> closing;
  for (PeerLink* link : all) {
    if (!link->ep) continue;
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = link->epFailed || link->state.failedUncleanly() ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    ucs_status_ptr_t req = ucp_ep_close_nbx(link->ep, &param);
    link->ep = nullptr;
    if (req && !UCS_PTR_IS_ERR(req)) closing.push_back(req);
  }
  progressUntil([&] {
    return std::all_of(closing.begin(), closing.end(),
                       [](void* r) { return ucp_request_check_status(r) != UCS_INPROGRESS; });
  }, seconds / 3);
  for (void* r : closing) ucp_request_free(r);
  // Requests still in flight (a send to a peer that stopped reading) die with
  // the worker; their callbacks must not touch the links any more.
  forEachOp([&](PendingOp& op) {
    if (op.request) ucp_request_free(op.request);  // released by UCX once it completes or the worker goes
    op.request = nullptr;
  });
}

}  // namespace loom::transport::ucx
