// The staged path end to end without a GPU: CommDevices (the code every
// communicator runs for device buffers) with "device" memory emulated by
// pages the CPU cannot touch (PROT_NONE) except inside the copy engine, so a
// host algorithm that read or wrote a device buffer directly would crash the
// test. The host step is a real 2-rank Loom collective on the staging buffers.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "common/format.h"
#include "src/device/comm_devices.h"
#include "loom/loom.h"

namespace loom::cuda {
namespace {

constexpr int kRanks = 2;

// Pages that stand for device memory: inaccessible outside FakeDeviceCopies.
class FakeDeviceMemory {
 public:
  ~FakeDeviceMemory() {
    for (auto& [base, bytes] : regions_) munmap(base, bytes);
  }
  int32_t* alloc(size_t elems) {
    const size_t bytes = (elems * sizeof(int32_t) + 4095) / 4096 * 4096 + 4096;
    void* p = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(p, MAP_FAILED);
    std::lock_guard<std::mutex> lock(mu_);
    regions_.emplace_back(static_cast<std::byte*>(p), bytes);
    return static_cast<int32_t*>(p);
  }
  // The region holding p, or {nullptr, 0}.
  std::pair<std::byte*, size_t> find(const void* p) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& r : regions_)
      if (p >= r.first && p < r.first + r.second) return r;
    return {nullptr, 0};
  }
  // Runs f with the regions of a and b (if device memory) readable and
  // writable: the test's own setup and checks.
  template <class F>
  void open(const void* a, const void* b, F&& f) {
    auto ra = find(a), rb = find(b);
    for (auto r : {ra, rb})
      if (r.first) mprotect(r.first, r.second, PROT_READ | PROT_WRITE);
    f();
    for (auto r : {ra, rb})
      if (r.first) mprotect(r.first, r.second, PROT_NONE);
  }

 private:
  std::mutex mu_;
  std::vector<std::pair<std::byte*, size_t>> regions_;
};

FakeDeviceMemory& device() {
  static FakeDeviceMemory memory;
  return memory;
}

// memcpy that may touch device memory, counting what it moves.
class FakeDeviceCopies final : public CopyEngine {
 public:
  Status copy2D(void* dst, size_t dstPitch, const void* src, size_t srcPitch, size_t width, size_t height) override {
    if (failAfter_ >= 0 && copies_ >= failAfter_) return makeError(Code::kUnhandledCudaError, "emulated DMA failure");
    auto d = device().find(dst), s = device().find(src);
    if (d.first) mprotect(d.first, d.second, PROT_READ | PROT_WRITE);
    if (s.first) mprotect(s.first, s.second, PROT_READ | PROT_WRITE);
    for (size_t row = 0; row < height; ++row)
      std::memcpy(static_cast<std::byte*>(dst) + row * dstPitch, static_cast<const std::byte*>(src) + row * srcPitch,
                  width);
    if (d.first) mprotect(d.first, d.second, PROT_NONE);
    if (s.first) mprotect(s.first, s.second, PROT_NONE);
    ++copies_;
    bytes_ += width * height;
    return Status::ok();
  }
  Status finish(const WaitContext&) override { return Status::ok(); }
  int copies_ = 0;
  size_t bytes_ = 0;
  int failAfter_ = -1;
};

std::unique_ptr<CommDevices> makeDevices(int rank, FakeDeviceCopies* copies, size_t chunk) {
  DeviceSettings settings;
  settings.copyChunkBytes = chunk;
  auto classify = [](const void* p, const std::string&) -> Result<PointerInfo> {
    if (device().find(p).first) return PointerInfo{MemoryKind::kDevice, 0};
    return PointerInfo{};
  };
  return std::make_unique<CommDevices>(CommDeviceSetup{rank, kRanks, true, nullptr}, settings, classify,
                                       [copies](int) -> Result<CopyEngine*> { return copies; });
}

