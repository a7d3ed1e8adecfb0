#include "transports/verbs/verbs_setup.h"

#include <algorithm>
#include <cstring>

namespace loom::transport::verbs {

static_assert(sizeof(RankHeader) % 8 == 0 && sizeof(QpRecord) % 8 == 0, "records stay 8-byte aligned in the table");

bool verbsMayServeAnyPair(const SetupContext& ctx) {
  if (ctx.nranks < 2 || !ctx.config) return false;
  if (ctx.config->transport == "ib") return true;
  if (!ctx.config->transport.empty() || !ctx.peers) return false;
  const auto& table = *ctx.peers;
  for (size_t r = 1; r < table.size(); ++r)
    if (table[r].hostHash != table[0].hostHash) return true;
  return false;
}

RemoteQp remoteQpOf(const RankHeader& mine, const RankHeader& theirs, const QpRecord& rec) {
  RemoteQp remote;
  remote.qpn = rec.qpn;
  remote.psn = rec.psn;
  remote.lid = theirs.lid;
  std::memcpy(remote.gid.data(), theirs.gid, sizeof theirs.gid);
  remote.useGid = theirs.ethernet != 0;
  remote.mtu = std::min(theirs.mtu, mine.mtu);
  return remote;
}

}  // namespace loom::transport::verbs
