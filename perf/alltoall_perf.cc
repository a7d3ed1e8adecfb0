// alltoall_perf: block j of every rank's sendbuff goes to rank j, landing at
// block (sender) of its recvbuff, as nccl-tests' alltoall_perf. The size
// column is the whole buffer (nranks blocks); a rank keeps 1/nranks of its
// data, so bus bandwidth is algorithm bandwidth x (n-1)/n.
#include "perf/harness/datatypes.h"
#include "perf/harness/loom_main.h"

namespace loom::perf {
namespace {

// The count is rounded down to a multiple of nranks; in place, send and
// receive share one buffer (Loom reads each block before overwriting it).
BufferLayout layout(size_t bytes, size_t typeSize, int nranks) {
  const size_t block = bytes / typeSize / nranks;
  const size_t total = block * nranks;
  return {total, total, block, 0, 0, total};
}

// Rank r's input element i (the global index of block j, offset k) goes to
// rank j; so rank q receives, in block r, elements r's indices q*block + k.
void fillInput(const DataContext& c, void* sendbuff, size_t count) { fillInputs(c.spec, c.rank, 0, sendbuff, count); }

int64_t countWrong(const DataContext& c, const void* recvbuff, size_t count) {
  const size_t block = count / c.spec.nranks;
  const size_t bytes = block * typeSize(c.spec.type);
  int64_t wrong = 0;
  for (int from = 0; from < c.spec.nranks; ++from)
    wrong += countWrongCopied(c.spec, from, static_cast<size_t>(c.rank) * block,
                              static_cast<const char*>(recvbuff) + from * bytes, block);
  return wrong;
}

double busBwFactor(int nranks) { return static_cast<double>(nranks - 1) / nranks; }

loomResult_t run(const CollArgs& a, loomComm_t comm, loomStream_t stream) {
  return loomAllToAll(a.sendbuff, a.recvbuff, a.count, a.type, comm, stream);
}

}  // namespace
}  // namespace loom::perf

int main(int argc, char** argv) {
  using namespace loom::perf;
  static const LoomCollective kAllToAll{
      {"alltoall_perf", /*usesOp=*/false, /*usesRoot=*/false, layout, fillInput, countWrong, busBwFactor},
      "loomAllToAll", run};
  return loomPerfMain(argc, argv, kAllToAll);
}
