#include "src/device/engine_across_hosts.h"

#include <algorithm>

#include "common/format.h"

namespace loom::cuda {
namespace {

using Bytes = unsigned char;

// One call's view of the layout and its buffers.
class Plan {
 public:
  Plan(const algo::CollArgs& args, const AcrossHosts& ctx)
      : args_(args), ctx_(ctx), hosts_(*ctx.hosts), es_(dataTypeSize(args.dtype)) {
    H_ = hosts_.size();
    L_ = hosts_[0].size();
    for (size_t h = 0; h < H_; ++h)
      for (size_t j = 0; j < L_; ++j)
        if (hosts_[h][j] == ctx.rank) host_ = h, local_ = j;
    where_ = strprintf("%s across hosts on rank %d: ", algo::collTypeName(args.type), ctx.rank);
  }

  Status run() {
    if (args_.count == 0) return Status::ok();
    switch (args_.type) {
      case algo::CollType::kAllReduce: return allReduce();
      case algo::CollType::kReduceScatter: return reduceScatter();
      case algo::CollType::kAllGather: return allGather();
      case algo::CollType::kBroadcast: return broadcast();
      case algo::CollType::kReduce: return reduce();
    }
    return makeError(Code::kInternalError, "%sunknown collective", where_.c_str());
  }

 private:
  // Rail j: the rank with local index j on every host, in host order.
  std::vector<int> rail(size_t j) const {
    std::vector<int> ranks;
    for (const auto& h : hosts_) ranks.push_back(h[j]);
    return ranks;
  }
  // The engine runs sums for an average: the rail step divides, once.
  RedOp engineOp() const { return args_.op == RedOp::kAvg ? RedOp::kSum : args_.op; }

  // The call's arguments for one step of it.
  algo::CollArgs step(algo::CollType type, const void* from, void* to, size_t count, int root) const {
    algo::CollArgs a = args_;
    a.type = type;
    a.sendbuf = from;
    a.recvbuf = to;
    a.count = count;
    a.root = root;
    return a;
  }
  Status engine(algo::CollType type, const void* from, void* to, size_t count, int root = 0) {
    algo::CollArgs a = step(type, from, to, count, root);
    a.op = engineOp();
    return ctx_.engine->enqueue(a, nullptr).withContext(where_);
  }
  Status engineDone() {
    LOOM_TRY(ctx_.engine->waitIdle(ctx_.wait).withContext(where_));
    return ctx_.engine->kernelError();
  }
  Status copy(void* to, const void* from, size_t bytes) {
    if (bytes == 0) return Status::ok();
    return ctx_.copies->copy2D(to, bytes, from, bytes, bytes, 1).withContext(where_);
  }
  Status copiesDone() { return ctx_.copies->finish(ctx_.wait).withContext(where_); }
  // Between a packed run of `ranks`' blocks (block i at i x blockBytes) and
  // their places in a buffer of per-rank blocks (rank r's at r x blockBytes):
  // one strided copy when the ranks are evenly spaced (hosts blocked or
  // interleaved), else one copy per block.
  Status pack(Bytes* packed, const Bytes* spread, const std::vector<int>& ranks, size_t blockBytes) {
    return moveBlocks(packed, spread, ranks, blockBytes, true);
  }
  Status unpack(Bytes* spread, const Bytes* packed, const std::vector<int>& ranks, size_t blockBytes) {
    return moveBlocks(spread, packed, ranks, blockBytes, false);
  }
  Status moveBlocks(Bytes* to, const Bytes* from, const std::vector<int>& ranks, size_t blockBytes, bool toPacked) {
    if (blockBytes == 0) return Status::ok();
    const int step = ranks.size() > 1 ? ranks[1] - ranks[0] : 1;
    bool even = step > 0;
    for (size_t i = 1; even && i < ranks.size(); ++i) even = ranks[i] - ranks[i - 1] == step;
    const size_t spreadOffset = static_cast<size_t>(ranks[0]) * blockBytes;
    if (even) {
      const size_t pitch = static_cast<size_t>(step) * blockBytes;
      return (toPacked ? ctx_.copies->copy2D(to, blockBytes, from + spreadOffset, pitch, blockBytes, ranks.size())
                       : ctx_.copies->copy2D(to + spreadOffset, pitch, from, blockBytes, blockBytes, ranks.size()))
          .withContext(where_);
    }
    for (size_t i = 0; i < ranks.size(); ++i) {
      const size_t place = static_cast<size_t>(ranks[i]) * blockBytes, packedAt = i * blockBytes;
      LOOM_TRY(copy(to + (toPacked ? packedAt : place), from + (toPacked ? place : packedAt), blockBytes));
    }
    return Status::ok();
  }
  Status onRail(algo::CollType type, const void* from, void* to, size_t count, int root = 0) {
    return ctx_.runOnRail(step(type, from, to, count, root), rail(local_)).withContext(where_);
  }
  Result<Bytes*> staging(size_t bytes) {
    auto got = ctx_.staging(bytes);
    LOOM_TRY(got.status());
    return static_cast<Bytes*>(got.value());
  }
  Result<Bytes*> scratch(size_t bytes) {
    auto got = ctx_.engine->scratch(bytes);
    LOOM_TRY(got.status().withContext(where_));
    return static_cast<Bytes*>(got.value());
  }
  const Bytes* send() const { return static_cast<const Bytes*>(args_.sendbuf); }
  Bytes* recv() const { return static_cast<Bytes*>(args_.recvbuf); }

