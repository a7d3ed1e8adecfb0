#include "transports/ucx/ucx_worker.h"

#include <cstdlib>

#include "common/format.h"

namespace loom::transport::ucx {
namespace {

constexpr const char* kKeepaliveInterval = "1s";

// ucp_config_t owner.
struct ConfigRelease {
  void operator()(ucp_config_t* c) const { ucp_config_release(c); }
};

}  // namespace

std::string ucxStatusText(ucs_status_t status) {
  // ucs_status_string gives the words; the enum name is what UCX's own logs print.
  const char* name = "UCS_ERR_?";
  switch (status) {
    case UCS_OK: name = "UCS_OK"; break;
    case UCS_ERR_CONNECTION_RESET: name = "UCS_ERR_CONNECTION_RESET"; break;
    case UCS_ERR_ENDPOINT_TIMEOUT: name = "UCS_ERR_ENDPOINT_TIMEOUT"; break;
    case UCS_ERR_UNREACHABLE: name = "UCS_ERR_UNREACHABLE"; break;
    case UCS_ERR_CANCELED: name = "UCS_ERR_CANCELED"; break;
    case UCS_ERR_MESSAGE_TRUNCATED: name = "UCS_ERR_MESSAGE_TRUNCATED"; break;
    case UCS_ERR_NO_DEVICE: name = "UCS_ERR_NO_DEVICE"; break;
    case UCS_ERR_NO_MEMORY: name = "UCS_ERR_NO_MEMORY"; break;
    case UCS_ERR_IO_ERROR: name = "UCS_ERR_IO_ERROR"; break;
    case UCS_ERR_REJECTED: name = "UCS_ERR_REJECTED"; break;
    case UCS_ERR_TIMED_OUT: name = "UCS_ERR_TIMED_OUT"; break;
    case UCS_ERR_UNSUPPORTED: name = "UCS_ERR_UNSUPPORTED"; break;
    case UCS_ERR_INVALID_PARAM: name = "UCS_ERR_INVALID_PARAM"; break;
    default: break;
  }
  return strprintf("%s (%s)", ucs_status_string(status), name);
}

Result<std::unique_ptr<UcxWorker>> UcxWorker::open(size_t estimatedPeers, int rank) {
  std::unique_ptr<UcxWorker> w(new UcxWorker());
  ucp_config_t* raw = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &raw);
  LOOM_ENFORCE(st == UCS_OK, Code::kSystemError, "ucx: reading the UCX configuration (UCX_* variables) on rank %d: %s",
               rank, ucxStatusText(st).c_str());
  std::unique_ptr<ucp_config_t, ConfigRelease> config(raw);
  if (!std::getenv("UCX_KEEPALIVE_INTERVAL")) (void)ucp_config_modify(config.get(), "KEEPALIVE_INTERVAL", kKeepaliveInterval);
  // No registration cache: creating it installs libucm's mmap hooks, and
  // UCX 1.13's install deadlocked in ucm_event_enter_exclusive in about one
  // rank start of four on this machine (two forked ranks creating contexts at
  // once). Loom registers nothing long-lived; UCX_RCACHE_ENABLE overrides.
  if (!std::getenv("UCX_RCACHE_ENABLE")) (void)ucp_config_modify(config.get(), "RCACHE_ENABLE", "n");

  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 0;
  params.estimated_num_eps = estimatedPeers == 0 ? 1 : estimatedPeers;
  st = ucp_init(&params, config.get(), &w->context_);
  LOOM_ENFORCE(st == UCS_OK, Code::kSystemError,
               "ucx: ucp_init failed on rank %d: %s (check UCX_TLS and UCX_NET_DEVICES)", rank,
               ucxStatusText(st).c_str());

  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  st = ucp_worker_create(w->context_, &wp, &w->worker_);
  LOOM_ENFORCE(st == UCS_OK, Code::kSystemError, "ucx: ucp_worker_create failed on rank %d: %s", rank,
               ucxStatusText(st).c_str());

  st = ucp_worker_get_efd(w->worker_, &w->eventFd_);
  LOOM_ENFORCE(st == UCS_OK, Code::kSystemError, "ucx: ucp_worker_get_efd failed on rank %d: %s", rank,
               ucxStatusText(st).c_str());

  ucp_address_t* addr = nullptr;
  size_t len = 0;
  st = ucp_worker_get_address(w->worker_, &addr, &len);
  LOOM_ENFORCE(st == UCS_OK, Code::kSystemError, "ucx: ucp_worker_get_address failed on rank %d: %s", rank,
               ucxStatusText(st).c_str());
  const auto* bytes = reinterpret_cast<const uint8_t*>(addr);
  w->address_.assign(bytes, bytes + len);
  ucp_worker_release_address(w->worker_, addr);
  return w;
}

UcxWorker::~UcxWorker() {
  if (worker_) ucp_worker_destroy(worker_);  // the event fd belongs to the worker
  if (context_) ucp_cleanup(context_);
}

}  // namespace loom::transport::ucx
