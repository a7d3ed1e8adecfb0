// sendrecv_perf: every rank sends its buffer to rank+1 and receives rank-1's
// (one group of loomSend + loomRecv), as nccl-tests' sendrecv_perf. Bus
// bandwidth equals algorithm bandwidth: each byte crosses one link once.
#include "perf/harness/loom_main.h"

namespace loom::perf {
namespace {

// In place, send and receive share one buffer: the received bytes replace
// the sent ones (Loom reads each byte before overwriting it).
BufferLayout layout(size_t bytes, size_t typeSize, int /*nranks*/) {
  const size_t count = bytes / typeSize;
  return {count, count, count, 0, 0, count};
}

void fillInput(const DataContext& c, void* sendbuff, size_t count) { fillInputs(c.spec, c.rank, 0, sendbuff, count); }

int64_t countWrong(const DataContext& c, const void* recvbuff, size_t count) {
  const int from = (c.rank - 1 + c.spec.nranks) % c.spec.nranks;
  return countWrongCopied(c.spec, from, 0, recvbuff, count);
}

double busBwFactor(int /*nranks*/) { return 1.0; }

loomResult_t run(const CollArgs& a, loomComm_t comm, loomStream_t stream) {
  int rank = 0, nranks = 1;
  loomResult_t r = loomCommUserRank(comm, &rank);
  if (r == loomSuccess) r = loomCommCount(comm, &nranks);
  if (r != loomSuccess) return r;
  r = loomGroupStart();
  if (r != loomSuccess) return r;
  // Both calls are made whatever happens, so that GroupEnd closes the group.
  const loomResult_t sent = loomSend(a.sendbuff, a.count, a.type, (rank + 1) % nranks, comm, stream);
  const loomResult_t received = loomRecv(a.recvbuff, a.count, a.type, (rank - 1 + nranks) % nranks, comm, stream);
  r = loomGroupEnd();
  return sent != loomSuccess ? sent : received != loomSuccess ? received : r;
}

}  // namespace
}  // namespace loom::perf

int main(int argc, char** argv) {
  using namespace loom::perf;
  static const LoomCollective kSendRecv{
      {"sendrecv_perf", /*usesOp=*/false, /*usesRoot=*/false, layout, fillInput, countWrong, busBwFactor},
      "loomSend/loomRecv", run};
  return loomPerfMain(argc, argv, kSendRecv);
}
