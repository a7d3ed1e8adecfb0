// LOOM_TRACE=file: a Chrome-trace ("traceEvents" JSON object, as
// chrome://tracing and ui.perfetto.dev read it) timeline of one rank's
// operations and their phases, one file per rank.
//
// File name: "%r" in the pattern becomes the rank; without it ".rank<N>" is
// inserted before the extension (trace.json -> trace.rank0.json). A second
// communicator of the same rank in one process (a split) adds ".comm<K>".
//
// The file is valid JSON at every flush: events are appended where the
// closing "]}" was and the closing is written again after them. Flushes
// happen every 200 ms or 64 KiB of events (checked when an operation ends),
// on a flight-recorder dump, on destruction and at process exit (atexit). A
// crash or SIGKILL loses at most the events since the last flush; what is on
// disk stays valid JSON (unless the process dies inside the flush's write).
//
// Threading: every method may be called from any thread (one mutex).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "common/log.h"

namespace loom {

class TraceWriter {
 public:
  // Opens (truncates) the file for `rank`; null (with a warning) on failure.
  static std::unique_ptr<TraceWriter> open(const std::string& pattern, int rank, const std::string& host,
                                           const Logger& log);
  ~TraceWriter();  // flushes and closes
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // One complete ("X") event on lane `tid` from startNs to endNs
  // (monotonicNanos()); argsJson is a JSON object body ("\"a\":1") or empty.
  void complete(const std::string& name, const char* category, int tid, int64_t startNs, int64_t endNs,
                const std::string& argsJson);
  // Flushes if the last flush is older than 200 ms or 64 KiB are buffered.
  void maybeFlush();
  void flush();
  const std::string& path() const { return path_; }

  // The file name for `rank` (see above), without the ".comm<K>" suffix.
  static std::string pathFor(const std::string& pattern, int rank);

 private:
  TraceWriter(int fd, std::string path, int rank);
  void flushLocked();

  std::mutex mu_;
  int fd_;
  std::string path_;
  int rank_;
  std::string pending_;  // events not yet written, each preceded by ",\n"
  int64_t fileEnd_ = 0;  // where the closing "]}" starts
  int64_t lastFlushNs_ = 0;
};

// Escapes `text` for a JSON string body.
std::string jsonEscape(const std::string& text);

}  // namespace loom
