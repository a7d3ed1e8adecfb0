// The data-movement steps every algorithm is written in (NCCL's primitives):
// each moves one piece of at most AlgoContext::chunkBytes through one FIFO
// slot, reducing straight out of the receive slot and straight into the send
// slot so that no step makes an extra copy.
#pragma once

#include <cstddef>
#include <vector>

#include "algorithms/algorithm.h"

namespace loom::algo {

// Element type and op of the current collective, plus its rank count (for avg).
struct Reduction {
  DataType dtype;
  RedOp op;
  int nranks;
};

class Steps {
 public:
  Steps(const AlgoContext& ctx, Reduction red) : ctx_(ctx), red_(red) {}

  // send: slot <- src
  Status send(int peer, const void* src, size_t count);
  // recv: dst <- slot
  Status recv(int peer, void* dst, size_t count);
  // slot(to) <- slot(from) (op) local
  Status recvReduceSend(int from, int to, const void* local, size_t count);
  // inout <- slot(from) (op) inout, or inout (op) slot(from) when
  // !receivedFirst (no finalize). Partners pass opposite orders so both
  // compute f(lower rank's data, higher rank's data), bit for bit the same
  // even where an op is not (min/max of -0 and +0, NaN payloads).
  Status recvReduceInPlace(int from, void* inout, size_t count, bool receivedFirst);
  // dst <- final(slot(from) (op) local): the last reduction of a collective.
  Status recvReduceFinal(int from, const void* local, void* dst, size_t count);
  // dst <- final(slot(from) (op) local); slot(to) <- dst
  Status recvReduceFinalSend(int from, int to, const void* local, void* dst, size_t count);
  // dst <- slot(from); slot(to) <- slot(from)
  Status recvCopySend(int from, int to, void* dst, size_t count);
  // dst <- slot(from); slot(to0) <- slot(from); slot(to1) <- slot(from):
  // every copy reads the received slot, none reads dst back.
  Status recvCopySendTwo(int from, int to0, int to1, void* dst, size_t count);
  // Two inputs at once (tree nodes with two children), reduced straight from
  // both receive slots so that neither needs a scratch buffer:
  // slot(to) <- slot(from1) (op) (slot(from0) (op) local)
  Status recv2ReduceSend(int from0, int from1, int to, const void* local, size_t count);
  // dst <- final(slot(from1) (op) (slot(from0) (op) local)); dst may alias local exactly.
  Status recv2ReduceFinal(int from0, int from1, const void* local, void* dst, size_t count);

  size_t elemSize() const { return dataTypeSize(red_.dtype); }
  // recv() and recvCopySend[Two]() write `dst` with non-temporal stores
  // (kernels/stream_copy.h): for outputs that this rank does not read again
  // in the collective and that are too large to stay in its cache.
  void streamOutputs(bool on) { streamOutputs_ = on; }
  // recvReduceFinal() and recv2ReduceFinal() reduce into a chunk-sized
  // scratch buffer, which stays in cache, and write `dst` from it with
  // non-temporal stores: for large final results that nothing in the
  // collective reads back (reduce-scatter, reduce; not a tree all-reduce's
  // root, which forwards its result).
  void streamReducedOutputs(bool on) { streamReduced_ = on; }

 private:
  // The next chunk from each of two peers, both checked to hold `count` elements.
  Status acquireTwo(int from0, int from1, size_t count, const std::byte** data0, const std::byte** data1);
  // One more chunk moved: the flight recorder's progress.
  void advanced() const { countProgress(ctx_, 1); }
  const AlgoContext& ctx_;
  Reduction red_;
  // A buffer for one chunk of reduced results (streamReducedOutputs).
  std::byte* scratch(size_t bytes);
  bool streamOutputs_ = false;
  bool streamReduced_ = false;
  std::vector<std::byte> scratch_;
};

inline size_t divUp(size_t a, size_t b) { return (a + b - 1) / b; }

// What every ring or chain algorithm derives from its arguments first.
struct RingView {
  RingView(const CollArgs& args, const AlgoContext& ctx)
      : n(ctx.nranks),
        rank(ctx.rank),
        next((ctx.rank + 1) % ctx.nranks),
        prev((ctx.rank + ctx.nranks - 1) % ctx.nranks),
        elemSize(dataTypeSize(args.dtype)),
        chunkElems(ctx.chunkBytes / dataTypeSize(args.dtype)),
        in(static_cast<const std::byte*>(args.sendbuf)),
        out(static_cast<std::byte*>(args.recvbuf)) {}

  const int n, rank, next, prev;
  const size_t elemSize;
  const size_t chunkElems;  // elements per pipelined piece
  const std::byte* const in;
  std::byte* const out;
};

// Elements of args.dtype per pipelined piece; an error naming `algorithm`
// and the rank when ctx.chunkBytes cannot hold one element.
Status chunkElemsFor(const CollArgs& args, const AlgoContext& ctx, const char* algorithm, size_t* elems);

// A reduction over one rank is its own input: recvbuf <- finalize(sendbuf).
Status reduceOnOneRank(const CollArgs& args);

}  // namespace loom::algo
