// The messages of loomrun's elastic rendezvous (--nnodes MIN:MAX), one text
// line each over a TCP connection that an agent keeps open for its whole
// life: the server takes a closed connection for a node that left.
//
//   agent -> server  JOIN <run id> <local ranks> <master port>
//                    asks for a place in the next round; <master port> is a
//                    free port on the agent's host, used as MASTER_PORT when
//                    the agent becomes node 0
//                    DONE   every local rank exited 0
//   server -> agent  ROUND <round> <node rank> <nodes> <master addr> <master port>
//                    the round closed: start the ranks with these values
//                    RESTART <round> <reason>   stop the ranks of <round> and
//                    JOIN again; reason: join (a node is waiting), leave (a
//                    node's connection closed) or fail (a node's rank failed)
//                    ERROR <text>   the rendezvous gave up (fewer than MIN
//                    nodes within the join timeout, mismatched options)
//                    FINISHED   the job ended before this agent got a place
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace loom::launcher {

struct JoinRequest {
  std::string runId;
  int localRanks = 0;
  int masterPort = 0;
};

struct RoundAssignment {
  int round = 0;
  int nodeRank = 0;
  int nodes = 0;
  std::string masterAddr;
  int masterPort = 0;
};

std::string formatJoin(const JoinRequest& join);
std::optional<JoinRequest> parseJoin(const std::string& line);
std::string formatRound(const RoundAssignment& round);
std::optional<RoundAssignment> parseRound(const std::string& line);

// The first word of a line ("JOIN", "ROUND", ...) and the rest after one space.
std::string messageKind(const std::string& line);
std::string messageRest(const std::string& line);

// A connected socket that sends and receives whole lines. Owns the fd.
class LineChannel {
 public:
  explicit LineChannel(int fd) : fd_(fd) {}
  ~LineChannel();
  LineChannel(const LineChannel&) = delete;
  LineChannel& operator=(const LineChannel&) = delete;

  int fd() const { return fd_; }
  // Writes `line` and a newline; false when the peer is gone.
  bool send(const std::string& line);
  // Reads what is available (call when poll says readable) and appends the
  // complete lines to `lines`; false on end of file or a read error.
  bool receive(std::vector<std::string>& lines);

 private:
  int fd_;
  std::string partial_;
};

}  // namespace loom::launcher
