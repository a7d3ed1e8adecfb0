// Forwarding of the ranks' stdout and stderr to loomrun's own.
//
// Each rank writes into two pipes; loomrun polls all read ends (non-blocking,
// so one chatty or silent rank never stalls the others) and forwards what it
// reads. In line mode every line is written whole (with a "[<rank>] " prefix
// when tagging), so lines of different ranks never mix; an unfinished last
// line is flushed, with a newline added, when the rank's pipe closes. In raw
// mode the bytes are passed through as they arrive (progress bars keep
// working). With --log-dir a stream may also (tee) or only (redirect) be
// written to a file, byte for byte, without prefix.
//
// Thread safety: none; everything runs on loomrun's single supervision thread.
#pragma once

#include <string>
#include <string_view>

namespace loom::launcher {

// loomrun's stdout or stderr. Not owned: the descriptor is never closed here.
class OutputSink {
 public:
  explicit OutputSink(int fd) : fd_(fd) {}

  // Writes all of `data`, waiting while the destination is full (that wait is
  // the reader's back-pressure, and has no deadline on purpose). Returns false
  // once the destination is gone (EPIPE or another error); from then on writes
  // are dropped, and forwarders close their pipes so the ranks see EPIPE too.
  bool write(std::string_view data);
  bool broken() const { return broken_; }

 private:
  int fd_;
  bool broken_ = false;
};

// One rank's stdout or stderr pipe.
class StreamForwarder {
 public:
  // Takes ownership of `pipeFd` (the read end; made non-blocking here).
  // `terminal` (may be null: redirected to the file only, or filtered out;
  // with neither destination the bytes are dropped) gets the lines
  // with `prefix`, whole when `wholeLines` (always when a prefix is given);
  // `file` (may be null) gets the bytes unchanged. Neither is owned.
  StreamForwarder(int pipeFd, OutputSink* terminal, OutputSink* file, std::string prefix,
                  bool wholeLines);
  ~StreamForwarder();
  StreamForwarder(const StreamForwarder&) = delete;
  StreamForwarder& operator=(const StreamForwarder&) = delete;

  // The read end to poll for POLLIN, or -1 once closed.
  int fd() const { return fd_; }
  bool isOpen() const { return fd_ >= 0; }

  // Reads once and forwards every complete line. Closes the pipe (flushing an
  // unfinished line) at end of file, on a read error, or when the sink broke.
  void pump();

  // Forwards what is still readable without waiting, flushes the unfinished
  // line and closes the pipe. Used when loomrun stops waiting for the pipe.
  void finish();

 private:
  void forwardLines(std::string_view data);
  void flushPartialLine();
  void closePipe();
  bool sinksBroken() const;

  int fd_;
  OutputSink* terminal_;
  OutputSink* file_;
  std::string prefix_;
  bool wholeLines_;
  std::string partial_;    // line mode: bytes after the last newline
  bool midLine_ = false;  // an over-long line was already started on the sink
};

}  // namespace loom::launcher
