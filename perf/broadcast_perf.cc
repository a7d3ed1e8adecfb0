// broadcast_perf: the root's buffer is copied to every rank.
#include "perf/harness/loom_main.h"

namespace loom::perf {
namespace {

BufferLayout layout(size_t bytes, size_t typeSize, int /*nranks*/) {
  const size_t count = bytes / typeSize;
  return {count, count, count, 0, 0, count};
}

// Only the root's input is read; the other ranks' send buffers stay as they are.
void fillInput(const DataContext& c, void* sendbuff, size_t count) {
  if (c.rank == c.root) fillInputs(c.spec, c.rank, 0, sendbuff, count);
}

int64_t countWrong(const DataContext& c, const void* recvbuff, size_t count) {
  return countWrongCopied(c.spec, c.root, 0, recvbuff, count);
}

double busBwFactor(int /*nranks*/) { return 1.0; }

loomResult_t run(const CollArgs& a, loomComm_t comm, loomStream_t stream) {
  return loomBroadcast(a.sendbuff, a.recvbuff, a.count, a.type, a.root, comm, stream);
}

}  // namespace
}  // namespace loom::perf

int main(int argc, char** argv) {
  using namespace loom::perf;
  static const LoomCollective kBroadcast{
      {"broadcast_perf", /*usesOp=*/false, /*usesRoot=*/true, layout, fillInput, countWrong, busBwFactor},
      "loomBroadcast", run};
  return loomPerfMain(argc, argv, kBroadcast);
}
