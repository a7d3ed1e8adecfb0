// The shared-memory transport: ranks on one host exchange chunks through
// FIFOs in POSIX shared memory (or files under LOOM_SHM_DIR).
//
// Each rank owns one segment, /loom-<jobTag>-<rank>, holding two FIFOs per
// inbound peer, one per protocol (supports() is true for both):
//  - Simple: a control page (head and tail counters on separate cache lines,
//    per-chunk byte counts, two WaitSignals) and Config::fifoSlots slots of
//    Config::chunkBytes each (page aligned), over which chunks are packed
//    (chunk_ring.h). A sender writes into the FIFO for it in the receiver's
//    segment; the receiver reads chunks in place.
//  - LL: a control page (tail counter, two WaitSignals) and kLLSlots slots of
//    kLLChunkBytes payload stored as flagged 8-byte lines (shm_ll_connection.h);
//    both ends stage chunks in private buffers.
// and, after them, the rank's bulletin (shm_bulletin.h): its own message of
// each round for every peer to read, offered as bulletin() when this
// transport serves every other rank of the communicator.
//
// connect() is collective over the communicator and runs in three steps,
// each closed by a bootstrap allGather of every rank's outcome (so a failure
// on one rank fails all ranks promptly, naming the rank, instead of leaving
// them to time out):
//   1. create, size, reserve (posix_fallocate: a full /dev/shm is a clear
//      error here, not a SIGBUS later) and map the own segment;
//   2. open and map the FIFO for this rank, and the bulletin, in each peer's segment;
//   3. unlink the own segment: from then on the memory lives only as long as
//      the mappings, and nothing is left in /dev/shm whatever happens to the
//      processes.
// Remaining window: a process killed between steps 1 and 3 (inside connect())
// leaves its segment behind; its name carries the job tag, so it is
// recognisable and never reused by another job.
//
// Memory per rank: (inbound peers) x (4 KiB + fifoSlots x chunkBytes + LL's
// 132 KiB) + the bulletin's 72 KiB, e.g. 7 peers x (4 x 256 KiB + 136 KiB)
// + 72 KiB = 8.1 MiB.
//
// Works between threads of one process and between processes alike.
#pragma once

#include "transports/transport.h"

namespace loom::transport {

// canConnect: same host (equal hostHash). create: a new, unconnected ShmTransport.
const TransportFactory& shmTransportFactory();

}  // namespace loom::transport
