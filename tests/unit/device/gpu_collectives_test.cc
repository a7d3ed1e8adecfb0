// Collectives on device buffers through CUDA streams (loomStreamFromCuda),
// 2 ranks as threads (one device each if there are two, else both on one).
// Every test first checks for a device and skips, saying why, without one.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <latch>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "loom/loom.h"
#include "tests/unit/device/gpu_test_skip.h"
#include "tests/unit/device/test_kernels.h"

namespace {

using loom::testing::launchFill;
using loom::testing::launchScale;
using loom::testing::launchSpin;


#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call << ": " << cudaGetErrorString(cudaGetLastError())
#define LOOM_OK(call, comm) ASSERT_EQ((call), loomSuccess) << #call << ": " << loomGetLastError(comm)

constexpr int kRanks = 2;

struct RankContext {
  int rank = 0;
  cudaStream_t cuda = nullptr;
  loomStream_t stream = nullptr;
  loomComm_t comm = nullptr;
};

// Runs body on nranks threads, each with its device, CUDA stream, Loom stream and communicator.
void runRanks(const std::function<void(RankContext&)>& body, int nranks = kRanks) {
  int devices = 0;
  ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
  for (int d = 0; d < devices; ++d) {
    ASSERT_EQ(cudaSetDevice(d), cudaSuccess);
    ASSERT_EQ(loom::testing::preloadTestKernels(), cudaSuccess);
  }
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess) << loomGetLastError(nullptr);
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] {
      RankContext ctx;
      ctx.rank = r;
      CUDA_OK(cudaSetDevice(r % devices));
      CUDA_OK(cudaStreamCreateWithFlags(&ctx.cuda, cudaStreamNonBlocking));
      LOOM_OK(loomCommInitRank(&ctx.comm, nranks, id, r), nullptr);
      LOOM_OK(loomStreamFromCuda(ctx.cuda, &ctx.stream), nullptr);
      ASSERT_NE(ctx.stream, nullptr) << "a device exists, so the CUDA stream must get a Loom stream";
      loomStream_t again = nullptr;
      LOOM_OK(loomStreamFromCuda(ctx.cuda, &again), nullptr);
      EXPECT_EQ(again, ctx.stream) << "one Loom stream per CUDA stream";
      body(ctx);
      EXPECT_EQ(cudaStreamSynchronize(ctx.cuda), cudaSuccess);
      loomResult_t async = loomInternalError;
      EXPECT_EQ(loomCommGetAsyncError(ctx.comm, &async), loomSuccess);
      EXPECT_EQ(async, loomSuccess) << loomGetLastError(ctx.comm);
      EXPECT_EQ(loomStreamDestroy(ctx.stream), loomSuccess);
      EXPECT_EQ(loomCommDestroy(ctx.comm), loomSuccess);
      EXPECT_EQ(cudaStreamDestroy(ctx.cuda), cudaSuccess);
    });
  }
  for (auto& t : threads) t.join();
}

int32_t* deviceInts(size_t n) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, n * sizeof(int32_t)), cudaSuccess);
  EXPECT_EQ(cudaMemset(p, 0xff, n * sizeof(int32_t)), cudaSuccess);  // -1 everywhere
  return static_cast<int32_t*>(p);
}

std::vector<int32_t> toHost(const int32_t* p, size_t n) {
  std::vector<int32_t> out(n);
  EXPECT_EQ(cudaMemcpy(out.data(), p, n * sizeof(int32_t), cudaMemcpyDeviceToHost), cudaSuccess);
  return out;
}

// The input of rank r: i*(r+1) + 100r, written by a kernel on the stream.
int32_t input(int r, size_t i) { return static_cast<int32_t>(i) * (r + 1) + 100 * r; }
int32_t sumOfInputs(size_t i, int nranks = kRanks) {
  int32_t s = 0;
  for (int r = 0; r < nranks; ++r) s += input(r, i);
  return s;
}

