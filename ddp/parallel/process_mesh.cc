#include "ddp/parallel/process_mesh.h"

#include <stdexcept>

namespace loom::ddp {

std::string MeshShape::text() const {
  return "DP" + std::to_string(dp) + " x TP" + std::to_string(tp) + " x PP" + std::to_string(pp);
}

MeshCoords meshCoordsOf(int worldRank, const MeshShape& shape) {
  MeshCoords c;
  c.tp = worldRank % shape.tp;
  c.dp = (worldRank / shape.tp) % shape.dp;
  c.pp = worldRank / (shape.tp * shape.dp);
  return c;
}

int meshWorldRank(const MeshCoords& c, const MeshShape& shape) { return (c.pp * shape.dp + c.dp) * shape.tp + c.tp; }

ProcessMesh::ProcessMesh(loomComm_t world, MeshShape shape) : world_(world), shape_(shape) {
  int nranks = 0;
  if (!world || loomCommUserRank(world, &worldRank_) != loomSuccess || loomCommCount(world, &nranks) != loomSuccess)
    throw std::invalid_argument("ProcessMesh: world is not a valid communicator");
  if (shape.dp < 1 || shape.tp < 1 || shape.pp < 1 || shape.size() != nranks) {
    throw std::invalid_argument("ProcessMesh on rank " + std::to_string(worldRank_) + ": mesh " + shape.text() + " has " +
                                std::to_string(shape.size()) + " ranks but the world has " + std::to_string(nranks));
  }
  coords_ = meshCoordsOf(worldRank_, shape);
  try {
    // Colors name the group by the coordinates its members share; keys order
    // them by the coordinate that varies inside it.
    tp_ = split(coords_.pp * shape.dp + coords_.dp, coords_.tp, "tensor-parallel");
    dp_ = split(coords_.pp * shape.tp + coords_.tp, coords_.dp, "data-parallel");
    pp_ = split(coords_.dp * shape.tp + coords_.tp, coords_.pp, "pipeline");
  } catch (...) {
    for (loomComm_t c : {tp_, dp_, pp_}) {
      if (c) loomCommDestroy(c);
    }
    throw;
  }
}

ProcessMesh::~ProcessMesh() {
  for (loomComm_t c : {pp_, dp_, tp_}) {
    if (c) loomCommDestroy(c);
  }
}

loomComm_t ProcessMesh::split(int color, int key, const char* group) {
  loomComm_t out = nullptr;
  const loomResult_t r = loomCommSplit(world_, color, key, &out);
  if (r != loomSuccess || !out) {
    throw std::runtime_error(std::string("ProcessMesh: the ") + group + " split failed on rank " +
                             std::to_string(worldRank_) + ": " + loomGetErrorString(r) + ": " + loomGetLastError(world_));
  }
  return out;
}

}  // namespace loom::ddp
