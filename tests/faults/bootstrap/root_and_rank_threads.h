// What the bootstrap fault tests share: a root with a captured log, ranks
// run on threads that report their Status and how long they took, and the
// resource check that every test ends with.
#pragma once

#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/root.h"
#include "bootstrap/sock_addr.h"
#include "bootstrap/socket.h"
#include "tests/unit/bootstrap/test_helpers.h"
#include "tests/faults/bootstrap/resource_count.h"

namespace loom::bootstrap::testing {

// What one rank saw.
struct RankOutcome {
  Status status;
  double seconds = 0;
};

// A root on 127.0.0.1 whose WARN lines are kept for the test to read.
struct TestRoot {
  CapturedLog log;
  UniqueId id;
  std::string address;  // "127.0.0.1:port", as the root names itself
};
TestRoot startTestRoot(double timeoutSeconds, double helloTimeoutSeconds = kDefaultHelloTimeoutSeconds);

// The same job reached through a proxy listening on `port`.
UniqueId throughProxy(const UniqueId& id, uint16_t port);
SockAddr rootAddress(const UniqueId& id);

// Connects as rank `rank` of `nranks` (wait bounded by `waitSeconds`) and,
// once in, runs one 64-byte allGather whose every slot it checks.
RankOutcome connectAndGather(const UniqueId& id, int rank, int nranks, double waitSeconds);

// Runs connectAndGather for rank i of nranks with ids[i] on one thread each.
std::vector<RankOutcome> runRanks(const std::vector<UniqueId>& ids, double waitSeconds);

// A rank played by the test, by hand, so it can break the protocol after the
// rendezvous: its listening socket and the address table the root sent it.
struct HandPlayedRank {
  Socket listener;
  std::vector<SockAddr> table;
};
Result<HandPlayedRank> rendezvousByHand(const UniqueId& id, int rank, int nranks, const WaitContext& wait);

bool contains(const std::string& text, const std::string& part);

}  // namespace loom::bootstrap::testing
