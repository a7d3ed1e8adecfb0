#include "src/api/group.h"

#include <string>
#include <thread>
#include <vector>

#include "common/format.h"

namespace loom::api {
namespace {

// A collective, all-to-all or barrier: enqueued in call order.
struct DeferredOrdered {
  loomComm_t comm;
  loomStream_t stream;
  std::function<CompletionPtr(Stream*)> launch;
};

// The sends and recvs of one communicator, fused into one operation.
struct DeferredP2P {
  loomComm_t comm;
  loomStream_t stream;
  std::vector<algo::P2POp> ops;  // in call order
};

struct DeferredInit {
  std::function<loomResult_t()> run;
  loomComm_t* out;     // the caller's variable, which already holds `handle`
  loomComm_t handle;   // null: nothing to create (a split with a negative color)
};

struct GroupState {
  int depth = 0;
  std::vector<DeferredInit> inits;
  std::vector<DeferredOrdered> ordered;
  std::vector<DeferredP2P> p2p;  // one per communicator, in order of first use
};

thread_local GroupState group;
// group.depth > 0, kept apart from `group`: every collective asks, and a
// plain int in the initial-exec model is one load (no TLS wrapper call).
__attribute__((tls_model("initial-exec"))) thread_local bool groupOpen = false;

loomResult_t runDeferredInits(std::vector<DeferredInit> inits) {
  std::vector<loomResult_t> results(inits.size(), loomSuccess);
  // Each init records its error on its own thread: the caller of
  // loomGroupEnd gets the first failure's message as its own.
  std::vector<std::string> errors(inits.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < inits.size(); ++i)
    threads.emplace_back([&, i] {
      results[i] = inits[i].run();
      if (results[i] != loomSuccess) errors[i] = lastErrorOfThread();
    });
  for (auto& t : threads) t.join();
  loomResult_t first = loomSuccess;
  for (size_t i = 0; i < inits.size(); ++i) {
    if (results[i] == loomSuccess) continue;
    if (first == loomSuccess) {
      first = results[i];
      setLastErrorOfThread(std::move(errors[i]));
    }
    // Never registered (the init fills and registers the handle only when it
    // succeeds), so no call can hold it: freed here, and the caller's
    // variable no longer names it.
    delete inits[i].handle;
    *inits[i].out = nullptr;
  }
  return first;
}

}  // namespace

bool inGroup() { return groupOpen; }

void deferCollective(loomComm_t comm, const algo::CollArgs& args, loomStream_t stream) {
  deferOrdered(comm, stream, [comm, args](Stream* s) { return comm->impl->enqueueAsync(args, s); });
}

void deferOrdered(loomComm_t comm, loomStream_t stream, std::function<CompletionPtr(Stream*)> launch) {
  group.ordered.push_back({comm, stream, std::move(launch)});
}

Status deferP2P(loomComm_t comm, const algo::P2POp& op, loomStream_t stream) {
  for (DeferredP2P& fused : group.p2p) {
    if (fused.comm != comm) continue;
    LOOM_ENFORCE(fused.stream == stream, Code::kInvalidUsage,
                 "%s on rank %d: stream %p differs from stream %p of this communicator's earlier send/recv in the "
                 "group; the sends and recvs of one communicator in a group run as one operation on one stream",
                 op.kind == algo::P2POp::kSend ? "loomSend" : "loomRecv", comm->impl->rank(),
                 static_cast<void*>(stream), static_cast<void*>(fused.stream));
    fused.ops.push_back(op);
    return Status::ok();
  }
  group.p2p.push_back({comm, stream, {op}});
  return Status::ok();
}

void deferInit(std::function<loomResult_t()> init, loomComm_t* out, loomComm_t handle) {
  group.inits.push_back({std::move(init), out, handle});
}

bool hasDeferredWork(loomComm_t comm) {
  for (const auto& c : group.ordered)
    if (c.comm == comm) return true;
  for (const auto& p : group.p2p)
    if (p.comm == comm) return true;
  return false;
}

loomResult_t groupStart() {
  ++group.depth;
  groupOpen = true;
  return loomSuccess;
}

loomResult_t groupEnd() {
  if (group.depth == 0)
    return fail(nullptr, makeError(Code::kInvalidUsage, "loomGroupEnd called without a matching loomGroupStart"));
  groupOpen = --group.depth > 0;
  if (group.depth > 0) return loomSuccess;

  GroupState work = std::move(group);
  group = GroupState{};
  if (!work.inits.empty()) {
    loomResult_t r = runDeferredInits(std::move(work.inits));
    if (r != loomSuccess) return r;  // the failing init recorded its message
  }
  // Start everything on the communicators' workers first, then wait: the
  // operations of different communicators of one clique need each other.
  // Each launch holds a reference to its communicator until the waits below
  // are over, so a concurrent loomCommAbort cannot free it meanwhile.
  std::vector<std::pair<CommRef, CompletionPtr>> blocking;
  auto launch = [&](loomComm_t comm, loomStream_t s, const std::function<CompletionPtr(Stream*)>& start) {
    CommRef ref{comm, "loomGroupEnd"};
    if (!ref) return false;
    Stream* stream = s ? &s->impl : nullptr;
    CompletionPtr completion = start(stream);
    if (!stream) blocking.emplace_back(std::move(ref), completion);
    return true;
  };
  const Status destroyed =
      makeError(Code::kInvalidUsage, "loomGroupEnd: a communicator was destroyed or aborted inside the group");
  for (auto& c : work.ordered)
    if (!launch(c.comm, c.stream, c.launch)) return fail(nullptr, destroyed);
  for (auto& p : work.p2p) {
    auto start = [&p](Stream* s) { return p.comm->impl->enqueueP2PAsync(std::move(p.ops), s); };
    if (!launch(p.comm, p.stream, start)) return fail(nullptr, destroyed);
  }
  loomResult_t result = loomSuccess;
  for (auto& [comm, completion] : blocking) {
    Status s = completion->wait(WaitContext{}, "grouped operation");
    if (!s.isOk() && result == loomSuccess) result = fail(comm, s);
  }
  return result;
}

}  // namespace loom::api