Status fromLoom(loomResult_t r, loomComm_t comm) {
  if (r == loomSuccess) return Status::ok();
  return makeError(Code::kInternalError, "%s", loomGetLastError(comm));
}

// The host step: the real collective through Loom's public API (blocking).
HostCollective hostCollective(loomComm_t comm) {
  return [comm](const algo::CollArgs& a) {
    const auto dt = static_cast<loomDataType_t>(a.dtype);
    const auto op = static_cast<loomRedOp_t>(a.op);
    switch (a.type) {
      case algo::CollType::kAllReduce: return fromLoom(loomAllReduce(a.sendbuf, a.recvbuf, a.count, dt, op, comm, nullptr), comm);
      case algo::CollType::kBroadcast:
        return fromLoom(loomBroadcast(a.sendbuf, a.recvbuf, a.count, dt, a.root, comm, nullptr), comm);
      case algo::CollType::kReduce:
        return fromLoom(loomReduce(a.sendbuf, a.recvbuf, a.count, dt, op, a.root, comm, nullptr), comm);
      case algo::CollType::kReduceScatter:
        return fromLoom(loomReduceScatter(a.sendbuf, a.recvbuf, a.count, dt, op, comm, nullptr), comm);
      case algo::CollType::kAllGather: return fromLoom(loomAllGather(a.sendbuf, a.recvbuf, a.count, dt, comm, nullptr), comm);
    }
    return makeError(Code::kInternalError, "unknown collective");
  };
}

// Runs body(rank, comm) on kRanks threads over a fresh clique.
template <class Body>
void withClique(Body body) {
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      loomComm_t comm = nullptr;
      ASSERT_EQ(loomCommInitRank(&comm, kRanks, id, r), loomSuccess) << loomGetLastError(nullptr);
      body(r, comm);
      EXPECT_EQ(loomCommDestroy(comm), loomSuccess);
    });
  for (auto& t : threads) t.join();
}

int32_t input(int rank, size_t i) { return static_cast<int32_t>(i * 7 + 1) * (rank + 1); }

enum class Kinds { kBothDevice, kHostSend, kHostRecv };
const char* kindsName(Kinds k) {
  return k == Kinds::kBothDevice ? "device/device" : k == Kinds::kHostSend ? "host send" : "host recv";
}

