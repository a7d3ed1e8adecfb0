// Host emulation of launchReduceCopy: same plan, same per-thread body, the
// grid walked block by block, thread by thread.
#include "kernels/cuda/reduce_copy_emulation.h"

#include "kernels/cuda/reduce_copy_core.h"

namespace loom::kernels::cuda {

const char* emulateReduceCopy(const ReduceCopyArgs& args, LaunchShape shape) {
  if (const char* error = reduceCopyArgsError(args)) return error;
  if (const char* error = launchShapeError(shape)) return error;
  if (args.count == 0) return nullptr;  // the launcher launches nothing either
  if (shape.blocks == 0) shape = chooseLaunchShape(args);
  const ReduceCopyParams params = planReduceCopy(args);
  const size_t threads = static_cast<size_t>(shape.blocks) * shape.threadsPerBlock;
  dispatchReduceCopy(args.type, args.op, args.nsrcs, [&]<class T, RedOp kOp>() {
    for (unsigned block = 0; block < shape.blocks; ++block)
      for (unsigned thread = 0; thread < shape.threadsPerBlock; ++thread)
        reduceCopyThread<T, kOp>(params, static_cast<size_t>(block) * shape.threadsPerBlock + thread, threads);
  });
  return nullptr;
}

}  // namespace loom::kernels::cuda
