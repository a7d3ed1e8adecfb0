// Built only where torch has CUDA and the CUDA headers are installed
// (LOOM_TORCH_CUDA); see cuda_ordering.h.
#include "bindings/torch/cuda_ordering.h"

#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <map>
#include <mutex>

#include <loom/loom.h>

namespace loom_torch {

struct CudaStreams {
  std::mutex mu;
  std::map<c10::DeviceIndex, c10::cuda::CUDAStream> byDevice;
};

namespace {

class CudaSide : public DeviceSide {
 public:
  CudaSide(const at::Device& device, c10::cuda::CUDAStream internal)
      : device_(device), internal_(internal) {
    TORCH_CHECK(loomStreamFromCuda(internal_.stream(), &loomStream_) == loomSuccess, "loom: no Loom stream for ",
                device_, "'s CUDA stream: ", loomGetLastError(nullptr));
    TORCH_CHECK(loomStream_ != nullptr, "loom: got a tensor on ", device_,
                ", but Loom has no usable CUDA device (built without CUDA, or no driver)");
  }

  loomStream_t stream() const override { return loomStream_; }

  void orderAfterCurrent() override {
    c10::cuda::CUDAGuard guard(device_);
    ready_.record(c10::cuda::getCurrentCUDAStream(device_.index()));
    ready_.block(internal_);
  }

  void recordEnd() override {
    c10::cuda::CUDAGuard guard(device_);
    end_.record(internal_);
  }

  bool query() override { return end_.query(); }

  void synchronize() override { end_.synchronize(); }

  void blockCurrentStream() override {
    c10::cuda::CUDAGuard guard(device_);
    end_.block(c10::cuda::getCurrentCUDAStream(device_.index()));
  }

  c10::cuda::CUDAStream internal() const { return internal_; }
  const at::Device& device() const { return device_; }

 private:
  at::Device device_;
  c10::cuda::CUDAStream internal_;
  loomStream_t loomStream_ = nullptr;
  at::cuda::CUDAEvent ready_;
  at::cuda::CUDAEvent end_;
};

}  // namespace

std::shared_ptr<DeviceSide> cudaSideFor(const at::Device& device, std::shared_ptr<CudaStreams>& streams) {
  if (!streams) streams = std::make_shared<CudaStreams>();
  std::lock_guard<std::mutex> lock(streams->mu);
  auto it = streams->byDevice.find(device.index());
  if (it == streams->byDevice.end())
    it = streams->byDevice.emplace(device.index(), c10::cuda::getStreamFromPool(/*isHighPriority=*/true, device.index()))
             .first;
  return std::make_shared<CudaSide>(device, it->second);
}

void runOnDeviceStream(DeviceSide& side, const std::function<void()>& fn) {
  auto& cuda = static_cast<CudaSide&>(side);
  c10::cuda::CUDAStreamGuard guard(cuda.internal());
  fn();
}

}  // namespace loom_torch
