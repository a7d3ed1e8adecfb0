#include "common/config_files.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace loom {
namespace {

std::string trimmed(const std::string& text) {
  const char* blanks = " \t\r";
  const size_t begin = text.find_first_not_of(blanks);
  if (begin == std::string::npos) return "";
  const size_t end = text.find_last_not_of(blanks);
  return text.substr(begin, end - begin + 1);
}

std::string withoutQuotes(const std::string& value) {
  if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') && value.back() == value.front())
    return value.substr(1, value.size() - 2);
  return value;
}

std::string inDirectory(const char* dir, const char* name) {
  std::string path = dir && *dir ? dir : "/etc";
  if (path.back() != '/') path += '/';
  return path + name;
}

}  // namespace

const char* settingSourceName(SettingSource source) {
  switch (source) {
    case SettingSource::kEnvironment: return "environment";
    case SettingSource::kUserFile: return "user file";
    case SettingSource::kSystemFile: return "system file";
  }
  return "?";
}

SettingsMap parseSettingsText(const std::string& text) {
  SettingsMap settings;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const std::string content = trimmed(line);
    if (content.empty() || content[0] == '#') continue;
    const size_t equals = content.find('=');
    if (equals == std::string::npos) continue;
    const std::string key = trimmed(content.substr(0, equals));
    if (key.empty()) continue;
    settings[key] = withoutQuotes(trimmed(content.substr(equals + 1)));
  }
  return settings;
}

bool readSettingsFile(const std::string& path, SettingsMap* out) {
  if (path.empty()) return false;
  std::ifstream file(path);
  if (!file) return false;
  std::ostringstream text;
  text << file.rdbuf();
  for (auto& [key, value] : parseSettingsText(text.str())) (*out)[key] = value;
  return true;
}

std::string homeDirectory() {
  if (const char* home = std::getenv("HOME"); home && *home) return home;
  // Without HOME (daemons, some batch systems) the password database knows it.
  struct passwd entry;
  struct passwd* found = nullptr;
  char buffer[4096];
  if (getpwuid_r(getuid(), &entry, buffer, sizeof(buffer), &found) == 0 && found && found->pw_dir)
    return found->pw_dir;
  return "";
}

SettingsFilePaths loomSettingsFiles(const char* systemDir) {
  const std::string home = homeDirectory();
  return {home.empty() ? "" : home + "/.loom.conf", inDirectory(systemDir, "loom.conf")};
}

SettingsFilePaths ncclSettingsFiles(const char* systemDir, const char* ncclConfFile) {
  std::string user;
  if (ncclConfFile && *ncclConfFile) user = ncclConfFile;
  else if (const std::string home = homeDirectory(); !home.empty()) user = home + "/.nccl.conf";
  return {user, inDirectory(systemDir, "nccl.conf")};
}

}  // namespace loom
