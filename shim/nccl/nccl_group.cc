#include "shim/nccl/nccl_group.h"

#include <vector>

#include <loom/loom.h>

#include "shim/nccl/errors.h"

namespace loom::nccl_shim {
namespace {

struct Deferred {
  std::function<void()> beforeStart;
  std::unique_ptr<unsigned char[]> keepAlive;
};

// Groups are per thread, as in NCCL and Loom.
thread_local int depth = 0;
thread_local std::vector<Deferred> deferred;

}  // namespace

bool inGroup() { return depth > 0; }

void deferToGroupEnd(std::function<void()> beforeStart, std::unique_ptr<unsigned char[]> keepAlive) {
  deferred.push_back({std::move(beforeStart), std::move(keepAlive)});
}

ncclResult_t groupStart() {
  const loomResult_t r = loomGroupStart();
  if (r == loomSuccess) ++depth;
  return fromLoom(r);
}

ncclResult_t groupEnd() {
  if (depth == 0) return fromLoom(loomGroupEnd());  // Loom reports the unmatched end
  if (--depth > 0) return fromLoom(loomGroupEnd());
  std::vector<Deferred> work = std::move(deferred);
  deferred.clear();
  for (Deferred& d : work) d.beforeStart();
  const loomResult_t r = loomGroupEnd();  // host data: returns when the group's work is done
  if (r != loomSuccess) {
    // A failed group end may return before waiting for work it already
    // started, which could still read the scratch copies: leak them rather
    // than free memory in use (a failed group is rare and the copies small
    // next to the job).
    for (Deferred& d : work) (void)d.keepAlive.release();
  }
  return fromLoom(r);
}

}  // namespace loom::nccl_shim
