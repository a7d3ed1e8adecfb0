// all_reduce_perf: every rank ends with the reduction of all ranks' buffers.
#include "perf/harness/loom_main.h"
#include "perf/harness/memory_bound.h"

namespace loom::perf {
namespace {

BufferLayout layout(size_t bytes, size_t typeSize, int /*nranks*/) {
  const size_t count = bytes / typeSize;
  return {count, count, count, 0, 0, count};
}

void fillInput(const DataContext& c, void* sendbuff, size_t count) { fillInputs(c.spec, c.rank, 0, sendbuff, count); }

int64_t countWrong(const DataContext& c, const void* recvbuff, size_t count) {
  return countWrongReduced(c.spec, 0, recvbuff, count);
}

double busBwFactor(int nranks) { return 2.0 * (nranks - 1) / nranks; }

loomResult_t run(const CollArgs& a, loomComm_t comm, loomStream_t stream) {
  return loomAllReduce(a.sendbuff, a.recvbuff, a.count, a.type, a.op, comm, stream);
}

}  // namespace
}  // namespace loom::perf

int main(int argc, char** argv) {
  using namespace loom::perf;
  static const LoomCollective kAllReduce{
      {"all_reduce_perf", /*usesOp=*/true, /*usesRoot=*/false, layout, fillInput, countWrong, busBwFactor,
       allReduceMemTrafficFactor},
      "loomAllReduce", run};
  return loomPerfMain(argc, argv, kAllReduce);
}