// One collective, checked against values computed here from input().
void runCase(algo::CollType type, bool inPlace, Kinds kinds) {
  constexpr size_t kCount = 1500;  // 6000 bytes per block: several 1 KiB copy chunks
  const int root = 1;
  const std::string trace = strprintf("%s in place %d %s", algo::collTypeName(type), inPlace, kindsName(kinds));
  withClique([&](int rank, loomComm_t comm) {
    SCOPED_TRACE(trace);
    const size_t sendElems = type == algo::CollType::kReduceScatter ? kCount * kRanks : kCount;
    const size_t recvElems = type == algo::CollType::kAllGather ? kCount * kRanks : kCount;
    std::vector<int32_t> hostSend(sendElems), hostRecv(recvElems);
    int32_t* send = kinds == Kinds::kHostSend ? hostSend.data() : device().alloc(sendElems);
    int32_t* recv = kinds == Kinds::kHostRecv ? hostRecv.data() : device().alloc(recvElems);
    if (inPlace) {
      // NCCL's in-place layouts; one device allocation holds both.
      const size_t big = std::max(sendElems, recvElems);
      int32_t* buf = device().alloc(big);
      send = recv = buf;
      if (type == algo::CollType::kAllGather) send = buf + static_cast<size_t>(rank) * kCount;
      if (type == algo::CollType::kReduceScatter) recv = buf + static_cast<size_t>(rank) * kCount;
    }
    auto fill = [&] {
      // Inputs, and a sentinel (-5) everywhere else, including outputs.
      int32_t* base = inPlace ? std::min(send, recv) : nullptr;
      if (inPlace) std::fill(base, base + std::max(sendElems, recvElems), -5);
      else std::fill(recv, recv + recvElems, -5);
      for (size_t i = 0; i < sendElems; ++i) send[i] = input(rank, i);
    };
    device().open(send, recv, fill);

    FakeDeviceCopies copies;
    auto devices = makeDevices(rank, &copies, 1024);
    algo::CollArgs args;
    args.type = type;
    args.sendbuf = send;
    args.recvbuf = recv;
    args.count = kCount;
    args.dtype = DataType::kInt32;
    args.op = RedOp::kSum;
    args.root = root;
    bool handled = false;
    Status s = devices->runCollective(args, WaitContext{}, hostCollective(comm), &handled);
    ASSERT_TRUE(s.isOk()) << s.message();
    EXPECT_TRUE(handled);
    EXPECT_EQ(devices->lastPath(), DataPath::kStaged);
    // Only what the call needs moves (written out here independently of the plan).
    const size_t unit = kCount * 4, sendBytes = sendElems * 4, recvBytes = recvElems * 4;
    const bool isRoot = rank == root;
    size_t expected = 0;
    if (!inPlace) {
      if (kinds != Kinds::kHostSend && !(type == algo::CollType::kBroadcast && !isRoot)) expected += sendBytes;
      if (kinds != Kinds::kHostRecv && !(type == algo::CollType::kReduce && !isRoot)) expected += recvBytes;
    } else {
      switch (type) {
        case algo::CollType::kAllReduce: expected = 2 * unit; break;
        case algo::CollType::kBroadcast: expected = unit; break;  // in on the root, out elsewhere
        case algo::CollType::kReduce: expected = isRoot ? 2 * unit : unit; break;
        case algo::CollType::kReduceScatter: expected = kRanks * unit + unit; break;
        case algo::CollType::kAllGather: expected = unit + kRanks * unit; break;
      }
    }
    EXPECT_EQ(copies.bytes_, expected) << "rank " << rank;

    auto verify = [&] {
      switch (type) {
        case algo::CollType::kAllReduce:
          for (size_t i = 0; i < kCount; ++i) ASSERT_EQ(recv[i], input(0, i) + input(1, i)) << i;
          break;
        case algo::CollType::kBroadcast:
          for (size_t i = 0; i < kCount; ++i) ASSERT_EQ(recv[i], input(root, i)) << i;
          break;
        case algo::CollType::kReduce:
          for (size_t i = 0; i < kCount; ++i)
            ASSERT_EQ(recv[i], rank == root ? input(0, i) + input(1, i) : inPlace ? input(rank, i) : -5) << i;
          break;
        case algo::CollType::kReduceScatter:
          for (size_t i = 0; i < kCount; ++i) {
            const size_t j = static_cast<size_t>(rank) * kCount + i;
            ASSERT_EQ(recv[i], input(0, j) + input(1, j)) << i;
          }
          break;
        case algo::CollType::kAllGather:
          for (int r = 0; r < kRanks; ++r)
            for (size_t i = 0; i < kCount; ++i) ASSERT_EQ(recv[static_cast<size_t>(r) * kCount + i], input(r, i)) << i;
          break;
      }
    };
    device().open(send, recv, verify);
  });
}

TEST(CudaHostStagedCollectives, EveryCollectiveAndLayoutMatchesTheReference) {
  for (auto type : {algo::CollType::kAllReduce, algo::CollType::kBroadcast, algo::CollType::kReduce,
                    algo::CollType::kReduceScatter, algo::CollType::kAllGather}) {
    for (Kinds kinds : {Kinds::kBothDevice, Kinds::kHostSend, Kinds::kHostRecv}) runCase(type, false, kinds);
    runCase(type, true, Kinds::kBothDevice);
  }
}

