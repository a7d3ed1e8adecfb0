// Connection setup of the TCP transport, collective over the communicator.
//
//  1. Every rank with TCP peers listens on the address LOOM_SOCKET_IFNAME
//     selects (interface_select.h) and draws a random 128-bit token.
//  2. One bootstrap allGather shares every rank's endpoint (address, port,
//     token). The bootstrap itself only admits ranks holding the job secret,
//     so the token reaches exactly the ranks of this job: a connection that
//     presents it is one of them.
//  3. Each rank opens LOOM_NSOCKS sockets to every higher-ranked TCP peer and
//     sends a hello on each (magic, ranks, lane, geometry, the listener's
//     token); then accepts the sockets of its lower-ranked peers, checks each
//     hello (a wrong token or an unexpected rank is logged and closed, and
//     accepting goes on), and acknowledges it; then reads its own acks. A
//     rank of the job whose chunk size or LOOM_NSOCKS differs gets a
//     mismatch reply instead, and both ranks fail with kInvalidUsage.
//     Connecting never waits for an accept (the listen backlog holds the
//     connection), so no order of arrival can deadlock.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/socket.h"
#include "transports/transport.h"

namespace loom::transport::tcp {

// What each rank publishes in step 2 (fixed layout: it crosses the wire).
struct Endpoint {
  char host[64] = {};  // numeric address, empty when the rank has no TCP peers
  uint16_t port = 0;
  uint8_t failed = 0;  // step 1 failed on this rank
  uint8_t pad[5] = {};
  bootstrap::Secret token{};
};
static_assert(sizeof(Endpoint) == 88);

// This rank's listener and token (step 1).
struct Listener {
  bootstrap::Socket socket;
  Endpoint endpoint;
};
Result<Listener> openListener(const SetupContext& ctx);

// Steps 3: connected sockets, sockets[peer][lane] for every peer in `peers`.
Status connectLanes(const SetupContext& ctx, const std::vector<int>& peers, int lanes, const Listener& listener,
                    const std::vector<Endpoint>& table, std::vector<std::vector<bootstrap::Socket>>* sockets);

// Large socket buffers and TCP_NODELAY (best effort: the kernel caps the sizes).
void tuneDataSocket(int fd);

}  // namespace loom::transport::tcp
