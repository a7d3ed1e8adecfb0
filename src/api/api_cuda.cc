// C ABI: loomStreamFromCuda. One Loom stream per CUDA stream, created on
// first use and cached for the process (see loom.h for the lifetime).
#include <mutex>
#include <unordered_map>

#include "src/api/cuda_streams.h"
#include "src/api/handles.h"
#include "src/device/runtime.h"

namespace {

std::mutex cacheMu;
// cudaStream_t -> its Loom stream. Never destroyed: streams may be used from
// threads that outlive static destruction.
auto& cache = *new std::unordered_map<void*, loomStream_t>;

}  // namespace

namespace loom::api {

void forgetCudaStream(loomStream_t stream) {
  if (!stream->impl.device()) return;
  std::lock_guard<std::mutex> lock(cacheMu);
  for (auto it = cache.begin(); it != cache.end(); ++it) {
    if (it->second == stream) {
      cache.erase(it);
      return;
    }
  }
}

loomStream_t bindStreamToDeviceForTesting(std::unique_ptr<cuda::DeviceStream> device) {
  auto* created = new loomStream;
  created->impl.bindDevice(std::move(device));
  registerStream(created);
  return created;
}

}  // namespace loom::api

extern "C" {

loomResult_t loomStreamFromCuda(void* cudaStream, loomStream_t* stream) {
  using loom::Code;
  if (!stream)
    return loom::api::fail(nullptr, loom::makeError(Code::kInvalidArgument, "loomStreamFromCuda: stream is NULL"));
  *stream = nullptr;
  // No usable device (a host-only build, no driver, no GPU): blocking
  // collectives, which keep stream order for host buffers.
  if (!loom::cuda::devicesUsable()) return loomSuccess;
  std::lock_guard<std::mutex> lock(cacheMu);
  if (auto it = cache.find(cudaStream); it != cache.end()) {
    *stream = it->second;
    return loomSuccess;
  }
  auto bound = loom::cuda::bindCudaStream(cudaStream);
  if (!bound.isOk())
    return loom::api::fail(nullptr, bound.status().withContext("loomStreamFromCuda: "));
  auto* created = new loomStream;
  created->impl.bindDevice(std::move(bound).value());
  loom::api::registerStream(created);
  cache.emplace(cudaStream, created);
  *stream = created;
  return loomSuccess;
}

}  // extern "C"
