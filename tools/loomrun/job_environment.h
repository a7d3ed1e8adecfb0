// The environment loomrun gives each rank: the torchrun worker variables plus
// LOOM_JOB_SECRET, which the bootstrap (bootstrap/bootstrap.h) presents in
// every connection so that processes of other jobs cannot join this one.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "tools/loomrun/loomrun_options.h"

namespace loom::launcher {

inline constexpr const char* kSecretVariable = "LOOM_JOB_SECRET";
inline constexpr size_t kSecretHexDigits = 32;
// The attempt number under --max-restarts (0 first), as TORCHELASTIC_RESTART_COUNT.
inline constexpr const char* kRestartCountVariable = "LOOM_RESTART_COUNT";

// Values shared by every rank of the job (on this node and, for a multi-node
// job, on the others when they are given the same options and secret).
struct JobSettings {
  std::string masterAddr;
  int masterPort = 0;
  std::string secret;  // kSecretHexDigits hex digits
  std::string runId;   // TORCHELASTIC_RUN_ID
  int restartCount = 0;  // attempt number under --max-restarts, 0 first
  // --bind: the CPUs of each local rank (launcher/rank_binding.h); empty: unbound.
  std::vector<std::vector<int>> rankCpus;
  // --log-dir: DIR/<run id>_<random> (tools/loomrun/log_files.h); empty: no files.
  std::string logRunDir;
};

// Fills JobSettings from the options and the launcher's own environment
// (called again for every restart, so each attempt gets a fresh rendezvous):
//  - MASTER_PORT: --master-port, else a free port on MASTER_ADDR (single node);
//  - LOOM_JOB_SECRET: inherited when set (must be 32 hex digits), else random
//    for a single node; a multi-node job without one is an error, since the
//    nodes could not agree on a secret;
//  - TORCHELASTIC_RUN_ID: --rdzv-id (or the id --standalone drew), else
//    inherited when set, else "none" (torchrun's default).
// Errors: kInvalidUsage for configuration the user must fix, kSystemError when
// no port or random bytes could be had.
Result<JobSettings> resolveJobSettings(const LaunchOptions& opts);

// Binds port 0 on `addr` (a numeric address or host name) and returns the
// port the kernel picked. The port is released again, so another process can
// take it before rank 0 binds it; torchrun accepts the same race.
Result<int> findFreePort(const std::string& addr);

// 16 bytes from getrandom(2) as 32 lowercase hex digits.
Result<std::string> randomSecretHex();

// True when `text` is exactly kSecretHexDigits hex digits.
bool isValidSecret(std::string_view text);

// The environment of the rank with `localRank` on this node: `baseEnv`
// (NULL-terminated, e.g. environ) with every variable loomrun sets replaced.
std::vector<std::string> rankEnvironment(const char* const* baseEnv, const LaunchOptions& opts,
                                         const JobSettings& job, int localRank);

}  // namespace loom::launcher
