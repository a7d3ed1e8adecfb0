// all_gather_perf: rank r contributes sendcount elements; every rank receives
// all of them, rank r's at recvbuff + r*sendcount.
#include "perf/harness/datatypes.h"
#include "perf/harness/loom_main.h"

namespace loom::perf {
namespace {

// As nccl-tests: the count is rounded down to a multiple of nranks and the
// size column is the whole receive buffer.
BufferLayout layout(size_t bytes, size_t typeSize, int nranks) {
  const size_t sendCount = bytes / typeSize / nranks;
  const size_t recvCount = sendCount * nranks;
  return {sendCount, recvCount, sendCount, /*sendInPlaceOffset=*/sendCount, 0, recvCount};
}

void fillInput(const DataContext& c, void* sendbuff, size_t count) { fillInputs(c.spec, c.rank, 0, sendbuff, count); }

int64_t countWrong(const DataContext& c, const void* recvbuff, size_t recvCount) {
  const size_t part = recvCount / c.spec.nranks;
  const size_t bytes = part * typeSize(c.spec.type);
  int64_t wrong = 0;
  for (int r = 0; r < c.spec.nranks; ++r)
    wrong += countWrongCopied(c.spec, r, 0, static_cast<const char*>(recvbuff) + r * bytes, part);
  return wrong;
}

double busBwFactor(int nranks) { return static_cast<double>(nranks - 1) / nranks; }

loomResult_t run(const CollArgs& a, loomComm_t comm, loomStream_t stream) {
  return loomAllGather(a.sendbuff, a.recvbuff, a.count, a.type, comm, stream);
}

}  // namespace
}  // namespace loom::perf

int main(int argc, char** argv) {
  using namespace loom::perf;
  static const LoomCollective kAllGather{
      {"all_gather_perf", /*usesOp=*/false, /*usesRoot=*/false, layout, fillInput, countWrong, busBwFactor},
      "loomAllGather", run};
  return loomPerfMain(argc, argv, kAllGather);
}
