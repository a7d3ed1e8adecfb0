#include "shim/nccl/nccl_comm_devices.h"

#include <mutex>
#include <unordered_map>

namespace loom::nccl_shim {
namespace {

std::mutex devicesMu;
std::unordered_map<ncclComm_t, int>& devices() {
  static auto* table = new std::unordered_map<ncclComm_t, int>;  // never destroyed: usable in exit handlers
  return *table;
}

}  // namespace

void rememberDevice(ncclComm_t comm, int device) {
  if (!comm) return;
  std::lock_guard<std::mutex> lock(devicesMu);
  devices()[comm] = device;
}

int deviceOf(ncclComm_t comm) {
  std::lock_guard<std::mutex> lock(devicesMu);
  auto it = devices().find(comm);
  return it == devices().end() ? 0 : it->second;
}

void forgetDevice(ncclComm_t comm) {
  std::lock_guard<std::mutex> lock(devicesMu);
  devices().erase(comm);
}

}  // namespace loom::nccl_shim
