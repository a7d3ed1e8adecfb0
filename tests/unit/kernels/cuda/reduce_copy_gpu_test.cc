// The real reduce-copy kernels on a GPU, compared with the host emulation of
// the same launch (same grid, same pointer alignment modulo 16) and with the
// independent reference. Skips, saying why, when there is no CUDA device.
// NaN payloads are not compared (the device's fp16/bf16 arithmetic returns
// its canonical NaN); every other bit is.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/reduce_copy.h"
#include "kernels/cuda/reduce_copy_emulation.h"
#include "tests/unit/kernels/reference.h"
#include "tests/unit/kernels/test_data.h"
#include "tests/unit/kernels/cuda/reduce_copy_reference.h"

namespace loom::kernels::cuda {
namespace {

class ReduceCopyGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    int devices = 0;
    const cudaError_t err = cudaGetDeviceCount(&devices);
    if (err != cudaSuccess || devices == 0) {
      cudaGetLastError();  // clear it for later tests
      GTEST_SKIP() << "no CUDA device found (cudaGetDeviceCount: "
                   << (err != cudaSuccess ? cudaGetErrorString(err) : "0 devices") << ")";
    }
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
  }
  void TearDown() override {
    if (stream_) cudaStreamDestroy(stream_);
  }
  cudaStream_t stream_ = nullptr;
};