TEST(CudaHostStagedCollectives, HostBuffersAreNotHandled) {
  FakeDeviceCopies copies;
  auto devices = makeDevices(0, &copies, 0);
  std::vector<int32_t> a(10), b(10);
  algo::CollArgs args;
  args.sendbuf = a.data();
  args.recvbuf = b.data();
  args.count = 10;
  args.dtype = DataType::kInt32;
  bool handled = true, ran = false;
  Status s = devices->runCollective(args, WaitContext{}, [&](const algo::CollArgs&) {
    ran = true;
    return Status::ok();
  }, &handled);
  EXPECT_TRUE(s.isOk());
  EXPECT_FALSE(handled);  // the communicator runs it as always
  EXPECT_FALSE(ran);
  EXPECT_EQ(copies.copies_, 0);
  EXPECT_EQ(devices->lastPath(), DataPath::kHost);
}

TEST(CudaHostStagedCollectives, FailedCopyNamesTheBufferAndNothingRuns) {
  FakeDeviceCopies copies;
  copies.failAfter_ = 0;
  auto devices = makeDevices(1, &copies, 1024);
  int32_t* send = device().alloc(600);
  std::vector<int32_t> recv(600);
  algo::CollArgs args;
  args.sendbuf = send;
  args.recvbuf = recv.data();
  args.count = 600;
  args.dtype = DataType::kInt32;
  bool handled = false, ran = false;
  Status s = devices->runCollective(args, WaitContext{}, [&](const algo::CollArgs&) {
    ran = true;
    return Status::ok();
  }, &handled);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.code(), Code::kUnhandledCudaError);
  EXPECT_NE(s.message().find("staging copy in of sendbuff bytes [0, 1024): emulated DMA failure"), std::string::npos)
      << s.message();
  EXPECT_FALSE(ran);
}

TEST(CudaHostStagedCollectives, SendRecvStagesDeviceBuffers) {
  constexpr size_t kElems = 2000;
  withClique([&](int rank, loomComm_t comm) {
    // Rank 0 sends from device memory and receives into host memory; rank 1 the reverse.
    int32_t* dev = device().alloc(kElems);
    std::vector<int32_t> host(kElems, -5);
    device().open(dev, nullptr, [&] {
      for (size_t i = 0; i < kElems; ++i) dev[i] = rank == 0 ? input(0, i) : -5;
    });
    if (rank == 1)
      for (size_t i = 0; i < kElems; ++i) host[i] = input(1, i);
    const int peer = 1 - rank;
    std::vector<algo::P2POp> ops;
    if (rank == 0) {
      ops.push_back(algo::P2POp::send(peer, dev, kElems * 4));
      ops.push_back(algo::P2POp::recv(peer, host.data(), kElems * 4));
    } else {
      ops.push_back(algo::P2POp::send(peer, host.data(), kElems * 4));
      ops.push_back(algo::P2POp::recv(peer, dev, kElems * 4));
    }
    FakeDeviceCopies copies;
    auto devices = makeDevices(rank, &copies, 0);
    bool handled = false;
    Status s = devices->runP2P(ops, WaitContext{}, [&](const std::vector<algo::P2POp>& hostOps) {
      for (const auto& op : hostOps)
        if (device().find(op.kind == algo::P2POp::kSend ? op.src : op.dst).first)
          return makeError(Code::kInternalError, "the host step got a device pointer");
      loomGroupStart();
      for (const auto& op : hostOps) {
        if (op.kind == algo::P2POp::kSend) loomSend(op.src, op.bytes, loomUint8, op.peer, comm, nullptr);
        else loomRecv(op.dst, op.bytes, loomUint8, op.peer, comm, nullptr);
      }
      return fromLoom(loomGroupEnd(), comm);
    }, &handled);
    ASSERT_TRUE(s.isOk()) << s.message();
    EXPECT_TRUE(handled);
    EXPECT_EQ(copies.copies_, 1);  // one device buffer per rank, one chunk
    if (rank == 0) {
      for (size_t i = 0; i < kElems; ++i) ASSERT_EQ(host[i], input(1, i));
    } else {
      device().open(dev, nullptr, [&] {
        for (size_t i = 0; i < kElems; ++i) ASSERT_EQ(dev[i], input(0, i));
      });
    }
  });
}

}  // namespace
}  // namespace loom::cuda
