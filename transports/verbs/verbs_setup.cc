#include "transports/verbs/verbs_setup.h"

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

}  // namespace loom::transport::verbs
