#include "examples/demo_model.h"

#include <stdexcept>
#include <string>

namespace loom::demo {

std::unique_ptr<DemoModel> makeDemoModel(const DemoOptions& o, loomComm_t world, const std::vector<size_t>& layers) {
  int size = 0;
  loomCommCount(world, &size);
  const int modelParallel = o.tp * o.pp;
  if (size % modelParallel != 0) {
    throw std::invalid_argument("--tp " + std::to_string(o.tp) + " x --pp " + std::to_string(o.pp) + " = " +
                                std::to_string(modelParallel) + " does not divide the " + std::to_string(size) + " ranks");
  }
  if (o.zero == 3 && modelParallel > 1) {
    throw std::invalid_argument("--zero 3 shards the whole model over all ranks; with --tp or --pp use --zero 1 or 2");
  }
  if (o.pp > 1) return makePipelineModel(o, world, layers);  // stages tensor-parallel too with --tp
  if (o.tp > 1) return makeTensorParallelModel(o, world, layers);
  if (o.zero == 3) return makeShardedModel(o, world, layers);
  return makeReplicatedModel(o, world, layers);
}

}  // namespace loom::demo