  // Shard j: count / L elements; the count % L past the shards go with every one.
  size_t shard() const { return args_.count / L_; }
  size_t tail() const { return args_.count % L_; }
  // recv's shard j and its tail, packed into `stage` (shard, then tail) and
  // back: what a rank moves over its rail.
  Bytes* myShard() const { return recv() + local_ * shard() * es_; }
  Bytes* myTail() const { return recv() + L_ * shard() * es_; }
  Status stageShardAndTail(Bytes* stage) {
    LOOM_TRY(copy(stage, myShard(), shard() * es_));
    LOOM_TRY(copy(stage + shard() * es_, myTail(), tail() * es_));
    return copiesDone();
  }
  Status unstageShardAndTail(const Bytes* stage) {
    LOOM_TRY(copy(myShard(), stage, shard() * es_));
    LOOM_TRY(copy(myTail(), stage + shard() * es_, tail() * es_));
    return copiesDone();
  }

  Status allReduce() {
    const size_t s = shard(), t = tail();
    if (s) LOOM_TRY(engine(algo::CollType::kReduceScatter, send(), myShard(), s));
    if (t) LOOM_TRY(engine(algo::CollType::kAllReduce, send() + L_ * s * es_, myTail(), t));
    LOOM_TRY(engineDone());
    auto host = staging((s + t) * es_);
    LOOM_TRY(host.status());
    Bytes* const stage = host.value();
    LOOM_TRY(stageShardAndTail(stage));
    LOOM_TRY(onRail(algo::CollType::kAllReduce, stage, stage, s + t));
    LOOM_TRY(unstageShardAndTail(stage));
    if (s) LOOM_TRY(engine(algo::CollType::kAllGather, myShard(), recv(), s));
    return engineDone();
  }

  Status reduceScatter() {
    // Scratch holds the L columns; the engine leaves column j reduced over
    // the host, the rail reduces block h0 of it over the hosts.
    const size_t block = args_.count * es_, column = H_ * block;
    auto room = scratch(L_ * column);
    LOOM_TRY(room.status());
    Bytes* const columns = room.value();
    for (size_t j = 0; j < L_; ++j)
      LOOM_TRY(pack(columns + j * column, send(), rail(j), block));
    LOOM_TRY(copiesDone());
    LOOM_TRY(engine(algo::CollType::kReduceScatter, columns, columns + local_ * column, H_ * args_.count));
    LOOM_TRY(engineDone());
    auto host = staging(column);
    LOOM_TRY(host.status());
    Bytes* const stage = host.value();
    LOOM_TRY(copy(stage, columns + local_ * column, column));
    LOOM_TRY(copiesDone());
    LOOM_TRY(onRail(algo::CollType::kReduceScatter, stage, stage + host_ * block, args_.count));
    LOOM_TRY(copy(recv(), stage + host_ * block, block));
    return copiesDone();
  }

  Status allGather() {
    // The rail gathers column j in host memory; the engine gathers the
    // columns in scratch; they are unpacked into rank order.
    const size_t block = args_.count * es_, column = H_ * block;
    auto host = staging(column);
    LOOM_TRY(host.status());
    Bytes* const stage = host.value();
    LOOM_TRY(copy(stage + host_ * block, send(), block));
    LOOM_TRY(copiesDone());
    LOOM_TRY(onRail(algo::CollType::kAllGather, stage + host_ * block, stage, args_.count));
    auto room = scratch(L_ * column);
    LOOM_TRY(room.status());
    Bytes* const columns = room.value();
    LOOM_TRY(copy(columns + local_ * column, stage, column));
    LOOM_TRY(copiesDone());
    LOOM_TRY(engine(algo::CollType::kAllGather, columns + local_ * column, columns, H_ * args_.count));
    LOOM_TRY(engineDone());
    for (size_t j = 0; j < L_; ++j) LOOM_TRY(unpack(recv(), columns + j * column, rail(j), block));
    return copiesDone();
  }

