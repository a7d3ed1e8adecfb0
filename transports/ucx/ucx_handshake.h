// Connection setup of the UCX transport, collective over the communicator.
//
//  1. Every rank with UCX peers opens its UCP context and worker
//     (ucx_worker.h); the others take part in the exchanges with nothing.
//  2. Two bootstrap allGathers share every rank's worker address: first each
//     address's length and whether step 1 failed there, then the addresses,
//     padded to the longest. The bootstrap only admits ranks holding the job
//     secret, so these addresses reach exactly the ranks of this job.
//  3. Each rank creates an endpoint to every UCX peer (error mode PEER), and
//     all learn whether every rank managed to.
//  4. Each rank sends every peer a hello (ranks, chunk geometry, a hash of
//     the communicator's job tag) and checks theirs. UCX connects endpoints
//     lazily, so this is what proves every pair can talk, at init rather
//     than in the first collective; then all learn who failed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "transports/transport.h"
#include "transports/ucx/ucx_progress.h"

namespace loom::transport::ucx {

constexpr uint32_t kHelloMagic = 0x4c4d5558;  // "LMUX"
constexpr uint32_t kHelloVersion = 1;

// What each rank publishes in the first half of step 2 (fixed layout).
struct AddressHeader {
  uint32_t bytes = 0;  // worker address length, 0 without UCX peers
  uint8_t failed = 0;  // step 1 failed on this rank
  uint8_t pad[3] = {};
};
static_assert(sizeof(AddressHeader) == 8);

// Step 2: every rank's worker address (empty for ranks without UCX peers).
// `local` is step 1's outcome on this rank; a failure anywhere fails every
// rank, naming the ranks it happened on.
Result<std::vector<std::vector<uint8_t>>> exchangeAddresses(const SetupContext& ctx, const std::vector<uint8_t>& mine,
                                                            const Status& local);

// Every rank contributes whether `step` succeeded; all learn who failed.
Status exchangeOutcome(const SetupContext& ctx, const Status& local, const char* step);

uint64_t jobTagHash(const std::string& jobTag);
// The hello rank `self` sends rank `peer`.
Hello makeHello(int self, int peer, size_t chunkBytes, int slots, uint64_t jobHash);
// Checks the hello that arrived from `peer` against what `self` expects
// (the hello `self` would send, mirrored); "" or what differs.
std::string checkHello(const Hello& got, int self, int peer, size_t chunkBytes, int slots, uint64_t jobHash);

}  // namespace loom::transport::ucx
