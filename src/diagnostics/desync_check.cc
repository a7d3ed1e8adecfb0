#include "src/diagnostics/desync_check.h"

#include <cstring>
#include <vector>

#include "common/format.h"

namespace loom {
namespace {

constexpr uint64_t kDescriptorMagic = 0x314b4843'4d4f4f4cull;  // "LOOMCHK1" little-endian

// The descriptor on the wire: one chunk of exactly this size.
struct WireDescriptor {
  uint64_t magic;
  uint64_t seq;
  uint64_t count;
  int32_t kind;
  int32_t dtype;
  int32_t op;
  int32_t root;
  int32_t rank;
  int32_t reserved[5];
};
static_assert(sizeof(WireDescriptor) == 64, "descriptor must stay one 64-byte line");

WireDescriptor encode(const OpDescriptor& d, uint64_t seq, int rank) {
  WireDescriptor w;
  std::memset(&w, 0, sizeof w);
  w.magic = kDescriptorMagic;
  w.seq = seq;
  w.count = d.count;
  w.kind = static_cast<int32_t>(d.kind);
  w.dtype = static_cast<int32_t>(d.dtype);
  w.op = static_cast<int32_t>(d.op);
  w.root = d.root;
  w.rank = rank;
  return w;
}

// What one peer sent, decoded; `problem` is set when it is not a descriptor.
struct Received {
  bool arrived = false;
  OpDescriptor op;
  uint64_t seq = 0;
  std::string problem;
};

Received decode(const std::byte* data, size_t bytes, int from) {
  Received r;
  r.arrived = true;
  WireDescriptor w;
  if (bytes != sizeof w) {
    r.problem = strprintf("rank %d sent a %zu-byte chunk instead of a collective descriptor (is it running a "
                          "send/recv, or is LOOM_CHECK not set alike on every rank?)", from, bytes);
    return r;
  }
  std::memcpy(&w, data, sizeof w);
  if (w.magic != kDescriptorMagic || w.kind < 0 || w.kind >= kNumOpKinds || !isValidDataType(w.dtype) ||
      !isValidRedOp(w.op) || w.rank != from) {
    r.problem = strprintf("rank %d sent a chunk that is not a collective descriptor (is it running a send/recv?)",
                          from);
    return r;
  }
  r.op.kind = static_cast<OpKind>(w.kind);
  r.op.count = w.count;
  r.op.dtype = static_cast<DataType>(w.dtype);
  r.op.op = static_cast<RedOp>(w.op);
  r.op.root = w.root;
  r.seq = w.seq;
  return r;
}

}  // namespace

Status crossCheckCollective(const OpDescriptor& mine, uint64_t seq, algo::Links& links, int rank, int nranks,
                            const WaitContext& wait) {
  const auto n = static_cast<size_t>(nranks);
  const WireDescriptor wire = encode(mine, seq, rank);
  std::vector<char> sent(n, 0);
  std::vector<Received> got(n);
  sent[static_cast<size_t>(rank)] = 1;
  got[static_cast<size_t>(rank)].arrived = true;
  got[static_cast<size_t>(rank)].op = mine;
  got[static_cast<size_t>(rank)].seq = seq;
  size_t left = 2 * (n - 1);

  // One pass over every peer: moves whatever is ready, never waits.
  auto pass = [&] {
    bool moved = false;
    for (int p = 0; p < nranks; ++p) {
      const auto i = static_cast<size_t>(p);
      std::byte* slot = nullptr;
      if (!sent[i] && links.sendTo(p).tryAcquire(&slot)) {
        std::memcpy(slot, &wire, sizeof wire);
        links.sendTo(p).commit(sizeof wire);
        sent[i] = 1;
        --left;
        moved = true;
      }
      const std::byte* data = nullptr;
      size_t bytes = 0;
      if (!got[i].arrived && links.recvFrom(p).tryAcquire(&data, &bytes)) {
        got[i] = decode(data, bytes, p);
        links.recvFrom(p).release();
        --left;
        moved = true;
      }
    }
    return moved;
  };

  const std::string what = describeOp(mine, static_cast<int64_t>(seq));
  while (left > 0) {
    if (pass()) continue;
    Status st = waitUntil([&] { return pass() || left == 0; }, nullptr, wait, [] { return std::string(); });
    if (st.isOk()) continue;
    std::string missing, stalled, arrived;
    for (int p = 0; p < nranks; ++p) {
      const auto i = static_cast<size_t>(p);
      if (!got[i].arrived) missing += strprintf("%s%d", missing.empty() ? "" : ", ", p);
      else if (p != rank && got[i].problem.empty())
        arrived += strprintf("; rank %d: %s", p, describeOp(got[i].op, static_cast<int64_t>(got[i].seq)).c_str());
      if (!sent[i]) stalled += strprintf("%s%d", stalled.empty() ? "" : ", ", p);
    }
    if (st.code() != Code::kTimeout)  // aborted, or a peer died
      return st.withContext(strprintf("LOOM_CHECK on rank %d, exchanging collective descriptors for %s: ", rank,
                                      what.c_str()));
    std::string msg = strprintf("LOOM_CHECK on rank %d: timed out (LOOM_TIMEOUT) exchanging collective descriptors "
                                "for %s: ", rank, what.c_str());
    if (!missing.empty())
      msg += strprintf("rank(s) %s did not show up (they called no collective, or are stuck before it)",
                       missing.c_str());
    else
      msg += strprintf("rank(s) %s did not take this rank's descriptor", stalled.c_str());
    msg += strprintf("; rank %d: %s%s", rank, what.c_str(), arrived.c_str());
    return {Code::kTimeout, msg};
  }

  bool same = true;
  for (const auto& r : got) {
    if (!r.problem.empty()) return {Code::kRemoteError, strprintf("LOOM_CHECK on rank %d: %s", rank, r.problem.c_str())};
    same = same && r.seq == seq && r.op.sameCall(mine);
  }
  if (same) return Status::ok();
  std::string msg = "LOOM_CHECK: ranks called different collectives: ";
  for (int p = 0; p < nranks; ++p) {
    const auto& r = got[static_cast<size_t>(p)];
    msg += strprintf("%srank %d: %s", p ? "; " : "", p, describeOp(r.op, static_cast<int64_t>(r.seq)).c_str());
  }
  return {Code::kInvalidUsage, msg};
}

}  // namespace loom