  // Where the root is: its host index and local index.
  void locateRoot(size_t* host, size_t* local) const {
    for (size_t h = 0; h < H_; ++h)
      for (size_t j = 0; j < L_; ++j)
        if (hosts_[h][j] == args_.root) *host = h, *local = j;
  }

  Status broadcast() {
    size_t rootHost = 0, rootLocal = 0;
    locateRoot(&rootHost, &rootLocal);
    const size_t s = shard(), t = tail();
    auto host = staging((s + t) * es_);
    LOOM_TRY(host.status());
    Bytes* const stage = host.value();
    if (host_ == rootHost) {
      LOOM_TRY(engine(algo::CollType::kBroadcast, send(), recv(), args_.count, static_cast<int>(rootLocal)));
      LOOM_TRY(engineDone());
      LOOM_TRY(stageShardAndTail(stage));
    }
    LOOM_TRY(onRail(algo::CollType::kBroadcast, stage, stage, s + t, static_cast<int>(rootHost)));
    if (host_ == rootHost) return Status::ok();
    LOOM_TRY(unstageShardAndTail(stage));
    if (s) LOOM_TRY(engine(algo::CollType::kAllGather, myShard(), recv(), s));
    return engineDone();
  }

  Status reduce() {
    size_t rootHost = 0, rootLocal = 0;
    locateRoot(&rootHost, &rootLocal);
    const size_t s = shard(), t = tail(), piece = (s + t) * es_;
    // recvbuf is the root's alone: the host's partial shard waits in scratch.
    auto room = scratch(piece);
    LOOM_TRY(room.status());
    Bytes* const partial = room.value();
    if (s) LOOM_TRY(engine(algo::CollType::kReduceScatter, send(), partial, s));
    if (t) LOOM_TRY(engine(algo::CollType::kAllReduce, send() + L_ * s * es_, partial + s * es_, t));
    LOOM_TRY(engineDone());
    auto host = staging(piece);
    LOOM_TRY(host.status());
    Bytes* const stage = host.value();
    LOOM_TRY(copy(stage, partial, piece));
    LOOM_TRY(copiesDone());
    LOOM_TRY(onRail(algo::CollType::kReduce, stage, stage, s + t, static_cast<int>(rootHost)));
    if (host_ != rootHost) return Status::ok();
    // The root's host: every local rank holds its shard's result (and the
    // tail's); the root gathers the shards through its engine.
    LOOM_TRY(copy(partial, stage, piece));
    LOOM_TRY(copiesDone());
    const int root = static_cast<int>(rootLocal);
    std::vector<algo::P2POp> ops;
    if (local_ == rootLocal) {
      LOOM_TRY(copy(recv() + local_ * s * es_, partial, s * es_));
      LOOM_TRY(copy(recv() + L_ * s * es_, partial + s * es_, t * es_));
      LOOM_TRY(copiesDone());
      for (size_t j = 0; j < L_; ++j)
        if (j != rootLocal) ops.push_back(algo::P2POp::recv(static_cast<int>(j), recv() + j * s * es_, s * es_));
    } else {
      ops.push_back(algo::P2POp::send(root, partial, s * es_));
    }
    if (s) LOOM_TRY(ctx_.engine->enqueueP2P(ops, nullptr).withContext(where_));
    return engineDone();
  }

  const algo::CollArgs& args_;
  const AcrossHosts& ctx_;
  const std::vector<std::vector<int>>& hosts_;
  const size_t es_;
  size_t H_ = 0, L_ = 0, host_ = 0, local_ = 0;
  std::string where_;
};

}  // namespace

bool acrossHostsLayoutFits(const std::vector<std::vector<int>>& hosts, int rank) {
  if (hosts.size() < 2 || hosts[0].empty()) return false;
  bool found = false;
  for (const auto& h : hosts) {
    if (h.size() != hosts[0].size()) return false;
    found = found || std::find(h.begin(), h.end(), rank) != h.end();
  }
  return found;
}

Status runAcrossHosts(const algo::CollArgs& args, const AcrossHosts& ctx) {
  return Plan(args, ctx).run();
}

}  // namespace loom::cuda
