#include "transports/ucx/ucx_handshake.h"

#include <algorithm>
#include <cstring>

#include "bootstrap/bootstrap.h"
#include "common/format.h"

namespace loom::transport::ucx {
namespace {

std::string rankList(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

}  // namespace

Status exchangeOutcome(const SetupContext& ctx, const Status& local, const char* step) {
  std::vector<int32_t> failed(static_cast<size_t>(ctx.nranks), 0);
  failed[static_cast<size_t>(ctx.rank)] = local.isOk() ? 0 : 1;
  Status gathered = ctx.bootstrap->allGather(failed.data(), sizeof(int32_t), ctx.wait);
  if (!local.isOk()) return local;
  if (!gathered.isOk()) return gathered.withContext(strprintf("ucx: exchange after %s: ", step));
  std::vector<int> who;
  for (int r = 0; r < ctx.nranks; ++r)
    if (failed[static_cast<size_t>(r)]) who.push_back(r);
  if (who.empty()) return Status::ok();
  return makeError(Code::kRemoteError, "ucx: %s failed on rank(s) %s (see their error)", step, rankList(who).c_str());
}

Result<std::vector<std::vector<uint8_t>>> exchangeAddresses(const SetupContext& ctx, const std::vector<uint8_t>& mine,
                                                            const Status& local) {
  std::vector<AddressHeader> headers(static_cast<size_t>(ctx.nranks));
  AddressHeader& own = headers[static_cast<size_t>(ctx.rank)];
  own.bytes = static_cast<uint32_t>(local.isOk() ? mine.size() : 0);
  own.failed = local.isOk() ? 0 : 1;
  Status gathered = ctx.bootstrap->allGather(headers.data(), sizeof(AddressHeader), ctx.wait);
  if (!local.isOk()) return local;
  if (!gathered.isOk()) return gathered.withContext("ucx: exchanging worker address lengths: ");
  std::vector<int> failed;
  size_t longest = 0;
  for (int r = 0; r < ctx.nranks; ++r) {
    if (headers[static_cast<size_t>(r)].failed) failed.push_back(r);
    longest = std::max<size_t>(longest, headers[static_cast<size_t>(r)].bytes);
  }
  if (!failed.empty())
    return makeError(Code::kRemoteError, "ucx: opening the UCX worker failed on rank(s) %s (see their error)",
                     rankList(failed).c_str());
  std::vector<std::vector<uint8_t>> addresses(static_cast<size_t>(ctx.nranks));
  if (longest == 0) return addresses;  // no rank has UCX peers
  std::vector<uint8_t> table(longest * static_cast<size_t>(ctx.nranks), 0);
  std::memcpy(table.data() + longest * static_cast<size_t>(ctx.rank), mine.data(), mine.size());
  Status s = ctx.bootstrap->allGather(table.data(), longest, ctx.wait);
  if (!s.isOk()) return s.withContext("ucx: exchanging worker addresses: ");
  for (int r = 0; r < ctx.nranks; ++r) {
    const uint8_t* at = table.data() + longest * static_cast<size_t>(r);
    addresses[static_cast<size_t>(r)].assign(at, at + headers[static_cast<size_t>(r)].bytes);
  }
  return addresses;
}

uint64_t jobTagHash(const std::string& jobTag) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : jobTag) h = (h ^ c) * 1099511628211ull;
  return h;
}

Hello makeHello(int self, int peer, size_t chunkBytes, int slots, uint64_t jobHash) {
  Hello h;
  h.magic = kHelloMagic;
  h.version = kHelloVersion;
  h.from = self;
  h.to = peer;
  h.chunkBytes = chunkBytes;
  h.slots = static_cast<uint32_t>(slots);
  h.jobHash = jobHash;
  return h;
}

std::string checkHello(const Hello& got, int self, int peer, size_t chunkBytes, int slots, uint64_t jobHash) {
  if (got.magic != kHelloMagic || got.version != kHelloVersion)
    return strprintf("rank %d sent a hello that is not Loom's (magic 0x%08x version %u, expected 0x%08x version %u)",
                     peer, got.magic, got.version, kHelloMagic, kHelloVersion);
  if (got.from != peer || got.to != self)
    return strprintf("the hello expected from rank %d to rank %d says it is from rank %d to rank %d", peer, self,
                     got.from, got.to);
  if (got.jobHash != jobHash)
    return strprintf("rank %d belongs to another communicator (job tag hash differs)", peer);
  if (got.chunkBytes != chunkBytes || got.slots != static_cast<uint32_t>(slots))
    return strprintf("rank %d uses %llu-byte chunks x %u slots, rank %d %zu x %d (LOOM_CHUNK_SIZE or "
                     "loomConfig_t.chunkBytes, and LOOM_SHM_SLOTS, must match on every rank)",
                     peer, static_cast<unsigned long long>(got.chunkBytes), got.slots, self, chunkBytes, slots);
  return "";
}

}  // namespace loom::transport::ucx
