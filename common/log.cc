#include "common/log.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cctype>
#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "common/config.h"
#include "common/format.h"

namespace loom {
namespace {

struct SubsysName {
  const char* name;
  uint32_t bit;
};
constexpr SubsysName kSubsysNames[] = {
    {"INIT", kSubsysInit},         {"BOOTSTRAP", kSubsysBootstrap}, {"TRANSPORT", kSubsysTransport},
    {"SHM", kSubsysTransport},     {"ALGO", kSubsysAlgo},           {"COLL", kSubsysColl},
    {"KERNEL", kSubsysKernel},     {"ENV", kSubsysEnv},             {"PROGRESS", kSubsysProgress},
    {"TUNER", kSubsysTuner},       {"TUNING", kSubsysTuner},        {"ALL", kSubsysAll},
};

const char* subsysLabel(uint32_t subsys) {
  for (const auto& s : kSubsysNames)
    if (s.bit == subsys) return s.name;
  return "LOOM";
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

const std::string& hostName() {
  static const std::string name = [] {
    char buf[256] = {0};
    if (gethostname(buf, sizeof(buf) - 1) != 0) return std::string("unknown");
    return std::string(buf);
  }();
  return name;
}

// Expands %h and %p in LOOM_DEBUG_FILE.
std::string expandFileName(const std::string& pattern) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size()) {
      char c = pattern[i + 1];
      if (c == 'h') { out += hostName(); ++i; continue; }
      if (c == 'p') { out += std::to_string(getpid()); ++i; continue; }
    }
    out += pattern[i];
  }
  return out;
}

// One FILE* per distinct file name for the life of the process.
std::FILE* sinkFor(const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, std::FILE*> sinks;
  std::lock_guard<std::mutex> lock(mu);
  auto it = sinks.find(name);
  if (it != sinks.end()) return it->second;
  std::FILE* f = std::fopen(name.c_str(), "a");
  if (f) setvbuf(f, nullptr, _IOLBF, 0);
  sinks[name] = f ? f : stderr;
  return sinks[name];
}

}  // namespace

LogLevel LogSettings::parseLevel(const std::string& spec) {
  std::string s = upper(spec);
  if (s == "NONE" || s.empty()) return LogLevel::kNone;
  if (s == "VERSION") return LogLevel::kVersion;
  if (s == "WARN") return LogLevel::kWarn;
  if (s == "INFO") return LogLevel::kInfo;
  if (s == "TRACE") return LogLevel::kTrace;
  return LogLevel::kWarn;
}

uint32_t LogSettings::parseSubsys(const std::string& spec) {
  if (spec.empty()) return kSubsysAll;
  bool exclude = spec[0] == '^';
  uint32_t mask = 0;
  size_t pos = exclude ? 1 : 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    std::string token = upper(spec.substr(pos, comma - pos));
    for (const auto& s : kSubsysNames)
      if (token == s.name) mask |= s.bit;
    pos = comma + 1;
  }
  return exclude ? ~mask : mask;
}

LogSettings LogSettings::fromEnv() {
  LogSettings s;
  if (const char* v = readKnob("LOOM_DEBUG")) s.level = parseLevel(v);
  if (const char* v = readKnob("LOOM_DEBUG_SUBSYS")) s.subsysMask = parseSubsys(v);
  if (const char* v = readKnob("LOOM_DEBUG_FILE"); v && *v) s.sink = sinkFor(expandFileName(v));
  return s;
}

const Logger& Logger::process() {
  static const Logger logger(LogSettings::fromEnv(), -1);
  return logger;
}

void Logger::log(LogLevel level, uint32_t subsys, const char* fmt, ...) const {
  const char* levelName = level == LogLevel::kWarn   ? "WARN"
                          : level == LogLevel::kInfo ? "INFO"
                          : level == LogLevel::kTrace ? "TRACE"
                                                      : "VERSION";
  va_list args;
  va_start(args, fmt);
  std::string body = vstrprintf(fmt, args);
  va_end(args);
  std::string rankText = rank_ >= 0 ? std::to_string(rank_) : std::string("-");
  std::string line = strprintf("%s:%d:%ld [%s] LOOM %s %s %s\n", hostName().c_str(), getpid(),
                               static_cast<long>(syscall(SYS_gettid)), rankText.c_str(), levelName,
                               subsysLabel(subsys), body.c_str());
  // One fwrite per line keeps lines of concurrent ranks from interleaving.
  std::fwrite(line.data(), 1, line.size(), settings_.sink ? settings_.sink : stderr);
}

}  // namespace loom
