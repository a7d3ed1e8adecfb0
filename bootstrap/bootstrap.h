// Bootstrap: how ranks of one job find each other before any transport exists.
//
// A UniqueId carries the root's socket address and a random 128-bit job
// secret. The root (a thread started by createUniqueId/startRoot in one
// process) accepts every rank's hello, which presents the secret, its rank,
// the world size and the address of the rank's own listening socket; once all
// have arrived it sends everyone the table of addresses and exits. Ranks then
// connect in a ring (rank -> rank+1), again presenting the secret, and use it
// for out-of-band collectives (allGather, barrier) during setup.
//
// Every wait has a deadline. If some ranks never arrive, the root tells the
// ones that did which ranks are missing, so the error names them. Connections
// that do not present the secret are closed and logged.
//
// Thread safety: a Bootstrap is used by one thread at a time.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/log.h"
#include "common/status.h"
#include "common/wait.h"

namespace loom::bootstrap {

constexpr size_t kUniqueIdBytes = 128;
using Secret = std::array<uint8_t, 16>;

// The decoded form of loomUniqueId (which is its 128-byte serialization).
struct UniqueId {
  std::string rootHost;  // numeric IPv4 or IPv6 address
  uint16_t rootPort = 0;
  Secret secret{};

  void serialize(char out[kUniqueIdBytes]) const;
  static Result<UniqueId> parse(const char in[kUniqueIdBytes]);
  // First 8 secret bytes in hex: names this job's shared-memory segments.
  std::string jobTag() const;
};

// Generates a random secret (getrandom).
Secret randomSecret();
// Parses 32 hex digits (as loomrun passes in LOOM_JOB_SECRET).
Result<Secret> parseSecret(const std::string& hex);
std::string secretToHex(const Secret& s);

// Starts the root in a background thread listening on host:port (port 0
// picks a free one) and returns the id ranks need. The root lives until all
// ranks have received the address table, or until `timeoutSeconds` pass.
// host may be empty: then the address of the first non-loopback interface
// that is up is used, or 127.0.0.1 if there is none.
Result<UniqueId> startRoot(const std::string& host, uint16_t port, const Secret& secret,
                           double timeoutSeconds, const Logger& log);

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;

  // Rendezvous of `rank` of `nranks` through the root named by `id`.
  static Result<std::unique_ptr<Bootstrap>> connect(const UniqueId& id, int rank, int nranks,
                                                    const WaitContext& wait, const Logger& log);

  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  // data holds nranks slots of `bytes` each; this rank's slot is filled on
  // entry, every slot on return.
  virtual Status allGather(void* data, size_t bytes, const WaitContext& wait) = 0;
  virtual Status barrier(const WaitContext& wait) = 0;
};

}  // namespace loom::bootstrap
