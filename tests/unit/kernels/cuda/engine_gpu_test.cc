// The device engine's CUDA kernel on a GPU: ranks are host threads' streams
// on device 0 (plain device pointers between ranks, ranks sharing one GPU),
// checked against the same independent references as the host emulation.
// Skips, saying why, when there is no CUDA device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda/engine/engine_kernel.h"
#include "kernels/cuda/engine/engine_layout.h"
#include "tests/unit/kernels/cuda/engine_test_support.h"

namespace loom::kernels::cuda::engine::testing {
namespace {

#define CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr

class EngineGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    int devices = 0;
    const cudaError_t err = cudaGetDeviceCount(&devices);
    if (err != cudaSuccess || devices == 0) {
      cudaGetLastError();
      GTEST_SKIP() << "no CUDA device found (cudaGetDeviceCount: "
                   << (err != cudaSuccess ? cudaGetErrorString(err) : "0 devices") << ")";
    }
  }
};

// Every rank's engine memory, view and stream on device 0.
struct GpuRanks {
  GpuRanks(int nranks, int nchannels, int slots, size_t slotBytes)
      : layout(engineLayout(nranks, nchannels, slots, slotBytes)), memory(nranks), views(nranks),
        streams(nranks), status(nranks) {
    for (int r = 0; r < nranks; ++r) {
      EXPECT_EQ(cudaMalloc(&memory[r], layout.bytes), cudaSuccess);
      EXPECT_EQ(cudaMemset(memory[r], 0, layout.bytes), cudaSuccess);
      EXPECT_EQ(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking), cudaSuccess);
      EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&status[r]), sizeof(uint32_t)), cudaSuccess);
    }
    for (int r = 0; r < nranks; ++r) {
      const EngineView host = makeEngineView(layout, r, memory.data());
      EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&views[r]), sizeof(EngineView)), cudaSuccess);
      EXPECT_EQ(cudaMemcpy(views[r], &host, sizeof(EngineView), cudaMemcpyHostToDevice), cudaSuccess);
    }
  }
  ~GpuRanks() {
    for (size_t r = 0; r < memory.size(); ++r) {
      cudaFree(memory[r]);
      cudaFree(views[r]);
      cudaFree(status[r]);
      cudaStreamDestroy(streams[r]);
    }
  }
  EngineLayout layout;
  std::vector<void*> memory;
  std::vector<EngineView*> views;
  std::vector<cudaStream_t> streams;
  std::vector<uint32_t*> status;
};

// Runs `c` on the GPU ranks: buffers mirrored to the device, every rank's
// kernel enqueued (status reset first), then one synchronize; "" when every
// rank reports kOk and matches the reference.
std::string runOnGpu(GpuRanks& g, const CollectiveCase& c, int calls = 1) {
  const int n = g.layout.nranks;
  CollectiveRun run(c, n);
  std::vector<unsigned char*> device(n);
  std::vector<EngineCall> deviceCalls;
  for (int r = 0; r < n; ++r) {
    std::vector<unsigned char>& host = run.storage(r);
    if (cudaMalloc(reinterpret_cast<void**>(&device[r]), host.size() + 1) != cudaSuccess) return "cudaMalloc failed";
    cudaMemcpy(device[r], host.data(), host.size(), cudaMemcpyHostToDevice);
    EngineCall call = run.calls()[static_cast<size_t>(r)];
    auto rebase = [&](const void* p) -> unsigned char* {
      return p ? device[r] + (static_cast<const unsigned char*>(p) - host.data()) : nullptr;
    };
    call.send = rebase(call.send);
    call.recv = rebase(call.recv);
    call.timeoutNs = 10'000'000'000ull;
    call.status = g.status[r];
    deviceCalls.push_back(call);
  }
  std::string problem;
  for (int k = 0; k < calls; ++k)
    for (int r = 0; r < n; ++r) {
      cudaMemsetAsync(g.status[r], 0, sizeof(uint32_t), g.streams[r]);
      const cudaError_t err = launchEngine(g.views[r], g.layout, deviceCalls[static_cast<size_t>(r)], g.streams[r]);
      if (err != cudaSuccess) problem = std::string("launchEngine: ") + cudaGetErrorString(err);
    }
  if (cudaDeviceSynchronize() != cudaSuccess) problem = "cudaDeviceSynchronize failed";
  for (int r = 0; r < n; ++r) {
    uint32_t s = 0;
    cudaMemcpy(&s, g.status[r], sizeof(s), cudaMemcpyDeviceToHost);
    if (s != 0 && problem.empty())
      problem = "rank " + std::to_string(r) + ": " + engineStatusName(static_cast<EngineStatus>(s));
    std::vector<unsigned char>& host = run.storage(r);
    cudaMemcpy(host.data(), device[r], host.size(), cudaMemcpyDeviceToHost);
    cudaFree(device[r]);
  }
  if (!problem.empty()) return c.describe(n) + ": " + problem;
  // Repeated calls (all-reduce out of place, all-gather...) give the same output; in place they would compound.
  return run.check();
}

