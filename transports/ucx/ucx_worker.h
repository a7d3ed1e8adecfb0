// One UCP context and worker (what a communicator's UCX transport owns), and
// UCX status codes in Loom's terms.
//
// The context asks for tag matching (the chunk FIFO, ucx_tags.h) and wakeup
// (the progress thread sleeps on the worker's event fd). The worker runs in
// serialized mode: the connecting thread, then the progress thread, then the
// destroying thread use it, never two at once.
//
// UCX reads its own settings (UCX_TLS, UCX_NET_DEVICES, ...) from the
// environment. One default differs from UCX's: unless UCX_KEEPALIVE_INTERVAL
// is set, keepalive runs every second instead of every 20, so a peer that
// dies on a transport which cannot notice by itself (shared memory) fails
// the survivors' waits within about a second.
#pragma once

#include <ucp/api/ucp.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace loom::transport::ucx {

// "Connection reset by remote peer (UCS_ERR_CONNECTION_RESET)".
std::string ucxStatusText(ucs_status_t status);

class UcxWorker {
 public:
  // `estimatedPeers` sizes UCX's endpoint tables.
  static Result<std::unique_ptr<UcxWorker>> open(size_t estimatedPeers, int rank);
  ~UcxWorker();
  UcxWorker(const UcxWorker&) = delete;
  UcxWorker& operator=(const UcxWorker&) = delete;

  ucp_worker_h worker() const { return worker_; }
  // The worker's address (opaque bytes another worker creates an endpoint from).
  const std::vector<uint8_t>& address() const { return address_; }
  // The fd that becomes readable on worker events once ucp_worker_arm() succeeded.
  int eventFd() const { return eventFd_; }

 private:
  UcxWorker() = default;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  std::vector<uint8_t> address_;
  int eventFd_ = -1;
};

}  // namespace loom::transport::ucx
