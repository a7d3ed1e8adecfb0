// NCCL's environment variables on Loom: each NCCL_* setting Loom has a
// meaning for becomes the LOOM_* variable that libloom reads (the table in
// nccl_env.cc; documented in common/config.cc and docs/nccl.md). The shim
// does this once, at the first call that can start Loom (ncclGetVersion,
// ncclGetUniqueId, ncclCommInit*), by setting LOOM_* in the process
// environment, as NCCL itself exports the settings of nccl.conf.
//
// Precedence, per LOOM_* variable: the environment, then the user's file
// (~/.loom.conf; NCCL_CONF_FILE or ~/.nccl.conf), then the system's
// (/etc/loom.conf; /etc/nccl.conf); within one source LOOM_* wins over NCCL_*.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace loom::nccl_shim {

// What one NCCL setting asks of Loom: LOOM_* assignments, and why any part
// of the value was ignored.
struct Translation {
  std::vector<std::pair<std::string, std::string>> assignments;
  std::vector<std::string> warnings;
};

// Translates NCCL variable `name` with `value`. shmSlots is Loom's FIFO depth
// (LOOM_SHM_SLOTS), which NCCL_BUFFSIZE is divided by. A name the shim does
// not map gives one warning and nothing to set.
Translation translateNcclSetting(const std::string& name, const std::string& value, int shmSlots);

// True for the NCCL_* names translateNcclSetting maps.
bool isMappedNcclVariable(const std::string& name);

// The outcome of applying the NCCL settings found in the environment and the
// files: what was set, what was ignored and why (the log's lines).
struct AppliedSettings {
  std::vector<std::string> set;       // "LOOM_ALGO=ring (from NCCL_ALGO=Ring, environment)"
  std::vector<std::string> warnings;  // NCCL settings or values without a Loom meaning
  std::vector<std::string> notes;     // NCCL settings a LOOM_* one overrides
};

// Reads every NCCL_* setting and sets the LOOM_* variables it asks for in
// the process environment (never one already in the environment).
AppliedSettings applyNcclSettings();

// applyNcclSettings once per process, then its lines logged (WARN for the
// warnings, INFO for the rest), with Loom's log settings as they now stand.
void applyNcclSettingsOnce();

}  // namespace loom::nccl_shim
