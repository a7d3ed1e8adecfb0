// The driver side of allocation identities (src/device/allocation_identity.h):
// libcuda through dlopen. What runs without a GPU: a missing library is
// reported by name, host memory has no identity, and (where only the
// toolkit's stub driver exists) the loaded entry points report the driver's
// own error. With a GPU: buffer ids of real allocations.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "src/device/allocation_identity.h"

#if LOOM_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace loom::cuda {
namespace {

std::string pointerText(const void* p) {
  char text[32];
  std::snprintf(text, sizeof text, "%p", p);
  return text;
}

// Whether this machine has a CUDA driver at all.
bool driverInstalled() {
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (handle) dlclose(handle);
  return handle != nullptr;
}

TEST(DriverAllocationIdentity, AMissingDriverLibraryIsReportedByName) {
  auto queries = CudaDriverQueries::load("libloom-test-no-such-driver.so.1");
  ASSERT_FALSE(queries.isOk());
#if LOOM_HAVE_CUDA
  EXPECT_NE(queries.status().message().find(
                "the CUDA driver library libloom-test-no-such-driver.so.1 could not be loaded ("),
            std::string::npos)
      << queries.status().message();
#else
  EXPECT_NE(queries.status().message().find("built without CUDA"), std::string::npos) << queries.status().message();
#endif
}

TEST(DriverAllocationIdentity, HostMemoryWithoutADriverHasNoIdentityAndSaysWhy) {
  if (driverInstalled()) GTEST_SKIP() << "a CUDA driver is installed here; this checks the message without one";
  std::vector<char> host(64);
  auto id = driverAllocationIdentity(host.data());
  ASSERT_FALSE(id.isOk());
  const std::string& why = id.status().message();
  EXPECT_NE(why.find("identifying the allocation of " + pointerText(host.data())), std::string::npos) << why;
#if LOOM_HAVE_CUDA
  EXPECT_NE(why.find("libcuda.so.1 could not be loaded"), std::string::npos) << why;
#else
  EXPECT_NE(why.find("built without CUDA"), std::string::npos) << why;
#endif
  // Asked again: the same answer, from the remembered failed load.
  auto again = driverAllocationIdentity(host.data());
  ASSERT_FALSE(again.isOk());
  EXPECT_EQ(again.status().message(), why);
}

TEST(DriverAllocationIdentityDeathTest, TheStubDriverAnswersThroughTheLoadedEntryPoints) {
#if !LOOM_HAVE_CUDA || !defined(LOOM_TEST_CUDA_STUB_DRIVER)
  GTEST_SKIP() << "no CUDA toolkit stub driver in this build";
#else
  // Loading the stub would make it this process's libcuda.so.1 (by soname):
  // only where no real driver exists, and only in a child process.
  if (driverInstalled()) GTEST_SKIP() << "a real CUDA driver is installed; the stub is loaded only where none is";
  const std::string stub = LOOM_TEST_CUDA_STUB_DRIVER;
  if (access(stub.c_str(), R_OK) != 0) GTEST_SKIP() << stub << " is missing";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // The stub resolves every symbol and fails every call (cuInit first).
  EXPECT_EXIT(
      {
        auto queries = CudaDriverQueries::load(stub);
        const std::string why = queries.isOk() ? "loaded" : queries.status().message();
        std::fprintf(stderr, "%s\n", why.c_str());
        std::_Exit(why.find("cuInit from " + stub + " failed: ") != std::string::npos ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "cuInit from .* failed: ");
#endif
}

#if LOOM_HAVE_CUDA
TEST(DriverAllocationIdentity, CudaAllocationsHaveTheirOwnIdsAndAReallocationANewOne) {
  int devices = 0;
  const cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0)
    GTEST_SKIP() << "no CUDA device (" << cudaGetErrorString(err) << "): buffer ids need real allocations";
  constexpr size_t kBytes = size_t{4} << 20;
  void* a = nullptr;
  void* b = nullptr;
  ASSERT_EQ(cudaMalloc(&a, kBytes), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&b, kBytes), cudaSuccess);
  auto ia = driverAllocationIdentity(static_cast<char*>(a) + 1000);  // inside: the same allocation
  auto ib = driverAllocationIdentity(b);
  ASSERT_TRUE(ia.isOk()) << ia.status().message();
  ASSERT_TRUE(ib.isOk()) << ib.status().message();
  EXPECT_NE(ia.value().bufferId, 0u);
  EXPECT_NE(ia.value().bufferId, ib.value().bufferId);
  EXPECT_EQ(ia.value().base, reinterpret_cast<uintptr_t>(a));
  EXPECT_GE(ia.value().size, kBytes);
  const uint64_t oldId = ia.value().bufferId;
  ASSERT_EQ(cudaFree(a), cudaSuccess);
  void* c = nullptr;
  ASSERT_EQ(cudaMalloc(&c, kBytes), cudaSuccess);
  auto ic = driverAllocationIdentity(c);
  ASSERT_TRUE(ic.isOk()) << ic.status().message();
  EXPECT_NE(ic.value().bufferId, oldId) << "a new allocation" << (c == a ? " at the freed one's address" : "")
                                        << " kept the freed one's buffer id";
  EXPECT_NE(ic.value().bufferId, ib.value().bufferId);
  ASSERT_EQ(cudaFree(b), cudaSuccess);
  ASSERT_EQ(cudaFree(c), cudaSuccess);
}
#endif

}  // namespace
}  // namespace loom::cuda
