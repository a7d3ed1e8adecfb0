#include "transports/shm/shm_header_check.h"

#include "common/format.h"

namespace loom::transport::shm {

Result<SegmentGeometry> checkSegmentHeader(const SegmentHeader& header, const PeerSegmentExpectation& expect) {
  const char* path = expect.path.c_str();
  const int peer = expect.peerRank;
  LOOM_ENFORCE(header.magic == kSegmentMagic && header.version == kLayoutVersion && header.ownerRank == peer,
               Code::kSystemError, "shm: segment %s does not hold a Loom v%u segment of peer rank %d", path,
               kLayoutVersion, peer);
  LOOM_ENFORCE(header.slots == expect.slots && header.chunkBytes == expect.chunkBytes, Code::kInvalidUsage,
               "shm: peer rank %d uses %u slots of %llu bytes, rank %d uses %u of %llu "
               "(LOOM_SHM_SLOTS and the chunk size, LOOM_CHUNK_SIZE or loomConfig_t.chunkBytes, must match on every rank)",
               peer, header.slots, static_cast<unsigned long long>(header.chunkBytes), expect.selfRank, expect.slots,
               static_cast<unsigned long long>(expect.chunkBytes));
  // Bounding the count first keeps every product below 2^64 (at most one
  // FIFO per rank of the job, each of a bounded slots x chunk size).
  LOOM_ENFORCE(expect.nranks >= 1 && header.fifoCount >= 1 &&
                   header.fifoCount <= static_cast<uint32_t>(expect.nranks),
               Code::kSystemError, "shm: segment %s of peer rank %d claims %u FIFOs; a job of %d ranks has 1 to %d",
               path, peer, header.fifoCount, expect.nranks, expect.nranks);
  SegmentGeometry g = SegmentGeometry::compute(header.fifoCount, header.slots, header.chunkBytes);
  LOOM_ENFORCE(g.headerBytes == header.headerBytes && g.totalBytes == header.totalBytes &&
                   g.fifoBytes == header.fifoBytes && g.slotStride == header.slotStride &&
                   g.llSlots == header.llSlots && g.llChunkBytes == header.llChunkBytes &&
                   g.llSlotStride == header.llSlotStride && g.llOffset == header.llOffset &&
                   g.bulletinOffset == header.bulletinOffset && g.bulletinCapacity == header.bulletinCapacity &&
                   g.bulletinStride == header.bulletinStride && g.bulletinBytes == header.bulletinBytes &&
                   g.windowOffset == header.windowOffset && g.windowBytes == header.windowBytes &&
                   g.totalBytes <= expect.fileBytes,
               Code::kSystemError, "shm: segment %s of peer rank %d has an inconsistent size", path, peer);
  return g;
}

Result<uint64_t> findFifoOffset(const FifoEntry* entries, uint32_t count, const SegmentGeometry& g,
                                const PeerSegmentExpectation& expect) {
  const FifoEntry* mine = nullptr;
  for (uint32_t i = 0; i < count && mine == nullptr; ++i) {
    if (entries[i].senderRank == expect.selfRank) mine = &entries[i];
  }
  LOOM_ENFORCE(mine != nullptr, Code::kInvalidUsage,
               "shm: peer rank %d does not expect chunks from rank %d (the shm peer lists are not symmetric)",
               expect.peerRank, expect.selfRank);
  // Written as a subtraction: offset + fifoBytes could wrap past 2^64 and pass.
  const uint64_t offset = mine->offset;
  LOOM_ENFORCE(offset % kPageBytes == 0 && offset >= g.headerBytes && g.totalBytes >= g.fifoBytes &&
                   offset <= g.totalBytes - g.fifoBytes,
               Code::kSystemError, "shm: segment %s of peer rank %d places the FIFO for rank %d outside the segment",
               expect.path.c_str(), expect.peerRank, expect.selfRank);
  return offset;
}

}  // namespace loom::transport::shm
