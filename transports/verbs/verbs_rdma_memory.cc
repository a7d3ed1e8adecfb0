#include "transports/verbs/verbs_rdma_memory.h"

#include <mutex>
#include <utility>

#include "transports/verbs/verbs_api.h"
#include "transports/verbs/verbs_rdma_links.h"
#include "transports/verbs/verbs_transport.h"

namespace loom::transport {

namespace {

class VerbsRdmaNetwork final : public RdmaNetwork {
 public:
  // A null provider: defaultVerbsProvider(), on first use.
  explicit VerbsRdmaNetwork(std::shared_ptr<verbs::Provider> provider) : provider_(std::move(provider)) {}

  std::string probe() override { return provider().probe(); }
  std::string probeDeviceMemory() override { return provider().probeDeviceMemory(); }
  Result<std::unique_ptr<RdmaLinks>> connect(int rank, int nranks, bootstrap::Bootstrap& bootstrap,
                                             const WaitContext& wait, std::string* whyNot) override {
    return verbs::VerbsRdmaLinks::connect(rank, nranks, provider(), bootstrap, wait, whyNot);
  }

 private:
  verbs::Provider& provider() {
    std::call_once(resolved_, [this] {
      if (!provider_) provider_ = defaultVerbsProvider();
    });
    return *provider_;
  }

  std::shared_ptr<verbs::Provider> provider_;
  std::once_flag resolved_;
};

}  // namespace

std::shared_ptr<RdmaNetwork> verbsRdmaNetwork(std::shared_ptr<verbs::Provider> provider) {
  return std::make_shared<VerbsRdmaNetwork>(std::move(provider));
}

std::shared_ptr<RdmaNetwork> defaultVerbsRdmaNetwork() { return std::make_shared<VerbsRdmaNetwork>(nullptr); }

}  // namespace loom::transport
