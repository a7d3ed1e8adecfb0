// A DP x TP x PP process mesh cut from one communicator with loomCommSplit
// (Megatron's layout): world rank = (pp * DP + dp) * TP + tp, so the ranks
// of a tensor-parallel group are neighbours (the most traffic, the closest
// ranks), then data-parallel replicas, then pipeline stages.
//
//   ProcessMesh mesh(world, {.dp = 2, .tp = 2, .pp = 2});   // 8 ranks
//   mesh.tp()  : the T ranks that share this rank's (dp, pp)
//   mesh.dp()  : the D ranks that share its (tp, pp): DDP / ZeRO run here
//   mesh.pp()  : the P ranks that share its (dp, tp), ordered by stage
//
// Construction is collective over `world` (three splits); a group of size 1
// still gets its own one-rank communicator. The sub-communicators are owned
// by the mesh and destroyed with it; `world` stays the caller's.
#pragma once

#include <string>

#include "loom/loom.h"

namespace loom::ddp {

struct MeshShape {
  int dp = 1;
  int tp = 1;
  int pp = 1;
  int size() const { return dp * tp * pp; }
  std::string text() const;  // "DP2 x TP2 x PP1"
};

struct MeshCoords {
  int dp = 0, tp = 0, pp = 0;
};

// Where a world rank sits, and back.
MeshCoords meshCoordsOf(int worldRank, const MeshShape& shape);
int meshWorldRank(const MeshCoords& coords, const MeshShape& shape);

class ProcessMesh {
 public:
  // std::invalid_argument if the world's size is not dp*tp*pp or a size < 1
  // (naming the sizes and this rank); std::runtime_error with Loom's message
  // if a split fails.
  ProcessMesh(loomComm_t world, MeshShape shape);
  ~ProcessMesh();
  ProcessMesh(const ProcessMesh&) = delete;
  ProcessMesh& operator=(const ProcessMesh&) = delete;

  const MeshShape& shape() const { return shape_; }
  const MeshCoords& coords() const { return coords_; }
  int worldRank() const { return worldRank_; }
  loomComm_t world() const { return world_; }
  loomComm_t dp() const { return dp_; }
  loomComm_t tp() const { return tp_; }
  loomComm_t pp() const { return pp_; }

 private:
  loomComm_t split(int color, int key, const char* group);

  loomComm_t world_;
  MeshShape shape_;
  MeshCoords coords_;
  int worldRank_ = 0;
  loomComm_t dp_ = nullptr, tp_ = nullptr, pp_ = nullptr;
};

}  // namespace loom::ddp
