// ProcessMesh: each sub-communicator holds exactly the world ranks that
// share the other two coordinates, ordered by its own (each rank all-gathers
// its members' world ranks and compares with the layout computed here).
#include <gtest/gtest.h>

#include "ddp/parallel/process_mesh.h"
#include "tests/unit/ddp/distributed/world.h"

namespace loom::ddp {
namespace {

using testing::RankContext;

std::vector<int> membersOf(loomComm_t comm, int worldRank) {
  int n = 0;
  loomCommCount(comm, &n);
  std::vector<int> members(n);
  int me = 0;
  loomCommUserRank(comm, &me);
  members[me] = worldRank;
  EXPECT_EQ(loomAllGather(members.data() + me, members.data(), 1, loomInt32, comm, nullptr), loomSuccess);
  return members;
}

void checkMesh(const RankContext& w, MeshShape shape) {
  ProcessMesh mesh(w.comm, shape);
  const MeshCoords c = mesh.coords();
  EXPECT_EQ(meshWorldRank(c, shape), w.rank);
  std::vector<int> tp, dp, pp;
  for (int t = 0; t < shape.tp; ++t) tp.push_back(meshWorldRank({c.dp, t, c.pp}, shape));
  for (int d = 0; d < shape.dp; ++d) dp.push_back(meshWorldRank({d, c.tp, c.pp}, shape));
  for (int p = 0; p < shape.pp; ++p) pp.push_back(meshWorldRank({c.dp, c.tp, p}, shape));
  EXPECT_EQ(membersOf(mesh.tp(), w.rank), tp) << "tensor-parallel group of rank " << w.rank;
  EXPECT_EQ(membersOf(mesh.dp(), w.rank), dp) << "data-parallel group of rank " << w.rank;
  EXPECT_EQ(membersOf(mesh.pp(), w.rank), pp) << "pipeline group of rank " << w.rank;
}

TEST(MeshLayout, EightRanksTwoByTwoByTwo) {
  testing::runThreads(8, [](const RankContext& w) { checkMesh(w, {.dp = 2, .tp = 2, .pp = 2}); });
}

TEST(MeshLayout, FourRanksInEveryTwoByTwoLayout) {
  for (MeshShape s : {MeshShape{2, 2, 1}, MeshShape{2, 1, 2}, MeshShape{1, 2, 2}, MeshShape{4, 1, 1}})
    testing::runThreads(4, [s](const RankContext& w) { checkMesh(w, s); });
}

TEST(MeshLayout, WrongSizeIsRejectedNamingBoth) {
  testing::runThreads(2, [](const RankContext& w) {
    try {
      ProcessMesh mesh(w.comm, {.dp = 2, .tp = 2, .pp = 1});
      ADD_FAILURE() << "a 4-rank mesh on 2 ranks was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("the world has 2"), std::string::npos) << e.what();
    }
  });
}

}  // namespace
}  // namespace loom::ddp
