// What ranks exchange (one bootstrap allGather) to connect verbs queue
// pairs: per rank a header (its port and chunk geometry) followed by one
// QpRecord per rank of the communicator (zero where it is not a verbs peer).
// The table is nranks x (header + nranks records): 64 KiB per rank at 1024
// ranks, exchanged once per communicator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "transports/transport.h"
#include "transports/verbs/verbs_api.h"

namespace loom::transport::verbs {

constexpr uint32_t kWireMagic = 0x4C4F4D56;  // "LOMV"

struct RankHeader {
  uint32_t magic = kWireMagic;
  int32_t failed = 0;     // this rank's setup failed (its error says why)
  int32_t hasDevice = 0;  // it opened a device (it has verbs peers)
  uint32_t slots = 0;
  uint64_t chunkBytes = 0;
  uint16_t lid = 0;
  uint8_t portNum = 0;
  uint8_t ethernet = 0;
  int32_t mtu = 0;
  uint8_t gid[16] = {};
  char device[32] = {};
};

struct QpRecord {
  uint32_t qpn = 0;  // 0: no QP for that rank
  uint32_t psn = 0;
  uint64_t ringAddr = 0;  // where that rank writes its chunks to us
  uint32_t ringRkey = 0;
  uint32_t reserved = 0;
};

// One rank's slot of the table, viewed in place.
class SetupTable {
 public:
  explicit SetupTable(int nranks)
      : nranks_(nranks), bytes_(sizeof(RankHeader) + static_cast<size_t>(nranks) * sizeof(QpRecord)),
        data_(bytes_ * static_cast<size_t>(nranks)) {}
  size_t slotBytes() const { return bytes_; }
  void* data() { return data_.data(); }
  RankHeader& header(int rank) { return *reinterpret_cast<RankHeader*>(slot(rank)); }
  QpRecord& record(int rank, int peer) {
    return reinterpret_cast<QpRecord*>(slot(rank) + sizeof(RankHeader))[peer];
  }

 private:
  std::byte* slot(int rank) { return data_.data() + bytes_ * static_cast<size_t>(rank); }
  int nranks_;
  size_t bytes_;
  std::vector<std::byte> data_;
};

// The address of `theirs`'s queue pair `rec` as this rank (`mine`) connects
// to it: GID routing on RoCE, the smaller of the two ports' MTUs.
RemoteQp remoteQpOf(const RankHeader& mine, const RankHeader& theirs, const QpRecord& rec);

// Whether any pair of ranks may be served by verbs, decided from what every
// rank shares (the peer table and LOOM_TRANSPORT), so all ranks agree on
// joining the setup exchanges without a word.
bool verbsMayServeAnyPair(const SetupContext& ctx);

}  // namespace loom::transport::verbs
