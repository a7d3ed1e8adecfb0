// LOOM_CHECK: before a collective moves any data, every rank sends a
// fixed-size descriptor of its call (sequence number, kind, count, datatype,
// op, root) to every peer over the Simple links and receives theirs: an
// all-gather whose size does not depend on the call, so ranks that called
// different things still complete it instead of hanging or writing into
// buffers sized for another call. Then each rank compares all descriptors; on
// any difference every rank fails with the same message listing what each
// rank called.
//
// Cost: one 64-byte chunk to and from each peer per collective (measured in
// README.md, LOOM_CHECK).
#pragma once

#include <cstdint>

#include "algorithms/algorithm.h"
#include "src/diagnostics/op_descriptor.h"

namespace loom {

// Runs the exchange and the comparison for this rank's call `mine`, the
// `seq`-th collective of the communicator. Errors (each naming ranks):
//   kInvalidUsage  the calls differ: "LOOM_CHECK: ranks called different
//                  collectives: rank 0: ...; rank 1: ..." (same on every rank);
//   kRemoteError   a peer sent something that is not a descriptor (it runs a
//                  send/recv), or the wait was aborted;
//   kTimeout       some peers never sent theirs: the message names them.
Status crossCheckCollective(const OpDescriptor& mine, uint64_t seq, algo::Links& links, int rank, int nranks,
                            const WaitContext& wait);

}  // namespace loom
