// reduce_perf: the root ends with the reduction of all ranks' buffers.
#include "perf/harness/loom_main.h"

namespace loom::perf {
namespace {

BufferLayout layout(size_t bytes, size_t typeSize, int /*nranks*/) {
  const size_t count = bytes / typeSize;
  return {count, count, count, 0, 0, count};
}

void fillInput(const DataContext& c, void* sendbuff, size_t count) { fillInputs(c.spec, c.rank, 0, sendbuff, count); }

// recvbuff is only defined on the root.
int64_t countWrong(const DataContext& c, const void* recvbuff, size_t count) {
  return c.rank == c.root ? countWrongReduced(c.spec, 0, recvbuff, count) : 0;
}

double busBwFactor(int /*nranks*/) { return 1.0; }

loomResult_t run(const CollArgs& a, loomComm_t comm, loomStream_t stream) {
  return loomReduce(a.sendbuff, a.recvbuff, a.count, a.type, a.op, a.root, comm, stream);
}

}  // namespace
}  // namespace loom::perf

int main(int argc, char** argv) {
  using namespace loom::perf;
  static const LoomCollective kReduce{
      {"reduce_perf", /*usesOp=*/true, /*usesRoot=*/true, layout, fillInput, countWrong, busBwFactor},
      "loomReduce", run};
  return loomPerfMain(argc, argv, kReduce);
}
