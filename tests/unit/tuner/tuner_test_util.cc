#include "tests/unit/tuner/tuner_test_util.h"

#include "algorithms/registry.h"
#include "common/format.h"

namespace loom::tuner::testing {
namespace {

using algo::CollType;

Status noop(const algo::CollArgs&, const algo::AlgoContext&) { return Status::ok(); }

}  // namespace

const std::vector<algo::AlgorithmInfo>& fakeRegistry() {
  static const std::vector<algo::AlgorithmInfo> list = [] {
    std::vector<algo::AlgorithmInfo> records = algo::allAlgorithms();
    for (auto& r : records) r.run = noop;
    return records;
  }();
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
