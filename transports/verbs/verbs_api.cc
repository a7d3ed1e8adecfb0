#include "transports/verbs/verbs_api.h"

namespace loom::transport::verbs {

const char* qpStateName(QpState state) {
  switch (state) {
    case QpState::kReset: return "RESET";
    case QpState::kInit: return "INIT";
    case QpState::kRtr: return "RTR";
    case QpState::kRts: return "RTS";
    case QpState::kError: return "ERR";
  }
  return "?";
}

const char* wcStatusName(WcStatus status) {
  switch (status) {
    case WcStatus::kSuccess: return "success";
    case WcStatus::kLocalLengthError: return "local length error (IBV_WC_LOC_LEN_ERR)";
    case WcStatus::kLocalProtectionError: return "local protection error (IBV_WC_LOC_PROT_ERR)";
    case WcStatus::kWrFlushError: return "work request flushed, queue pair in error (IBV_WC_WR_FLUSH_ERR)";
    case WcStatus::kRemoteAccessError: return "remote access error (IBV_WC_REM_ACCESS_ERR)";
    case WcStatus::kRemoteInvalidRequest: return "remote invalid request (IBV_WC_REM_INV_REQ_ERR)";
    case WcStatus::kRemoteOperationError: return "remote operation error (IBV_WC_REM_OP_ERR)";
    case WcStatus::kRetryExceeded:
      return "transport retry counter exceeded (IBV_WC_RETRY_EXC_ERR): peer process gone, its queue pair in "
             "error, or the link is down";
    case WcStatus::kRnrRetryExceeded: return "receiver not ready, retries exceeded (IBV_WC_RNR_RETRY_EXC_ERR)";
    case WcStatus::kOther: return "other completion error";
  }
  return "?";
}

}  // namespace loom::transport::verbs