TEST(CudaGpu, CollectivesOnDeviceBuffersWithACudaStream) {
  SKIP_WITHOUT_DEVICE();
  constexpr size_t n = 1 << 16;
  runRanks([&](RankContext& c) {
    int32_t* send = deviceInts(n);
    int32_t* recv = deviceInts(n);
    int32_t* bcast = deviceInts(n);
    int32_t* gathered = deviceInts(n * kRanks);
    int32_t* block = deviceInts(n);
    CUDA_OK(launchFill(send, n, c.rank + 1, 100 * c.rank, c.cuda));
    LOOM_OK(loomAllReduce(send, recv, n, loomInt32, loomSum, c.comm, c.stream), c.comm);
    LOOM_OK(loomBroadcast(send, bcast, n, loomInt32, 1, c.comm, c.stream), c.comm);
    LOOM_OK(loomAllGather(send, gathered, n, loomInt32, c.comm, c.stream), c.comm);
    LOOM_OK(loomReduceScatter(gathered, block, n, loomInt32, loomSum, c.comm, c.stream), c.comm);
    CUDA_OK(cudaStreamSynchronize(c.cuda));
    LOOM_OK(loomStreamSynchronize(c.stream), c.comm);
    auto r = toHost(recv, n), b = toHost(bcast, n), g = toHost(gathered, n * kRanks), s = toHost(block, n);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(r[i], sumOfInputs(i)) << "all-reduce " << i;
      ASSERT_EQ(b[i], input(1, i)) << "broadcast " << i;
      for (int q = 0; q < kRanks; ++q) ASSERT_EQ(g[static_cast<size_t>(q) * n + i], input(q, i)) << "all-gather " << i;
      // Every rank reduce-scatters the same gathered buffer: kRanks x its block.
      ASSERT_EQ(s[i], kRanks * input(c.rank, i)) << "reduce-scatter " << i;
    }
    for (void* p : {static_cast<void*>(send), static_cast<void*>(recv), static_cast<void*>(bcast),
                    static_cast<void*>(gathered), static_cast<void*>(block)})
      cudaFree(p);
  });
}

TEST(CudaGpu, CollectiveIsOrderedAfterEarlierAndBeforeLaterKernelsOfTheStream) {
  SKIP_WITHOUT_DEVICE();
  constexpr size_t n = 1 << 20;
  runRanks([&](RankContext& c) {
    int32_t* send = deviceInts(n);
    int32_t* recv = deviceInts(n);
    int clockKhz = 0;
    CUDA_OK(cudaDeviceGetAttribute(&clockKhz, cudaDevAttrClockRate, 0));
    // ~200 ms of spinning, then the kernel that writes the input.
    CUDA_OK(launchSpin(static_cast<long long>(clockKhz) * 200, c.cuda));
    CUDA_OK(launchFill(send, n, c.rank + 1, 100 * c.rank, c.cuda));
    LOOM_OK(loomAllReduce(send, recv, n, loomInt32, loomSum, c.comm, c.stream), c.comm);
    // The call returned while the spin kernel still runs: it only enqueued.
    EXPECT_EQ(loomStreamQuery(c.stream), loomInProgress);
    // A later kernel on the stream sees the collective's result.
    CUDA_OK(launchScale(recv, n, 3, c.cuda));
    CUDA_OK(cudaStreamSynchronize(c.cuda));
    auto r = toHost(recv, n);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(r[i], 3 * sumOfInputs(i)) << i;
    cudaFree(send);
    cudaFree(recv);
  });
}

TEST(CudaGpu, InPlaceAllReduceAndAllGatherInAGroup) {
  SKIP_WITHOUT_DEVICE();
  constexpr size_t n = 4099;  // not a multiple of any vector width
  runRanks([&](RankContext& c) {
    int32_t* buf = deviceInts(n);
    int32_t* gathered = deviceInts(n * kRanks);
    int32_t* mine = gathered + static_cast<size_t>(c.rank) * n;
    CUDA_OK(launchFill(buf, n, c.rank + 1, 100 * c.rank, c.cuda));
    CUDA_OK(launchFill(mine, n, c.rank + 1, 100 * c.rank, c.cuda));
    LOOM_OK(loomGroupStart(), c.comm);
    LOOM_OK(loomAllReduce(buf, buf, n, loomInt32, loomSum, c.comm, c.stream), c.comm);
    LOOM_OK(loomAllGather(mine, gathered, n, loomInt32, c.comm, c.stream), c.comm);
    LOOM_OK(loomGroupEnd(), c.comm);
    CUDA_OK(cudaStreamSynchronize(c.cuda));
    auto r = toHost(buf, n), g = toHost(gathered, n * kRanks);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(r[i], sumOfInputs(i)) << i;
      for (int q = 0; q < kRanks; ++q) ASSERT_EQ(g[static_cast<size_t>(q) * n + i], input(q, i)) << i;
    }
    cudaFree(buf);
    cudaFree(gathered);
  });
}

