#include "api/group.h"

#include <thread>
#include <vector>

namespace loom::api {
namespace {

struct DeferredCollective {
  loomComm_t comm;
  algo::CollArgs args;
  loomStream_t stream;
};

struct GroupState {
  int depth = 0;
  std::vector<std::function<loomResult_t()>> inits;
  std::vector<DeferredCollective> collectives;
};

thread_local GroupState group;

loomResult_t runDeferredInits(std::vector<std::function<loomResult_t()>> inits) {
  std::vector<loomResult_t> results(inits.size(), loomSuccess);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < inits.size(); ++i) threads.emplace_back([&, i] { results[i] = inits[i](); });
  for (auto& t : threads) t.join();
  for (auto r : results)
    if (r != loomSuccess) return r;
  return loomSuccess;
}

}  // namespace

bool inGroup() { return group.depth > 0; }

void deferCollective(loomComm_t comm, const algo::CollArgs& args, loomStream_t stream) {
  group.collectives.push_back({comm, args, stream});
}

void deferInit(std::function<loomResult_t()> init) { group.inits.push_back(std::move(init)); }

bool hasDeferredWork(loomComm_t comm) {
  for (const auto& c : group.collectives)
    if (c.comm == comm) return true;
  return false;
}

loomResult_t groupStart() {
  ++group.depth;
  return loomSuccess;
}

loomResult_t groupEnd() {
  if (group.depth == 0)
    return fail(nullptr, makeError(Code::kInvalidUsage, "loomGroupEnd called without a matching loomGroupStart"));
  if (--group.depth > 0) return loomSuccess;

  auto inits = std::move(group.inits);
  auto collectives = std::move(group.collectives);
  group = GroupState{};
  if (!inits.empty()) {
    loomResult_t r = runDeferredInits(std::move(inits));
    if (r != loomSuccess) return r;  // the failing init recorded its message
  }
  // Start everything on the communicators' workers first, then wait: the
  // collectives of different communicators of one clique need each other.
  std::vector<std::pair<loomComm_t, CompletionPtr>> blocking;
  for (auto& c : collectives) {
    if (!isLiveComm(c.comm))
      return fail(nullptr, makeError(Code::kInvalidUsage, "loomGroupEnd: a communicator was destroyed inside the group"));
    Stream* stream = c.stream ? &c.stream->impl : nullptr;
    auto completion = c.comm->impl->enqueueAsync(c.args, stream);
    if (!stream) blocking.emplace_back(c.comm, completion);
  }
  loomResult_t result = loomSuccess;
  for (auto& [comm, completion] : blocking) {
    Status s = completion->wait(WaitContext{}, "grouped collective");
    if (!s.isOk() && result == loomSuccess) result = fail(comm, s);
  }
  return result;
}

}  // namespace loom::api
