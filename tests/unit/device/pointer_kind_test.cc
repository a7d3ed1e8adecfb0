// Pointer kinds: the mapping from cudaPointerGetAttributes, and the
// classification in a process without a usable device.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <vector>

#include "src/device/comm_devices.h"
#include "src/device/runtime.h"

namespace loom::cuda {
namespace {

TEST(CudaHostPointerKind, AttributesMapToKinds) {
  // cudaMemoryType values: 0 unregistered, 1 host, 2 device, 3 managed.
  auto kind = [](int type, int device = 0) {
    auto r = pointerInfoFromAttributes({0, type, device}, "sendbuff 0x1 on rank 0");
    EXPECT_TRUE(r.isOk()) << r.status().message();
    return r.isOk() ? r.value() : PointerInfo{};
  };
  EXPECT_EQ(kind(0).kind, MemoryKind::kHost);  // plain malloc since CUDA 11: no error
  EXPECT_EQ(kind(1).kind, MemoryKind::kPinnedHost);
  EXPECT_EQ(kind(2, 3).kind, MemoryKind::kDevice);
  EXPECT_EQ(kind(2, 3).device, 3);
  EXPECT_EQ(kind(3, 1).kind, MemoryKind::kManaged);
  EXPECT_FALSE(needsStaging(MemoryKind::kHost));
  EXPECT_FALSE(needsStaging(MemoryKind::kPinnedHost));
  EXPECT_TRUE(needsStaging(MemoryKind::kDevice));
  EXPECT_TRUE(needsStaging(MemoryKind::kManaged));
}

TEST(CudaHostPointerKind, InvalidValueIsHostOtherErrorsNameTheBuffer) {
  // cudaErrorInvalidValue (1): what runtimes before CUDA 11 said for memory they never saw.
  auto old = pointerInfoFromAttributes({1, 0, -1}, "recvbuff 0x10 on rank 1");
  ASSERT_TRUE(old.isOk());
  EXPECT_EQ(old.value().kind, MemoryKind::kHost);
  // Anything else (e.g. 35, cudaErrorInsufficientDriver) is an error naming the buffer and rank.
  auto bad = pointerInfoFromAttributes({35, 0, -1}, "recvbuff 0x10 on rank 1");
  ASSERT_FALSE(bad.isOk());
  EXPECT_EQ(bad.status().code(), Code::kUnhandledCudaError);
  EXPECT_NE(bad.status().message().find("recvbuff 0x10 on rank 1"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("35"), std::string::npos);
  auto unknown = pointerInfoFromAttributes({0, 7, 0}, "sendbuff 0x20 on rank 0");
  ASSERT_FALSE(unknown.isOk());
  EXPECT_NE(unknown.status().message().find("unknown memory type 7"), std::string::npos);
}

TEST(CudaHostPointerKind, WithoutADeviceEveryPointerIsHostAndCommsGetNoDeviceSupport) {
  const Availability& a = availability();
  if (a.usable()) GTEST_SKIP() << "this process has " << a.describe() << "; the no-device behaviour needs none";
  EXPECT_EQ(devicesUsable(), false);
  EXPECT_NE(a.describe().find("no CUDA device found ("), std::string::npos) << a.describe();
  if (a.compiledWithCuda) {
    // cudaGetDeviceCount failed (here: no driver) or found none; its string is kept.
    EXPECT_NE(a.describe().find("cudaGetDeviceCount: "), std::string::npos) << a.describe();
    EXPECT_FALSE(a.errorString.empty());
  } else {
    EXPECT_NE(a.describe().find("built without CUDA"), std::string::npos) << a.describe();
  }
  // Any pointer value is host memory here, and classifying it never dereferences it.
  std::vector<float> heap(16);
  for (const void* p : {static_cast<const void*>(heap.data()), reinterpret_cast<const void*>(uintptr_t{0xdeadbeef}),
                        reinterpret_cast<const void*>(uintptr_t{0x7f0000000000}), static_cast<const void*>(nullptr)}) {
    auto info = classifyPointer(p, "sendbuff");
    ASSERT_TRUE(info.isOk()) << info.status().message();
    EXPECT_EQ(info.value().kind, MemoryKind::kHost);
    EXPECT_EQ(info.value().device, -1);
  }
  // Communicators then carry no device support at all: host calls pay one null check.
  EXPECT_EQ(CommDevices::create({0, 2, true, nullptr}, Logger()), nullptr);
}

TEST(CudaHostPointerKind, PinnedPoolReusesBuffersBySize) {
  PinnedPool& pool = PinnedPool::instance();
  const size_t before = pool.cachedBytes();
  void* first = nullptr;
  {
    auto lease = pool.acquire(100 * 1024);
    ASSERT_TRUE(lease.isOk()) << lease.status().message();
    EXPECT_EQ(lease.value().bytes(), 128u * 1024);  // rounded up to a power of two
    first = lease.value().data();
    static_cast<char*>(first)[128 * 1024 - 1] = 1;  // all of it is usable
  }
  EXPECT_EQ(pool.cachedBytes(), before + 128 * 1024);
  auto again = pool.acquire(120 * 1024);
  ASSERT_TRUE(again.isOk());
  EXPECT_EQ(again.value().data(), first);  // the same buffer, no new allocation
  EXPECT_EQ(pool.cachedBytes(), before);
}

TEST(CudaHostPointerKind, SettingsFromTheEnvironment) {
  setenv("LOOM_CUDA_P2P", "1", 1);
  setenv("LOOM_CUDA_COPY_CHUNK", "2M", 1);
  std::vector<std::string> warnings;
  DeviceSettings s = DeviceSettings::fromConfig(Config::fromEnv(), &warnings);
  EXPECT_TRUE(s.directP2P);
  EXPECT_EQ(s.copyChunkBytes, size_t{2} << 20);
  EXPECT_TRUE(warnings.empty());
  setenv("LOOM_CUDA_P2P", "yes", 1);
  setenv("LOOM_CUDA_COPY_CHUNK", "12Q", 1);
  s = DeviceSettings::fromConfig(Config::fromEnv(), &warnings);
  EXPECT_FALSE(s.directP2P);
  EXPECT_EQ(s.copyChunkBytes, size_t{8} << 20);  // the default survives
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[0].find("LOOM_CUDA_P2P='yes'"), std::string::npos);
  EXPECT_NE(warnings[1].find("LOOM_CUDA_COPY_CHUNK='12Q'"), std::string::npos);
  unsetenv("LOOM_CUDA_P2P");
  unsetenv("LOOM_CUDA_COPY_CHUNK");
}

}  // namespace
}  // namespace loom::cuda
