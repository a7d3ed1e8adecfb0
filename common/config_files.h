// Settings files: KEY=VALUE lines, as in NCCL's nccl.conf. Loom reads its
// LOOM_* variables from ~/.loom.conf and /etc/loom.conf, and the NCCL shim
// reads NCCL_* from NCCL_CONF_FILE (else ~/.nccl.conf) and /etc/nccl.conf.
// readKnob() (common/config.h) asks the environment first, then the user's
// file, then the system's: the first that has the variable wins. Variables a
// launcher sets per rank (RANK, LOOM_JOB_SECRET, ...) and those that locate
// the files come from the environment only.
//
// Format: one KEY=VALUE per line; blank lines and lines whose first
// non-blank character is # are skipped; blanks around KEY and VALUE are
// dropped, and so are quotes around the whole VALUE ("..." or '...'). A
// line without = or with an empty KEY is skipped. The last line for a KEY wins.
#pragma once

#include <map>
#include <string>

namespace loom {

using SettingsMap = std::map<std::string, std::string>;

// Where a setting was found, highest priority first.
enum class SettingSource { kEnvironment, kUserFile, kSystemFile };
const char* settingSourceName(SettingSource source);

SettingsMap parseSettingsText(const std::string& text);
// Adds the settings of the file at path to *out; false when it cannot be read
// (a missing file is the common case and not an error).
bool readSettingsFile(const std::string& path, SettingsMap* out);

// The files of one family of variables (LOOM_* or NCCL_*).
struct SettingsFilePaths {
  std::string user;    // empty: none (no home directory)
  std::string system;  // <system dir>/loom.conf or nccl.conf
};

// The system directory is /etc unless LOOM_SYSTEM_CONF_DIR names another
// (tests; installs that keep their configuration elsewhere). ncclConfFile is
// NCCL_CONF_FILE's value (or nullptr): it replaces ~/.nccl.conf, as in NCCL.
SettingsFilePaths loomSettingsFiles(const char* systemDir);
SettingsFilePaths ncclSettingsFiles(const char* systemDir, const char* ncclConfFile);

// The user's home directory: $HOME, else the password database; "" if neither.
std::string homeDirectory();

}  // namespace loom
