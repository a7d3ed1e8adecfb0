#include "tests/unit/device/gdr_world.h"

namespace loom::testing::gdr {

cuda::AllocationIdentityFn unchangingIdentity() {
  return [](const void* ptr) -> Result<cuda::AllocationIdentity> {
    // An allocation starting at the buffer and larger than any test's buffer.
    return cuda::AllocationIdentity{1, reinterpret_cast<uintptr_t>(ptr), size_t{1} << 40};
  };
}

GdrWorld makeGdrWorld(int nranks, const std::function<void(int, cuda::GdrPathOptions&)>& customize) {
  GdrWorld w;
  w.nranks = nranks;
  w.fabric = transport::verbs::emulated::Fabric::create();
  w.group = LocalBootstrapGroup::create(nranks);
  for (int r = 0; r < nranks; ++r) {
    w.boots.push_back(std::make_unique<LocalBootstrap>(w.group, r));
    cuda::GdrPathOptions options;
    options.rank = r;
    options.nranks = nranks;
    options.bootstrap = w.boots.back().get();
    options.network = transport::verbsRdmaNetwork(w.fabric->provider(r));
    options.makeReducer = [](int) -> Result<std::unique_ptr<cuda::DeviceReducer>> {
      return cuda::makeEmulatedReducer();
    };
    options.identify = unchangingIdentity();
    if (customize) customize(r, options);
    w.paths.push_back(std::make_unique<cuda::GdrPath>(std::move(options)));
  }
  return w;
}

WaitContext waitFor(double seconds) {
  WaitContext w;
  w.deadline = Deadline::after(seconds);
  return w;
}

}  // namespace loom::testing::gdr
