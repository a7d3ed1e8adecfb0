// loomStreamFromCuda without a usable CUDA device (a host-only build, or no
// driver/GPU as on this machine): success with a NULL stream, and
// collectives on host buffers through that stream work end to end.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "src/device/runtime.h"
#include "loom/loom.h"

namespace {

TEST(CudaHostStreamFromCuda, NullOutputIsAnInvalidArgument) {
  EXPECT_EQ(loomStreamFromCuda(nullptr, nullptr), loomInvalidArgument);
  EXPECT_NE(std::string(loomGetLastError(nullptr)).find("loomStreamFromCuda: stream is NULL"), std::string::npos)
      << loomGetLastError(nullptr);
}

TEST(CudaHostStreamFromCuda, NoDeviceGivesNullStreamAndBlockingCollectivesOnHostBuffers) {
  if (loom::cuda::devicesUsable())
    GTEST_SKIP() << "this process has " << loom::cuda::availability().describe() << "; the test needs none";
  constexpr int kRanks = 2;
  constexpr size_t kCount = 3000;
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess) << loomGetLastError(nullptr);
  std::vector<std::string> failures(kRanks);
  auto rankBody = [&](int rank) {
    auto check = [&](bool ok, const std::string& what) {
      if (!ok && failures[static_cast<size_t>(rank)].empty()) failures[static_cast<size_t>(rank)] = what;
    };
    loomComm_t comm = nullptr;
    if (loomCommInitRank(&comm, kRanks, id, rank) != loomSuccess) return check(false, loomGetLastError(nullptr));
    // Any cudaStream_t value (here a made-up one: no device, so it is never used).
    loomStream_t stream = reinterpret_cast<loomStream_t>(uintptr_t{1});
    check(loomStreamFromCuda(reinterpret_cast<void*>(uintptr_t{0x1234}), &stream) == loomSuccess, "FromCuda");
    check(stream == nullptr, "stream not NULL without a device");
    loomStream_t defaultStream = reinterpret_cast<loomStream_t>(uintptr_t{1});
    check(loomStreamFromCuda(nullptr, &defaultStream) == loomSuccess && defaultStream == nullptr, "default stream");

    // A NULL stream is blocking: results are ready when the call returns.
    std::vector<int32_t> send(kCount), recv(kCount, -1);
    for (size_t i = 0; i < kCount; ++i) send[i] = static_cast<int32_t>(i * 3 + static_cast<size_t>(rank) * 1000);
    check(loomAllReduce(send.data(), recv.data(), kCount, loomInt32, loomSum, comm, stream) == loomSuccess,
          loomGetLastError(comm));
    for (size_t i = 0; i < kCount; ++i) check(recv[i] == static_cast<int32_t>(i * 6 + 1000), "all-reduce value");

    std::vector<int32_t> bcast(kCount);
    for (size_t i = 0; i < kCount; ++i) bcast[i] = rank == 1 ? static_cast<int32_t>(7 * i) : -1;
    check(loomBroadcast(bcast.data(), bcast.data(), kCount, loomInt32, 1, comm, stream) == loomSuccess,
          loomGetLastError(comm));
    for (size_t i = 0; i < kCount; ++i) check(bcast[i] == static_cast<int32_t>(7 * i), "broadcast value");

    std::vector<int32_t> gathered(kCount * kRanks, -1);
    check(loomAllGather(send.data(), gathered.data(), kCount, loomInt32, comm, stream) == loomSuccess,
          loomGetLastError(comm));
    for (int r = 0; r < kRanks; ++r)
      for (size_t i = 0; i < kCount; ++i)
        check(gathered[static_cast<size_t>(r) * kCount + i] == static_cast<int32_t>(i * 3 + static_cast<size_t>(r) * 1000),
              "all-gather value");

    std::vector<int32_t> block(kCount, -1);
    check(loomReduceScatter(gathered.data(), block.data(), kCount, loomInt32, loomSum, comm, stream) == loomSuccess,
          loomGetLastError(comm));
    // Every rank contributed the same `gathered`: block r summed over 2 ranks.
    for (size_t i = 0; i < kCount; ++i)
      check(block[i] == 2 * static_cast<int32_t>(i * 3 + static_cast<size_t>(rank) * 1000), "reduce-scatter value");
    loomResult_t async = loomInternalError;
    check(loomCommGetAsyncError(comm, &async) == loomSuccess && async == loomSuccess, "async error");
    check(loomCommDestroy(comm) == loomSuccess, "destroy");
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) threads.emplace_back(rankBody, r);
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(failures[static_cast<size_t>(r)], "") << "rank " << r;
}

}  // namespace