// Device memory whose data starts `offset` bytes past a 256-byte boundary.
struct DeviceBuffer {
  DeviceBuffer(size_t bytes, size_t offset) : offset(offset) {
    EXPECT_EQ(cudaMalloc(&base, bytes + offset + 16), cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(base); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  unsigned char* data() const { return static_cast<unsigned char*>(base) + offset; }
  void* base = nullptr;
  size_t offset;
};

void compareWithEmulation(cudaStream_t stream, DataType type, RedOp op, int nsrcs, int ndsts, size_t count,
                          size_t srcOffset, size_t dstOffset, LaunchShape shape, PostOp post, uint64_t seed) {
  SCOPED_TRACE(std::string(dataTypeName(type)) + " " + redOpName(op) + " k=" + std::to_string(nsrcs) +
               " m=" + std::to_string(ndsts) + " count=" + std::to_string(count) + " offsets=" +
               std::to_string(srcOffset) + "/" + std::to_string(dstOffset) + " grid=" +
               std::to_string(shape.blocks) + "x" + std::to_string(shape.threadsPerBlock));
  const size_t bytes = count * dataTypeSize(type);
  ReduceCopyArgs host, device;
  host.type = device.type = type;
  host.op = device.op = op;
  host.nsrcs = device.nsrcs = nsrcs;
  host.ndsts = device.ndsts = ndsts;
  host.count = device.count = count;
  host.post = device.post = post;
  host.nranks = device.nranks = nsrcs + 1;
  host.scalar = device.scalar = seed;  // any bit pattern is a valid scalar
  std::vector<std::vector<unsigned char>> inputs;
  std::vector<const void*> inputPtrs;
  std::vector<std::unique_ptr<DeviceBuffer>> dsrcs, ddsts;
  std::vector<std::vector<unsigned char>> hsrcs(nsrcs), hdsts(ndsts);
  for (int j = 0; j < nsrcs; ++j) {
    inputs.push_back(testdata::randomBuffer(type, count, seed + j));
    inputPtrs.push_back(inputs.back().data());
    dsrcs.push_back(std::make_unique<DeviceBuffer>(bytes, srcOffset));
    ASSERT_EQ(cudaMemcpy(dsrcs[j]->data(), inputs[j].data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
    device.srcs[j] = dsrcs[j]->data();
    // Host copies with the same address modulo 16, so the emulation plans the same split.
    hsrcs[j].assign(bytes + 32, 0);
    unsigned char* aligned = hsrcs[j].data() + (16 - reinterpret_cast<uintptr_t>(hsrcs[j].data()) % 16) % 16;
    std::memcpy(aligned + srcOffset, inputs[j].data(), bytes);
    host.srcs[j] = aligned + srcOffset;
  }
  for (int j = 0; j < ndsts; ++j) {
    ddsts.push_back(std::make_unique<DeviceBuffer>(bytes, dstOffset));
    device.dsts[j] = ddsts[j]->data();
    hdsts[j].assign(bytes + 32, 0);
    unsigned char* aligned = hdsts[j].data() + (16 - reinterpret_cast<uintptr_t>(hdsts[j].data()) % 16) % 16;
    host.dsts[j] = aligned + dstOffset;
  }
  ASSERT_EQ(launchReduceCopy(device, stream, shape), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  ASSERT_EQ(emulateReduceCopy(host, shape), nullptr);
  const auto expected = testing::expectedReduceCopy(type, op, inputPtrs, count, post, nsrcs + 1, seed);
  std::vector<unsigned char> out(bytes);
  for (int j = 0; j < ndsts; ++j) {
    if (bytes > 0) {
      ASSERT_EQ(cudaMemcpy(out.data(), ddsts[j]->data(), bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    }
    EXPECT_EQ(testref::firstMismatch(type, host.dsts[j], out.data(), count), count) << "device vs emulation, dst " << j;
    EXPECT_EQ(testref::firstMismatch(type, expected.data(), out.data(), count), count)
        << "device vs reference, dst " << j;
  }
}

TEST_F(ReduceCopyGpu, EveryTypeOpMatchesEmulation) {
  uint64_t seed = 1;
  for (DataType type : testdata::allTypes())
    for (RedOp op : testdata::allOps())
      for (int k : {1, 2, 3, 8})
        for (int m : {1, 2})
          for (size_t count : {size_t{0}, size_t{1}, size_t{37}, size_t{4099}}) {
            const PostOp post = op == RedOp::kAvg ? PostOp::kDivideByRanks : PostOp::kNone;
            compareWithEmulation(stream_, type, op, k, m, count, 0, 0, {3, 64}, post, seed += 10);
            if (HasFatalFailure()) return;
          }
}

TEST_F(ReduceCopyGpu, MisalignedPointersAndShapes) {
  for (DataType type : testdata::allTypes())
    for (size_t offset : {size_t{1}, size_t{2}, size_t{4}, size_t{8}, size_t{12}, size_t{15}}) {
      compareWithEmulation(stream_, type, RedOp::kSum, 3, 2, 1001, offset, offset, {2, 96}, PostOp::kNone, 7);
      compareWithEmulation(stream_, type, RedOp::kMax, 2, 1, 1001, offset, (offset + 8) % 16, {5, 32},
                           PostOp::kNone, 8);
      if (HasFatalFailure()) return;
    }
  for (DataType type : {DataType::kFloat16, DataType::kBfloat16, DataType::kFloat32, DataType::kInt64}) {
    compareWithEmulation(stream_, type, RedOp::kSum, 2, 1, 3, 0, 0, {4, 256}, PostOp::kNone, 9);
    compareWithEmulation(stream_, type, RedOp::kProd, 2, 2, 1 << 20, 0, 0, {}, PostOp::kNone, 10);
    compareWithEmulation(stream_, type, RedOp::kSum, 8, 1, (1 << 20) + 3, 2 * dataTypeSize(type),
                         2 * dataTypeSize(type), {}, PostOp::kNone, 11);
    compareWithEmulation(stream_, type, RedOp::kSum, 1, 2, 1 << 16, 0, 0, {1, 1}, PostOp::kMultiplyByScalar, 12);
  }
}

TEST_F(ReduceCopyGpu, InvalidArgumentsAreRejectedBeforeLaunch) {
  ReduceCopyArgs args;  // nsrcs = 0
  EXPECT_EQ(launchReduceCopy(args, stream_), cudaErrorInvalidValue);
  args.nsrcs = 1;
  args.ndsts = 1;
  args.count = 0;  // nothing to do: success without a launch
  EXPECT_EQ(launchReduceCopy(args, stream_), cudaSuccess);
}

}  // namespace
}  // namespace loom::kernels::cuda
