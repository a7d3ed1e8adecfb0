#include "transports/verbs/verbs_progress.h"

namespace loom::transport::verbs {

void CompletionPump::progress() {
  WorkCompletion wcs[32];
  std::lock_guard<std::mutex> lock(mutex_);
  for (;;) {
    auto polled = cq_.poll(wcs, 32);
    if (!polled.isOk()) {
      // The CQ is lost (overrun): no completion will be reported any more.
      for (auto& [qpn, link] : links_)
        link->fail(polled.status().withContext(strprintf("rank %d <-> rank %d (host %s): ", link->who().selfRank,
                                                         link->who().peerRank, link->who().peerHost.c_str())));
      return;
    }
    int n = polled.value();
    for (int i = 0; i < n; ++i) {
      auto it = links_.find(wcs[i].qpNum);
      if (it != links_.end()) it->second->onCompletion(wcs[i]);
    }
    if (n < 32) return;
  }
}

void CompletionPump::sleepArmed(bool armed, int millis) {
  if (!armed) {
    WaitSignal local;
    local.sleep(0, 1);
    return;
  }
  struct pollfd p{cq_.eventFd(), POLLIN, 0};
  (void)::poll(&p, 1, millis);
  cq_.drainEvents();
}

}  // namespace loom::transport::verbs
