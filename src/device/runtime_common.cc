// The parts of src/device/runtime.h that are the same with and without CUDA.
#include <atomic>
#include <bit>
#include <cstdio>
#include <cstring>

#include "common/format.h"
#include "src/device/runtime_internal.h"

namespace loom::cuda {
namespace {

// cudaMemoryType and cudaError_t values (runtime_cuda.cc checks them against the headers).
constexpr int kTypeUnregistered = 0, kTypeHost = 1, kTypeDevice = 2, kTypeManaged = 3;
constexpr int kErrorInvalidValue = 1;

std::atomic<int> usableFlag{-1};  // -1: not asked yet

}  // namespace

std::string Availability::describe() const {
  if (usable()) return strprintf("%d CUDA device(s)", deviceCount);
  if (!compiledWithCuda) return "no CUDA device found (" + errorString + ")";
  return "no CUDA device found (cudaGetDeviceCount: " + errorString + ")";
}

const Availability& availability() {
  static const Availability probed = [] {
    Availability a = detail::probeAvailability();
    usableFlag.store(a.usable() ? 1 : 0, std::memory_order_release);
    return a;
  }();
  return probed;
}

bool devicesUsable() {
  const int flag = usableFlag.load(std::memory_order_relaxed);
  if (flag >= 0) return flag == 1;
  return availability().usable();
}

Result<PointerInfo> pointerInfoFromAttributes(const RawPointerAttributes& attrs, const std::string& what) {
  if (attrs.error == kErrorInvalidValue) return PointerInfo{};  // pre-11 runtimes: memory CUDA never saw
  if (attrs.error != 0)
    return makeError(Code::kUnhandledCudaError, "%s: cudaPointerGetAttributes failed with CUDA error %d", what.c_str(),
                     attrs.error);
  switch (attrs.type) {
    case kTypeUnregistered: return PointerInfo{};
    case kTypeHost: return PointerInfo{MemoryKind::kPinnedHost, -1};
    case kTypeDevice: return PointerInfo{MemoryKind::kDevice, attrs.device};
    case kTypeManaged: return PointerInfo{MemoryKind::kManaged, attrs.device};
  }
  return makeError(Code::kUnhandledCudaError, "%s: cudaPointerGetAttributes returned unknown memory type %d",
                   what.c_str(), attrs.type);
}

Result<PointerInfo> classifyPointer(const void* ptr, const std::string& what) {
  if (ptr == nullptr || !devicesUsable()) return PointerInfo{};
  return pointerInfoFromAttributes(detail::pointerAttributes(ptr), what);
}

// ---- PinnedPool ----

PinnedPool& PinnedPool::instance() {
  // Never destroyed: leases may be returned by threads that outlive main's statics.
  static PinnedPool* pool = new PinnedPool;
  return *pool;
}

Result<PinnedPool::Lease> PinnedPool::acquire(size_t bytes) {
  const size_t capacity = std::bit_ceil(std::max<size_t>(bytes, 64 * 1024));
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < free_.size(); ++i) {
      if (free_[i].first != capacity) continue;
      void* data = free_[i].second;
      free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(i));
      cachedBytes_ -= capacity;
      return Lease(data, capacity);
    }
  }
  auto data = detail::allocPinned(capacity);
  LOOM_TRY(data.status());
  return Lease(data.value(), capacity);
}

void PinnedPool::release(void* data, size_t bytes) {
  // Keep up to 1 GiB for reuse; beyond that give memory back at once (pinned
  // memory is locked RAM the rest of the machine cannot page).
  constexpr size_t kKeepBytes = size_t{1} << 30;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (cachedBytes_ + bytes <= kKeepBytes) {
      free_.emplace_back(bytes, data);
      cachedBytes_ += bytes;
      return;
    }
  }
  detail::freePinned(data);
}

size_t PinnedPool::cachedBytes() {
  std::lock_guard<std::mutex> lock(mu_);
  return cachedBytes_;
}

PinnedPool::Lease& PinnedPool::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    if (data_) PinnedPool::instance().release(data_, bytes_);
    data_ = other.data_;
    bytes_ = other.bytes_;
    other.data_ = nullptr;
  }
  return *this;
}

PinnedPool::Lease::~Lease() {
  if (data_) PinnedPool::instance().release(data_, bytes_);
}

// ---- Host copies ----

namespace {

class HostCopyEngine final : public CopyEngine {
 public:
  Status copy2D(void* dst, size_t dstPitch, const void* src, size_t srcPitch, size_t width, size_t height) override {
    auto* d = static_cast<std::byte*>(dst);
    const auto* s = static_cast<const std::byte*>(src);
    for (size_t row = 0; row < height; ++row) std::memmove(d + row * dstPitch, s + row * srcPitch, width);
    return Status::ok();
  }
  Status finish(const WaitContext&) override { return Status::ok(); }
};

}  // namespace

std::unique_ptr<CopyEngine> makeHostCopyEngine() { return std::make_unique<HostCopyEngine>(); }

}  // namespace loom::cuda
