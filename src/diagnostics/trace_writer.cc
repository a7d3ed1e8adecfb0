#include "src/diagnostics/trace_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

#include "src/diagnostics/flight_recorder.h"
#include "common/format.h"

namespace loom {
namespace {

constexpr const char* kClosing = "\n]}\n";

// Every open writer, so that exit() (without destroying communicators) still
// leaves complete files; and the paths already used in this process.
struct Registry {
  std::mutex mu;
  std::set<TraceWriter*> open;
  std::map<std::string, int> used;
  bool atexitInstalled = false;
};
Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: atexit handlers may run after static destructors
  return *r;
}

void flushAllAtExit() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (TraceWriter* w : r.open) w->flush();
}

bool writeAll(int fd, const char* data, size_t size, int64_t offset) {
  while (size > 0) {
    const ssize_t n = ::pwrite(fd, data, size, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
    offset += n;
  }
  return true;
}

}  // namespace

std::string jsonEscape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\', out += c;
    else if (static_cast<unsigned char>(c) < 0x20) out += strprintf("\\u%04x", static_cast<unsigned>(c));
    else out += c;
  }
  return out;
}

std::string TraceWriter::pathFor(const std::string& pattern, int rank) {
  const std::string r = std::to_string(rank);
  if (const size_t at = pattern.find("%r"); at != std::string::npos) {
    std::string p = pattern;
    for (size_t pos = at; pos != std::string::npos; pos = p.find("%r", pos + r.size())) p.replace(pos, 2, r);
    return p;
  }
  const size_t slash = pattern.rfind('/');
  const size_t dot = pattern.rfind('.');
  if (dot != std::string::npos && (slash == std::string::npos || dot > slash + 1))
    return pattern.substr(0, dot) + ".rank" + r + pattern.substr(dot);
  return pattern + ".rank" + r;
}

std::unique_ptr<TraceWriter> TraceWriter::open(const std::string& pattern, int rank, const std::string& host,
                                               const Logger& log) {
  std::string path = pathFor(pattern, rank);
  Registry& reg = registry();
  {
    std::lock_guard<std::mutex> lock(reg.mu);
    const int uses = reg.used[path]++;
    if (uses > 0) path += ".comm" + std::to_string(uses);
    if (!reg.atexitInstalled) {
      std::atexit(flushAllAtExit);
      reg.atexitInstalled = true;
    }
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    LOOM_WARN(log, kSubsysInit, "LOOM_TRACE: cannot create %s: %s; no trace for rank %d", path.c_str(),
              std::strerror(errno), rank);
    return nullptr;
  }
  std::unique_ptr<TraceWriter> w(new TraceWriter(fd, path, rank));
  // Metadata first, so every later event can be written as ",\n{...}".
  const std::string head = strprintf(
      "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n"
      "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"rank %d (%s, pid %d)\"}},\n"
      "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"sort_index\":%d}},\n"
      "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"operations\"}},\n"
      "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":1,\"args\":{\"name\":\"queue\"}}",
      rank, rank, jsonEscape(host).c_str(), static_cast<int>(::getpid()), rank, rank, rank, rank);
  if (!writeAll(fd, head.data(), head.size(), 0) || !writeAll(fd, kClosing, std::strlen(kClosing),
                                                              static_cast<int64_t>(head.size()))) {
    LOOM_WARN(log, kSubsysInit, "LOOM_TRACE: cannot write %s: %s; no trace for rank %d", path.c_str(),
              std::strerror(errno), rank);
    return nullptr;  // the destructor closes fd
  }
  w->fileEnd_ = static_cast<int64_t>(head.size());
  std::lock_guard<std::mutex> lock(reg.mu);
  reg.open.insert(w.get());
  return w;
}

TraceWriter::TraceWriter(int fd, std::string path, int rank)
    : fd_(fd), path_(std::move(path)), rank_(rank), lastFlushNs_(monotonicNanos()) {}

TraceWriter::~TraceWriter() {
  {
    Registry& reg = registry();
    std::lock_guard<std::mutex> lock(reg.mu);
    reg.open.erase(this);
  }
  flush();
  ::close(fd_);
}

void TraceWriter::complete(const std::string& name, const char* category, int tid, int64_t startNs, int64_t endNs,
                           const std::string& argsJson) {
  if (endNs < startNs) endNs = startNs;
  std::string event = strprintf(",\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,"
                                "\"ts\":%.3f,\"dur\":%.3f,\"args\":{%s}}",
                                jsonEscape(name).c_str(), category, rank_, tid, static_cast<double>(startNs) * 1e-3,
                                static_cast<double>(endNs - startNs) * 1e-3, argsJson.c_str());
  std::lock_guard<std::mutex> lock(mu_);
  pending_ += event;
}

void TraceWriter::maybeFlush() {
  std::lock_guard<std::mutex> lock(mu_);
  if (pending_.size() >= 64 * 1024 || monotonicNanos() - lastFlushNs_ >= 200'000'000) flushLocked();
}

void TraceWriter::flush() {
  std::lock_guard<std::mutex> lock(mu_);
  flushLocked();
}

void TraceWriter::flushLocked() {
  lastFlushNs_ = monotonicNanos();
  if (pending_.empty()) return;
  // Events first, over the old closing; then the closing after them.
  if (writeAll(fd_, pending_.data(), pending_.size(), fileEnd_)) {
    fileEnd_ += static_cast<int64_t>(pending_.size());
    (void)writeAll(fd_, kClosing, std::strlen(kClosing), fileEnd_);
  }
  pending_.clear();
}

}  // namespace loom
