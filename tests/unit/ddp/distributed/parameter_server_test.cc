// The sharded parameter server trains like DDP: same ranks, data, model and
// SGD, after 4 steps the parameters agree within 1e-6 (only the averaging
// differs: a rank-order sum times 1/N against the all-reduce's average),
// for 1 server, some servers and every rank a server, with shards that do
// and do not divide the model. Every rank's replica must also be the same.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "ddp/distributed/distributed_data_parallel.h"
#include "ddp/distributed/parameter_server.h"
#include "ddp/model/mlp.h"
#include "tests/unit/ddp/distributed/grad_patterns.h"
#include "tests/unit/ddp/distributed/world.h"

namespace loom::ddp {
namespace {

using testing::gradPattern;
using testing::RankContext;

constexpr size_t kBatch = 5;
const MlpOptions kModel{{9, 14, 6}, Activation::kRelu};

template <class Sync>
std::vector<float> train(const RankContext& w, ParameterStore& store, Mlp& mlp, Sync&& sync) {
  for (int step = 0; step < 4; ++step) {
    std::vector<float> x(kBatch * kModel.layers.front());
    for (size_t i = 0; i < x.size(); ++i) x[i] = 2.0f * gradPattern(w.rank, 300 + step, i);
    std::vector<uint8_t> y(kBatch);
    for (size_t b = 0; b < kBatch; ++b) y[b] = static_cast<uint8_t>((b + w.rank + step) % kModel.layers.back());
    store.zeroGrads();
    mlp.forward(x, kBatch);
    mlp.loss(y);
    mlp.backward();
    sync();
  }
  return {store.values().begin(), store.values().end()};
}

void compare(const RankContext& w, int servers) {
  std::vector<float> want, initial;
  {
    ParameterStore store;
    Mlp mlp(store, kModel);
    store.finalize();
    mlp.initialize(21);
    initial.assign(store.values().begin(), store.values().end());
    DistributedDataParallel ddp(w.comm, store);
    auto sgd = makeSgd({.lr = 0.1f, .momentum = 0.9f});
    want = train(w, store, mlp, [&] {
      ddp.finishGradientSync();
      sgd->step(store.values(), store.grads());
    });
  }
  ParameterStore store;
  Mlp mlp(store, kModel);
  store.finalize();
  mlp.initialize(w.rank == 0 ? 21 : 99);  // the server's broadcast must fix this
  ParameterServer ps(w.comm, store, makeSgd({.lr = 0.1f, .momentum = 0.9f}), servers);
  const std::vector<float> got = train(w, store, mlp, [&] { ps.step(); });
  double worst = 0, moved = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - want[i]));
    moved = std::max(moved, std::fabs(static_cast<double>(want[i]) - initial[i]));
  }
  EXPECT_LE(worst, 1e-6) << "rank " << w.rank << " of " << w.nranks << ", " << servers << " servers";
  EXPECT_GT(moved, 1e-3) << "training barely moved the parameters";
  EXPECT_EQ(ps.stateBytes() > 0, w.rank < servers) << "optimizer state lives on the servers only";
}

class ParameterServerTest : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(ParameterServerTest, TrainsLikeDdp) {
  const auto [nranks, servers] = GetParam();
  testing::runThreads(nranks, [servers](const RankContext& w) { compare(w, servers); });
}

INSTANTIATE_TEST_SUITE_P(Servers, ParameterServerTest,
                         ::testing::Values(std::make_tuple(4, 1), std::make_tuple(4, 2), std::make_tuple(4, 4),
                                           std::make_tuple(3, 2)));

TEST(ParameterServerErrors, ServerCountOutOfRangeNamesIt) {
  testing::runThreads(2, [](const RankContext& w) {
    ParameterStore store;
    Mlp mlp(store, kModel);
    store.finalize();
    try {
      ParameterServer ps(w.comm, store, makeSgd({}), 3);
      ADD_FAILURE() << "3 servers among 2 ranks were accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("servers = 3"), std::string::npos) << e.what();
    }
  });
}

// Ranks as processes (ctest: loomrun -n 4).
TEST(ProcessParameterServer, TrainsLikeDdp) {
  testing::runProcess([](const RankContext& w) { compare(w, std::min(2, w.nranks)); });
}

}  // namespace
}  // namespace loom::ddp