TEST_F(EngineGpu, CollectivesMatchTheReference) {
  const EngineOp ops[] = {EngineOp::kAllReduce, EngineOp::kReduceScatter, EngineOp::kAllGather,
                          EngineOp::kBroadcast, EngineOp::kReduce, EngineOp::kAllToAll};
  for (int nranks : {1, 2, 4}) {
    GpuRanks g(nranks, 4, 8, 64 * 1024);
    uint64_t seed = 1;
    for (EngineOp op : ops)
      for (DataType type : {DataType::kFloat32, DataType::kFloat16, DataType::kBfloat16, DataType::kInt8,
                            DataType::kUint64, DataType::kFloat64})
        for (RedOp redOp : {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kAvg})
          for (size_t count : {size_t{0}, size_t{1}, size_t{4099}, size_t{1 << 20} + 3})
            for (bool inPlace : {false, true}) {
              // The large size once per collective and rank count: the host reference is slow.
              if (count > 5000 && (type != DataType::kFloat32 || redOp != RedOp::kSum)) continue;
              CollectiveCase c;
              c.op = op;
              c.type = type;
              c.redOp = redOp;
              c.count = count;
              c.inPlace = inPlace;
              c.root = static_cast<int>(seed % static_cast<uint64_t>(nranks));
              c.channels = 1 + static_cast<int>(seed % 4);
              // Every other case of a ring collective on LL (the large size too: many LL steps).
              if (op != EngineOp::kAllToAll && seed % 2 == 1) c.protocol = EngineProtocol::kLL;
              c.seed = seed++;
              const std::string problem = runOnGpu(g, c);
              ASSERT_EQ(problem, "");
            }
  }
}

// Several calls enqueued back to back on every rank's stream, one
// synchronize at the end (what training loops and nccl-tests do).
TEST_F(EngineGpu, BackToBackCallsWithOneSynchronize) {
  for (int nranks : {2, 4}) {
    GpuRanks g(nranks, 2, 4, 16 * 1024);
    CollectiveCase c;
    c.op = EngineOp::kAllReduce;
    c.count = 300001;
    c.channels = 2;
    ASSERT_EQ(runOnGpu(g, c, 8), "");
    c.op = EngineOp::kAllGather;
    ASSERT_EQ(runOnGpu(g, c, 5), "");
    // LL: its lines of earlier calls stay in the slots; the flags tell them apart.
    c.protocol = EngineProtocol::kLL;
    c.count = 3001;
    ASSERT_EQ(runOnGpu(g, c, 7), "");
    c.op = EngineOp::kAllReduce;
    ASSERT_EQ(runOnGpu(g, c, 9), "");
  }
}

// Only rank 0 of two launches: its kernel times out instead of hanging
// (Simple: the tail counter; LL: the lines its threads poll).
TEST_F(EngineGpu, AWaitWithoutItsFlagTimesOut) {
  for (EngineProtocol protocol : {EngineProtocol::kSimple, EngineProtocol::kLL}) {
    SCOPED_TRACE(engineProtocolName(protocol));
    GpuRanks g(2, 1, 2, 4096);
    void* buffer = nullptr;
    CUDA_OK(cudaMalloc(&buffer, 4096));
    EngineCall call;
    call.op = EngineOp::kAllReduce;
    call.send = call.recv = buffer;
    call.count = 1024;
    call.protocol = protocol;
    call.timeoutNs = 50'000'000;
    call.status = g.status[0];
    CUDA_OK(cudaMemset(g.status[0], 0, sizeof(uint32_t)));
    CUDA_OK(launchEngine(g.views[0], g.layout, call, g.streams[0]));
    CUDA_OK(cudaStreamSynchronize(g.streams[0]));
    uint32_t s = 0;
    CUDA_OK(cudaMemcpy(&s, g.status[0], sizeof(s), cudaMemcpyDeviceToHost));
    EXPECT_EQ(s, static_cast<uint32_t>(EngineStatus::kTimedOut));
    cudaFree(buffer);
  }
}

}  // namespace
}  // namespace loom::kernels::cuda::engine::testing
