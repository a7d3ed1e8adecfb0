#include "tools/loomrun/output_forwarder.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>

namespace loom::launcher {
namespace {

constexpr size_t kReadChunk = 64 * 1024;
// A line longer than this is forwarded in pieces instead of buffered whole, so
// a rank that never writes a newline cannot grow loomrun's memory unbounded.
constexpr size_t kMaxBufferedLine = 64 * 1024;
// finish() reads at most this many chunks, so a rank that keeps writing cannot
// hold loomrun in its final drain.
constexpr int kFinishReads = 16;

}  // namespace

bool OutputSink::write(std::string_view data) {
  while (!broken_ && !data.empty()) {
    ssize_t n = ::write(fd_, data.data(), data.size());
    if (n >= 0) {
      data.remove_prefix(static_cast<size_t>(n));
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      pollfd p{fd_, POLLOUT, 0};  // an inherited non-blocking descriptor
      poll(&p, 1, -1);
    } else if (errno != EINTR) {
      broken_ = true;
    }
  }
  return !broken_;
}

StreamForwarder::StreamForwarder(int pipeFd, OutputSink* terminal, OutputSink* file,
                                 std::string prefix, bool wholeLines)
    : fd_(pipeFd), terminal_(terminal), file_(file), prefix_(std::move(prefix)),
      wholeLines_(wholeLines || !prefix_.empty()) {
  int flags = fcntl(fd_, F_GETFL);
  fcntl(fd_, F_SETFL, flags | O_NONBLOCK);
}

StreamForwarder::~StreamForwarder() { closePipe(); }

void StreamForwarder::pump() {
  if (fd_ < 0) return;
  if (sinksBroken()) {
    closePipe();
    return;
  }
  char buf[kReadChunk];
  ssize_t n = read(fd_, buf, sizeof(buf));
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  if (n <= 0) {  // end of file: every writer (the rank and its children) is gone
    flushPartialLine();
    closePipe();
    return;
  }
  std::string_view data(buf, static_cast<size_t>(n));
  if (file_ != nullptr) file_->write(data);
  if (terminal_ != nullptr && wholeLines_) forwardLines(data);
  else if (terminal_ != nullptr) terminal_->write(data);
  if (sinksBroken()) closePipe();
}

// The pipe is kept open while any destination still takes the output: the
// rank sees EPIPE only once nothing reads what it writes. A stream with no
// destination at all (filtered out, not logged) is read and dropped.
bool StreamForwarder::sinksBroken() const {
  if (terminal_ == nullptr && file_ == nullptr) return false;
  bool terminalGone = terminal_ == nullptr || terminal_->broken();
  bool fileGone = file_ == nullptr || file_->broken();
  return terminalGone && fileGone;
}

void StreamForwarder::finish() {
  for (int i = 0; i < kFinishReads && fd_ >= 0; ++i) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 0) <= 0) break;
    pump();
  }
  flushPartialLine();
  closePipe();
}

void StreamForwarder::forwardLines(std::string_view data) {
  std::string out;
  size_t newline;
  while ((newline = data.find('\n')) != std::string_view::npos) {
    if (!midLine_) out += prefix_;
    out += partial_;
    out.append(data.substr(0, newline + 1));
    partial_.clear();
    midLine_ = false;
    data.remove_prefix(newline + 1);
  }
  partial_.append(data);
  if (partial_.size() >= kMaxBufferedLine) {
    if (!midLine_) out += prefix_;
    out += partial_;
    partial_.clear();
    midLine_ = true;
  }
  terminal_->write(out);
}

void StreamForwarder::flushPartialLine() {
  if (terminal_ == nullptr || !wholeLines_ || (partial_.empty() && !midLine_)) return;
  std::string out = midLine_ ? std::string() : prefix_;
  out += partial_;
  out += '\n';
  partial_.clear();
  midLine_ = false;
  terminal_->write(out);
}

void StreamForwarder::closePipe() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

}  // namespace loom::launcher
