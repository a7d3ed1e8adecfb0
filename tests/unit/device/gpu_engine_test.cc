// The device engine on a GPU: ranks as threads, all on device 0 (ranks
// sharing one GPU, the case the engine must handle without a second card),
// or one device each where there are enough. Every test skips, saying why,
// without a device. Values are checked against references computed here.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "loom/loom.h"
#include "tests/unit/device/gpu_test_skip.h"
#include "tests/unit/device/test_kernels.h"

namespace {


struct Rank {
  int rank = 0;
  int nranks = 0;
  cudaStream_t cuda = nullptr;
  loomStream_t stream = nullptr;
  loomComm_t comm = nullptr;
  std::string failure;
  void check(bool ok, const std::string& what) {
    if (!ok && failure.empty()) failure = what;
  }
};

// Runs `body` on nranks threads, all on device 0; collects failures.
void runOnOneGpu(int nranks, const std::function<void(Rank&)>& body) {
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ASSERT_EQ(loom::testing::preloadTestKernels(), cudaSuccess);
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  std::vector<Rank> ranks(static_cast<size_t>(nranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] {
      Rank& me = ranks[static_cast<size_t>(r)];
      me.rank = r;
      me.nranks = nranks;
      me.check(cudaSetDevice(0) == cudaSuccess, "cudaSetDevice");
      me.check(cudaStreamCreateWithFlags(&me.cuda, cudaStreamNonBlocking) == cudaSuccess, "stream");
      me.check(loomCommInitRank(&me.comm, nranks, id, r) == loomSuccess, loomGetLastError(nullptr));
      me.check(loomStreamFromCuda(me.cuda, &me.stream) == loomSuccess, "loomStreamFromCuda");
      if (me.failure.empty()) body(me);
      me.check(cudaStreamSynchronize(me.cuda) == cudaSuccess, "cudaStreamSynchronize");
      loomResult_t async = loomInternalError;
      me.check(loomCommGetAsyncError(me.comm, &async) == loomSuccess && async == loomSuccess,
               std::string("async error: ") + loomGetLastError(me.comm));
      (void)loomCommDestroy(me.comm);
      (void)cudaStreamDestroy(me.cuda);
    });
  }
  for (auto& t : threads) t.join();
  for (const Rank& r : ranks) EXPECT_EQ(r.failure, "") << "rank " << r.rank;
}

float* deviceFloats(size_t n) {
  void* p = nullptr;
  if (cudaMalloc(&p, n * sizeof(float)) != cudaSuccess) return nullptr;
  return static_cast<float*>(p);
}

std::vector<float> toHost(const float* d, size_t n) {
  std::vector<float> h(n);
  (void)cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost);
  return h;
}

float valueOf(int rank, size_t i) { return static_cast<float>((rank + 1) * 100 + static_cast<int>(i % 101)); }

TEST(GpuEngine, EveryCollectiveBackToBackOnOneGpuThenOneSynchronize) {
  SKIP_WITHOUT_DEVICE();
  for (int nranks : {1, 2, 4}) {
    SCOPED_TRACE("nranks " + std::to_string(nranks));
    runOnOneGpu(nranks, [](Rank& me) {
      const size_t n = static_cast<size_t>(me.nranks), count = (size_t{1} << 20) + 3;
      std::vector<float> in(count * n);
      for (size_t i = 0; i < in.size(); ++i) in[i] = valueOf(me.rank, i);
      float* dIn = deviceFloats(in.size());
      float* dSum = deviceFloats(count);
      float* dGather = deviceFloats(count * n);
      float* dScatter = deviceFloats(count);
      float* dBcast = deviceFloats(count);
      me.check(dIn && dSum && dGather && dScatter && dBcast, "cudaMalloc");
      if (!me.failure.empty()) return;
      (void)cudaMemcpy(dIn, in.data(), in.size() * sizeof(float), cudaMemcpyHostToDevice);
      (void)cudaMemcpy(dBcast, in.data(), count * sizeof(float), cudaMemcpyHostToDevice);
      // Ten all-reduces, then one of each other collective, then one synchronize.
      for (int k = 0; k < 10; ++k)
        me.check(loomAllReduce(dIn, dSum, count, loomFloat32, loomSum, me.comm, me.stream) == loomSuccess,
                 loomGetLastError(me.comm));
      me.check(loomAllGather(dIn, dGather, count, loomFloat32, me.comm, me.stream) == loomSuccess, "all-gather");
      me.check(loomReduceScatter(dIn, dScatter, count, loomFloat32, loomMax, me.comm, me.stream) == loomSuccess,
               "reduce-scatter");
      me.check(loomBroadcast(dBcast, dBcast, count, loomFloat32, me.nranks - 1, me.comm, me.stream) == loomSuccess,
               "broadcast");
      me.check(cudaStreamSynchronize(me.cuda) == cudaSuccess, "synchronize");
      // The device engine ran them (one GPU, threads of one process: it must).
      char ran[64] = {};
      me.check(loomCommGetLastAlgorithm(me.comm, ran, sizeof ran) == loomSuccess &&
                   std::string(ran).rfind("engine/", 0) == 0,
               std::string("last algorithm '") + ran + "', expected the device engine");
      auto sum = toHost(dSum, count), gathered = toHost(dGather, count * n), scattered = toHost(dScatter, count),
           bcast = toHost(dBcast, count);
      for (size_t i = 0; i < count && me.failure.empty(); ++i) {
        float s = 0, m = 0;
        for (int r = 0; r < me.nranks; ++r) s += valueOf(r, i);
        me.check(sum[i] == s, "all-reduce at " + std::to_string(i));
        for (int r = 0; r < me.nranks; ++r)
          me.check(gathered[static_cast<size_t>(r) * count + i] == valueOf(r, i), "all-gather at " + std::to_string(i));
        const size_t block = static_cast<size_t>(me.rank) * count + i;
        m = valueOf(0, block);
        for (int r = 1; r < me.nranks; ++r) m = std::max(m, valueOf(r, block));
        me.check(scattered[i] == m, "reduce-scatter at " + std::to_string(i));
        me.check(bcast[i] == valueOf(me.nranks - 1, i), "broadcast at " + std::to_string(i));
      }
      for (float* p : {dIn, dSum, dGather, dScatter, dBcast}) (void)cudaFree(p);
    });
  }
}

