// Shared-memory bulletins without a segment, for algorithm tests that run
// ranks as threads.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "transports/shm/shm_bulletin.h"

namespace loom::testing {

// Every rank's bulletin in this process's heap, zeroed like a fresh segment;
// the rounds go on from one run to the next, as in a communicator.
class HeapBulletins {
 public:
  explicit HeapBulletins(int n) {
    using namespace transport::shm;
    const uint64_t stride = (1 + kBulletinCapacityBytes / 4) * 8;
    std::vector<BulletinView> views;
    for (int r = 0; r < n; ++r) {
      controls_.push_back(std::make_unique<BulletinControl>());
      lines_.emplace_back(kBulletinBuffers * stride / 8, 0);
      views.push_back({controls_.back().get(), reinterpret_cast<std::byte*>(lines_.back().data()), stride,
                       kBulletinCapacityBytes});
    }
    for (int r = 0; r < n; ++r) bulletins_.push_back(std::make_unique<ShmBulletin>(r, views));
  }
  transport::Bulletin* of(int rank) const { return bulletins_[static_cast<size_t>(rank)].get(); }

 private:
  std::vector<std::unique_ptr<transport::shm::BulletinControl>> controls_;
  std::vector<std::vector<uint64_t>> lines_;
  std::vector<std::unique_ptr<transport::shm::ShmBulletin>> bulletins_;
};

}  // namespace loom::testing