TEST(CudaGpu, SendRecvBetweenDeviceBuffers) {
  SKIP_WITHOUT_DEVICE();
  constexpr size_t n = 100000;
  runRanks([&](RankContext& c) {
    int32_t* out = deviceInts(n);
    int32_t* in = deviceInts(n);
    CUDA_OK(launchFill(out, n, c.rank + 1, 100 * c.rank, c.cuda));
    const int peer = 1 - c.rank;
    LOOM_OK(loomGroupStart(), c.comm);
    LOOM_OK(loomSend(out, n, loomInt32, peer, c.comm, c.stream), c.comm);
    LOOM_OK(loomRecv(in, n, loomInt32, peer, c.comm, c.stream), c.comm);
    LOOM_OK(loomGroupEnd(), c.comm);
    CUDA_OK(cudaStreamSynchronize(c.cuda));
    auto r = toHost(in, n);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(r[i], input(peer, i)) << i;
    cudaFree(out);
    cudaFree(in);
  });
}

TEST(CudaGpu, BlockingCallOnDeviceBuffers) {
  SKIP_WITHOUT_DEVICE();
  constexpr size_t n = 5000;
  runRanks([&](RankContext& c) {
    int32_t* send = deviceInts(n);
    int32_t* recv = deviceInts(n);
    CUDA_OK(launchFill(send, n, c.rank + 1, 100 * c.rank, c.cuda));
    CUDA_OK(cudaStreamSynchronize(c.cuda));  // a NULL Loom stream does not wait for CUDA work
    LOOM_OK(loomAllReduce(send, recv, n, loomInt32, loomMax, c.comm, nullptr), c.comm);
    auto r = toHost(recv, n);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(r[i], input(kRanks - 1, i)) << i;  // inputs grow with the rank
    cudaFree(send);
    cudaFree(recv);
  });
}

TEST(CudaGpu, DirectPeerPathAllReduce) {
  SKIP_WITHOUT_DEVICE();
  // Read when the communicators are created; the same on every rank.
  setenv("LOOM_CUDA_P2P", "1", 1);
  constexpr size_t n = 1 << 18;
  runRanks([&](RankContext& c) {
    int32_t* send = deviceInts(n);
    int32_t* recv = deviceInts(n);
    CUDA_OK(launchFill(send, n, c.rank + 1, 100 * c.rank, c.cuda));
    LOOM_OK(loomAllReduce(send, recv, n, loomInt32, loomSum, c.comm, c.stream), c.comm);
    LOOM_OK(loomAllReduce(send, send, n, loomInt32, loomSum, c.comm, c.stream), c.comm);  // in place
    CUDA_OK(cudaStreamSynchronize(c.cuda));
    auto r = toHost(recv, n), s = toHost(send, n);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(r[i], sumOfInputs(i)) << i;
      ASSERT_EQ(s[i], sumOfInputs(i)) << i;
    }
    cudaFree(send);
    cudaFree(recv);
  });
  unsetenv("LOOM_CUDA_P2P");
}

// ---- Stream ordering (src/device/stream_gate.h): the scenarios that hung
// while a blocking host function ordered the stream. Buffers are allocated
// before any rank enqueues: cudaMalloc/cudaFree may synchronize the device,
// which must not happen while a peer's collective waits for this rank's. ----

// Several all-reduces back to back on each rank's stream, one synchronize.
void backToBackAllReduces(int nranks) {
  constexpr int kOps = 4;
  constexpr size_t n = 1 << 16;
  std::barrier allocated(nranks);
  runRanks(
      [&](RankContext& c) {
        std::vector<int32_t*> send(kOps), recv(kOps);
        for (int k = 0; k < kOps; ++k) {
          send[static_cast<size_t>(k)] = deviceInts(n);
          recv[static_cast<size_t>(k)] = deviceInts(n);
        }
        CUDA_OK(cudaDeviceSynchronize());
        allocated.arrive_and_wait();
        for (int k = 0; k < kOps; ++k) {
          CUDA_OK(launchFill(send[static_cast<size_t>(k)], n, c.rank + 1, 100 * c.rank + 1000 * k, c.cuda));
          LOOM_OK(loomAllReduce(send[static_cast<size_t>(k)], recv[static_cast<size_t>(k)], n, loomInt32, loomSum,
                                c.comm, c.stream),
                  c.comm);
        }
        CUDA_OK(cudaStreamSynchronize(c.cuda));
        for (int k = 0; k < kOps; ++k) {
          auto r = toHost(recv[static_cast<size_t>(k)], n);
          for (size_t i = 0; i < n; ++i) ASSERT_EQ(r[i], sumOfInputs(i, nranks) + 1000 * k * nranks) << k << " " << i;
        }
        allocated.arrive_and_wait();  // no cudaFree while a peer may still run
        for (int k = 0; k < kOps; ++k) {
          cudaFree(send[static_cast<size_t>(k)]);
          cudaFree(recv[static_cast<size_t>(k)]);
        }
      },
      nranks);
}