TEST(GpuEngine, DeviceSynchronizeOnOneRankWhilePeersStillEnqueue) {
  SKIP_WITHOUT_DEVICE();
  runOnOneGpu(2, [](Rank& me) {
    const size_t count = 4096;
    float* d = deviceFloats(count);
    std::vector<float> ones(count, 1.0f);
    (void)cudaMemcpy(d, ones.data(), count * sizeof(float), cudaMemcpyHostToDevice);
    // Rank 1 enqueues late: rank 0's device-wide synchronize must not wait on a Loom thread.
    if (me.rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    me.check(loomAllReduce(d, d, count, loomFloat32, loomSum, me.comm, me.stream) == loomSuccess, "all-reduce");
    me.check(cudaDeviceSynchronize() == cudaSuccess, "cudaDeviceSynchronize");
    auto out = toHost(d, count);
    me.check(out[0] == 2.0f && out[count - 1] == 2.0f, "value after the in-place all-reduce");
    (void)cudaFree(d);
  });
}

TEST(GpuEngine, CapturedInACudaGraphAndReplayed) {
  SKIP_WITHOUT_DEVICE();
  runOnOneGpu(2, [](Rank& me) {
    const size_t count = 100003;
    float* dIn = deviceFloats(count);
    float* dOut = deviceFloats(count);
    std::vector<float> in(count);
    for (size_t i = 0; i < count; ++i) in[i] = valueOf(me.rank, i);
    (void)cudaMemcpy(dIn, in.data(), count * sizeof(float), cudaMemcpyHostToDevice);
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    me.check(cudaStreamBeginCapture(me.cuda, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "begin capture");
    for (int k = 0; k < 3; ++k)
      me.check(loomAllReduce(dIn, dOut, count, loomFloat32, loomSum, me.comm, me.stream) == loomSuccess,
               std::string("captured all-reduce: ") + loomGetLastError(me.comm));
    me.check(cudaStreamEndCapture(me.cuda, &graph) == cudaSuccess, "end capture");
    me.check(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess, "instantiate");
    for (int replay = 0; replay < 5 && me.failure.empty(); ++replay) {
      (void)cudaMemset(dOut, 0, count * sizeof(float));
      me.check(cudaGraphLaunch(exec, me.cuda) == cudaSuccess, "graph launch");
      me.check(cudaStreamSynchronize(me.cuda) == cudaSuccess, "synchronize");
      auto out = toHost(dOut, count);
      for (size_t i = 0; i < count && me.failure.empty(); ++i)
        me.check(out[i] == valueOf(0, i) + valueOf(1, i), "replay " + std::to_string(replay) + " at " + std::to_string(i));
    }
    if (exec) (void)cudaGraphExecDestroy(exec);
    if (graph) (void)cudaGraphDestroy(graph);
    (void)cudaFree(dIn);
    (void)cudaFree(dOut);
  });
}

TEST(GpuEngine, AllToAllAndSendRecvInAGroup) {
  SKIP_WITHOUT_DEVICE();
  runOnOneGpu(4, [](Rank& me) {
    const size_t n = 4, count = 5003;
    std::vector<float> in(count * n);
    for (size_t i = 0; i < in.size(); ++i) in[i] = valueOf(me.rank, i);
    float* dIn = deviceFloats(count * n);
    float* dOut = deviceFloats(count * n);
    float* dRecv = deviceFloats(count);
    (void)cudaMemcpy(dIn, in.data(), in.size() * sizeof(float), cudaMemcpyHostToDevice);
    me.check(loomAllToAll(dIn, dOut, count, loomFloat32, me.comm, me.stream) == loomSuccess, "all-to-all");
    const int next = (me.rank + 1) % 4, prev = (me.rank + 3) % 4;
    me.check(loomGroupStart() == loomSuccess, "group start");
    me.check(loomSend(dIn, count, loomFloat32, next, me.comm, me.stream) == loomSuccess, "send");
    me.check(loomRecv(dRecv, count, loomFloat32, prev, me.comm, me.stream) == loomSuccess, "recv");
    me.check(loomGroupEnd() == loomSuccess, "group end");
    me.check(cudaStreamSynchronize(me.cuda) == cudaSuccess, "synchronize");
    auto out = toHost(dOut, count * n), got = toHost(dRecv, count);
    for (size_t r = 0; r < n && me.failure.empty(); ++r)
      for (size_t i = 0; i < count && me.failure.empty(); ++i)
        me.check(out[r * count + i] == valueOf(static_cast<int>(r), static_cast<size_t>(me.rank) * count + i),
                 "all-to-all block " + std::to_string(r));
    for (size_t i = 0; i < count && me.failure.empty(); ++i)
      me.check(got[i] == valueOf(prev, i), "recv at " + std::to_string(i));
    for (float* p : {dIn, dOut, dRecv}) (void)cudaFree(p);
  });
}

}  // namespace
