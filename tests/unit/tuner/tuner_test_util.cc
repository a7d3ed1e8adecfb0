#include "tests/unit/tuner/tuner_test_util.h"

#include "common/format.h"

namespace loom::tuner::testing {
namespace {

using algo::CollType;

Status noop(const algo::CollArgs&, const algo::AlgoContext&) { return Status::ok(); }
bool fitsOneChunk(const algo::CollArgs& a, const algo::AlgoContext& c) {
  return a.count * dataTypeSize(a.dtype) <= c.chunkBytes;
}
bool oneShotApplies(const algo::CollArgs& a, const algo::AlgoContext& c) {
  return c.singleHost && a.count * dataTypeSize(a.dtype) <= kOneShotMax;
}

}  // namespace

const std::vector<algo::AlgorithmInfo>& fakeRegistry() {
  static const std::vector<algo::AlgorithmInfo> list = {
      {"ring", CollType::kAllReduce, noop},
      {"rd", CollType::kAllReduce, noop, fitsOneChunk},
      {"chain", CollType::kBroadcast, noop},
      {"chain", CollType::kReduce, noop},
      {"ring", CollType::kReduceScatter, noop},
      {"ring", CollType::kAllGather, noop},
      {"hd", CollType::kAllReduce, noop},
      {"oneshot", CollType::kAllReduce, noop, oneShotApplies},
      {"deterministic", CollType::kAllReduce, noop},
      {"deterministic", CollType::kReduce, noop},
      {"deterministic", CollType::kReduceScatter, noop},
      {"tree", CollType::kAllReduce, noop},
      {"tree", CollType::kBroadcast, noop},
      {"tree", CollType::kReduce, noop},
  };
  return list;
}

Contexts::Contexts(int nranks, bool singleHost) {
  for (auto* c : {&simple, &ll}) {
    c->nranks = nranks;
    c->singleHost = singleHost;
  }
  simple.chunkBytes = kSimpleChunk;
  simple.proto = transport::Protocol::kSimple;
  ll.chunkBytes = kLLChunk;
  ll.proto = transport::Protocol::kLL;
}

algo::CollArgs callOf(CollType type, size_t bytes, DataType dtype) {
  algo::CollArgs a;
  a.type = type;
  a.dtype = dtype;
  a.count = bytes / dataTypeSize(dtype);
  return a;
}

std::string nameOf(const Choice& c) {
  return c.algorithm ? strprintf("%s/%s", c.algorithm->name, transport::protocolName(c.proto)) : "(none)";
}

}  // namespace loom::tuner::testing
