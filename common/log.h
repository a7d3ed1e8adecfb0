// Logging as NCCL users expect it: LOOM_DEBUG=WARN|INFO|TRACE selects the
// level, LOOM_DEBUG_SUBSYS a comma list of subsystems (prefix `^` excludes),
// LOOM_DEBUG_FILE a file name (%h host, %p pid). Lines read
//   host:pid:tid [rank] LOOM INFO <SUBSYS> message
//
// A Logger is a value: the communicator snapshots its settings at creation
// and hands a copy (with its rank) to every layer, so there is no global
// configuration besides the process default used before any communicator.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace loom {

enum class LogLevel : int { kNone = 0, kVersion = 1, kWarn = 2, kInfo = 3, kTrace = 4 };

enum Subsys : uint32_t {
  kSubsysInit = 1u << 0,
  kSubsysBootstrap = 1u << 1,
  kSubsysTransport = 1u << 2,
  kSubsysAlgo = 1u << 3,
  kSubsysColl = 1u << 4,
  kSubsysKernel = 1u << 5,
  kSubsysEnv = 1u << 6,
  kSubsysProgress = 1u << 7,
  kSubsysTuner = 1u << 8,
  kSubsysAll = ~0u,
};

struct LogSettings {
  LogLevel level = LogLevel::kWarn;
  uint32_t subsysMask = kSubsysAll;
  std::FILE* sink = stderr;  // owned by the process-wide sink table, never closed

  // Parses LOOM_DEBUG, LOOM_DEBUG_SUBSYS and LOOM_DEBUG_FILE.
  static LogSettings fromEnv();
  // Parses one LOOM_DEBUG_SUBSYS value ("INIT,ALGO", "^BOOTSTRAP", "ALL").
  static uint32_t parseSubsys(const std::string& spec);
  static LogLevel parseLevel(const std::string& spec);
};

class Logger {
 public:
  Logger() = default;
  Logger(LogSettings settings, int rank) : settings_(settings), rank_(rank) {}

  // The process default: environment read once, rank unknown (-1).
  static const Logger& process();

  bool enabled(LogLevel level, uint32_t subsys) const {
    return level <= settings_.level && (level == LogLevel::kWarn || (subsys & settings_.subsysMask));
  }
  void log(LogLevel level, uint32_t subsys, const char* fmt, ...) const
      __attribute__((format(printf, 4, 5)));
  int rank() const { return rank_; }
  Logger withRank(int rank) const { return Logger(settings_, rank); }
  const LogSettings& settings() const { return settings_; }

 private:
  LogSettings settings_;
  int rank_ = -1;
};

}  // namespace loom

#define LOOM_WARN(logger, subsys, ...) \
  do { if ((logger).enabled(::loom::LogLevel::kWarn, (subsys))) (logger).log(::loom::LogLevel::kWarn, (subsys), __VA_ARGS__); } while (0)
#define LOOM_INFO(logger, subsys, ...) \
  do { if ((logger).enabled(::loom::LogLevel::kInfo, (subsys))) (logger).log(::loom::LogLevel::kInfo, (subsys), __VA_ARGS__); } while (0)
#define LOOM_TRACE(logger, subsys, ...) \
  do { if ((logger).enabled(::loom::LogLevel::kTrace, (subsys))) (logger).log(::loom::LogLevel::kTrace, (subsys), __VA_ARGS__); } while (0)
