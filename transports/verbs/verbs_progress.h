// Completion handling of the verbs transport: one CQ per transport serves
// every peer's QP, and whoever waits polls it. There is no progress thread:
// the HCA moves the bytes, so the executor only has to reap completions
// while it waits (or in tryAcquire), and an idle communicator costs nothing.
//
// A wait (waitForLink) polls the CQ for LOOM_SPIN_US, then polls and yields
// for LOOM_YIELD_US, then sleeps on the completion channel's fd: arm, poll
// once more (a completion may have landed before the arm), then poll(2) for
// at most 20 ms so the abort flag, peer health and the deadline are checked
// regularly. While it sleeps it probes the peer every 100 ms, so a peer that
// died is found by its missing ACK instead of at the deadline.
#pragma once

#include <poll.h>

#include <chrono>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "common/format.h"
#include "common/wait.h"
#include "transports/verbs/verbs_api.h"
#include "transports/verbs/verbs_link.h"

namespace loom::transport::verbs {

class CompletionPump {
 public:
  explicit CompletionPump(CompletionQueue& cq) : cq_(cq) {}

  void add(VerbsLink* link) {
    std::lock_guard<std::mutex> lock(mutex_);
    links_[link->qpn()] = link;
  }
  void remove(VerbsLink* link) {
    std::lock_guard<std::mutex> lock(mutex_);
    links_.erase(link->qpn());
  }
  // Reaps every completion available now and hands each to its link. A
  // failed CQ (overrun) fails every link.
  void progress();
  // Requests an event at the next completion; false if the CQ cannot (then
  // sleepArmed just naps for a millisecond).
  bool arm() { return cq_.armNotify().isOk(); }
  // After arm() and one more progress(): sleeps until the completion channel
  // fires or `millis` pass.
  void sleepArmed(bool armed, int millis);

 private:
  CompletionQueue& cq_;
  std::mutex mutex_;
  std::unordered_map<uint32_t, VerbsLink*> links_;
};

// Waits until ready() (which should include link.failed()) holds; see above.
template <class Ready, class What>
Status waitForLink(VerbsLink& link, CompletionPump& pump, const WaitContext& ctx, Ready&& ready, What&& what) {
  pump.progress();
  if (ready()) return Status::ok();
  const Clock::time_point start = Clock::now();
  const auto spinEnd = start + std::chrono::microseconds(ctx.spinMicros);
  const auto yieldEnd = spinEnd + std::chrono::microseconds(ctx.yieldMicros);
  for (int i = 0; Clock::now() < yieldEnd; ++i) {
    pump.progress();
    if (ready()) return Status::ok();
    if (Clock::now() >= spinEnd) {
      if ((i & 15) == 15 && ctx.aborted()) break;
      yieldCore();
    } else {
      cpuRelax();
    }
  }
  auto lastProbe = Clock::now();
  for (;;) {
    pump.progress();
    if (ready()) return Status::ok();
    if (ctx.aborted()) return {Code::kRemoteError, "aborted while waiting for " + what()};
    if (ctx.health) {
      Status peers = ctx.health->check();
      if (!peers.isOk()) return {peers.code(), peers.message() + " (noticed while waiting for " + what() + ")"};
    }
    if (ctx.deadline.expired())
      return {Code::kTimeout, "timed out (LOOM_TIMEOUT) waiting for " + what() +
                                  (ctx.health ? ctx.health->describeStalls() : std::string())};
    if (Clock::now() - lastProbe >= std::chrono::milliseconds(100)) {
      link.probe();
      lastProbe = Clock::now();
    }
    // Arm, then look once more: a completion that landed before the arm
    // raises no event.
    bool armed = pump.arm();
    pump.progress();
    if (ready()) return Status::ok();
    int ms = ctx.deadline.remainingMillis(20);
    pump.sleepArmed(armed, ms < 1 ? 1 : ms);
  }
}

}  // namespace loom::transport::verbs