TEST(CudaGpu, BackToBackAllReducesThenOneStreamSynchronizeTwoRanks) {
  SKIP_WITHOUT_DEVICE();
  backToBackAllReduces(2);
}

TEST(CudaGpu, BackToBackAllReducesThenOneStreamSynchronizeFourRanks) {
  SKIP_WITHOUT_DEVICE();
  backToBackAllReduces(4);
}

TEST(CudaGpu, DeviceSynchronizeWhileAPeerHasACollectiveEnqueued) {
  SKIP_WITHOUT_DEVICE();
  constexpr size_t n = 1 << 16;
  std::barrier allocated(kRanks);
  std::latch peerEnqueued(1);
  runRanks([&](RankContext& c) {
    int32_t* send = deviceInts(n);
    int32_t* recv = deviceInts(n);
    CUDA_OK(cudaDeviceSynchronize());
    allocated.arrive_and_wait();
    if (c.rank == 0) peerEnqueued.wait();
    CUDA_OK(launchFill(send, n, c.rank + 1, 100 * c.rank, c.cuda));
    LOOM_OK(loomAllReduce(send, recv, n, loomInt32, loomSum, c.comm, c.stream), c.comm);
    LOOM_OK(loomAllReduce(recv, recv, n, loomInt32, loomSum, c.comm, c.stream), c.comm);
    if (c.rank == 1) {
      peerEnqueued.count_down();
      CUDA_OK(cudaStreamSynchronize(c.cuda));
    } else {
      // Rank 1's collectives are enqueued (their gates wait on rank 1's stream).
      CUDA_OK(cudaDeviceSynchronize());
    }
    auto r = toHost(recv, n);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(r[i], kRanks * sumOfInputs(i)) << i;
    allocated.arrive_and_wait();
    cudaFree(send);
    cudaFree(recv);
  });
}

TEST(CudaGpu, GraphCaptureOnTheStagedPathFailsAtOnce) {
  SKIP_WITHOUT_DEVICE();
  constexpr size_t n = 4096;
  // The staged path: the device engine, which a graph does capture, is off.
  // Read when the communicators are created; the same on every rank.
  setenv("LOOM_CUDA_ENGINE", "0", 1);
  std::barrier ready(kRanks);
  runRanks([&](RankContext& c) {
    int32_t* buf = deviceInts(n);
    CUDA_OK(cudaStreamSynchronize(c.cuda));
    // Both ranks' setup is done before either captures: a device-wide call
    // (cudaMemset and cudaMalloc may be one) on one thread during another
    // thread's capture is refused with cudaErrorStreamCaptureUnsupported.
    CUDA_OK(cudaDeviceSynchronize());
    ready.arrive_and_wait();
    // Thread-local mode: the other rank's thread may go on calling CUDA.
    CUDA_OK(cudaStreamBeginCapture(c.cuda, cudaStreamCaptureModeThreadLocal));
    const auto start = std::chrono::steady_clock::now();
    const loomResult_t result = loomAllReduce(buf, buf, n, loomInt32, loomSum, c.comm, c.stream);
    const std::string error = loomGetLastError(c.comm);
    const auto took = std::chrono::steady_clock::now() - start;
    cudaGraph_t graph = nullptr;
    EXPECT_EQ(cudaStreamEndCapture(c.cuda, &graph), cudaSuccess);
    if (graph) cudaGraphDestroy(graph);
    EXPECT_EQ(result, loomInvalidUsage) << error;
    EXPECT_NE(error.find("rank " + std::to_string(c.rank)), std::string::npos) << error;
    EXPECT_NE(error.find("captured into a CUDA graph"), std::string::npos) << error;
    EXPECT_LT(took, std::chrono::seconds(1)) << "the refusal waited for something";
    EXPECT_EQ(loomStreamQuery(c.stream), loomSuccess) << "a refused call must queue nothing";
    ready.arrive_and_wait();  // no cudaFree (device-wide) while the peer still captures
    cudaFree(buf);
  });
  unsetenv("LOOM_CUDA_ENGINE");
}

}  // namespace
