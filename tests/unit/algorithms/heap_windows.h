// Shared-memory windows without a segment, for algorithm tests that run
// ranks as threads.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "transports/shm/shm_windows.h"

namespace loom::testing {

// Every rank's window in this process's heap, zeroed like a fresh segment;
// the phases go on from one run to the next, as in a communicator. With
// `peerCopies`, each control block names this process as its owner, as the
// shm transport's do, so that direct copies between the ranks work (memcpy:
// they are threads of one process).
class HeapWindows {
 public:
  HeapWindows(int n, size_t bytes, bool peerCopies = false) {
    using namespace transport::shm;
    std::vector<WindowView> views;
    for (int r = 0; r < n; ++r) {
      controls_.push_back(std::make_unique<WindowControl>());
      if (peerCopies) {
        controls_.back()->ownerPid = static_cast<uint64_t>(getpid());
        controls_.back()->ownerAddress = reinterpret_cast<uintptr_t>(controls_.back().get());
      }
      data_.emplace_back(bytes / 8, 0);
      views.push_back({controls_.back().get(), reinterpret_cast<std::byte*>(data_.back().data()), bytes});
    }
    for (int r = 0; r < n; ++r) {
      windows_.push_back(std::make_unique<ShmWindows>(r, views));
      if (peerCopies) windows_.back()->enablePeerCopies();
    }
  }
  transport::SharedWindows* of(int rank) const { return windows_[static_cast<size_t>(rank)].get(); }

 private:
  std::vector<std::unique_ptr<transport::shm::WindowControl>> controls_;
  std::vector<std::vector<uint64_t>> data_;
  std::vector<std::unique_ptr<transport::shm::ShmWindows>> windows_;
};

}  // namespace loom::testing
