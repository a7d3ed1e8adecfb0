// reduce_scatter_perf: every rank sends nranks*recvcount elements; rank r
// receives block r of the reduction.
#include "perf/harness/loom_main.h"

namespace loom::perf {
namespace {

// As nccl-tests: the count is rounded down to a multiple of nranks and the
// size column is the whole send buffer.
BufferLayout layout(size_t bytes, size_t typeSize, int nranks) {
  const size_t recvCount = bytes / typeSize / nranks;
  const size_t sendCount = recvCount * nranks;
  return {sendCount, recvCount, recvCount, 0, /*recvInPlaceOffset=*/recvCount, sendCount};
}

void fillInput(const DataContext& c, void* sendbuff, size_t count) { fillInputs(c.spec, c.rank, 0, sendbuff, count); }

int64_t countWrong(const DataContext& c, const void* recvbuff, size_t recvCount) {
  return countWrongReduced(c.spec, static_cast<size_t>(c.rank) * recvCount, recvbuff, recvCount);
}

double busBwFactor(int nranks) { return static_cast<double>(nranks - 1) / nranks; }

loomResult_t run(const CollArgs& a, loomComm_t comm, loomStream_t stream) {
  return loomReduceScatter(a.sendbuff, a.recvbuff, a.count, a.type, a.op, comm, stream);
}

}  // namespace
}  // namespace loom::perf

int main(int argc, char** argv) {
  using namespace loom::perf;
  static const LoomCollective kReduceScatter{
      {"reduce_scatter_perf", /*usesOp=*/true, /*usesRoot=*/false, layout, fillInput, countWrong, busBwFactor},
      "loomReduceScatter", run};
  return loomPerfMain(argc, argv, kReduceScatter);
}
