#include "tests/unit/kernels/cuda/engine_test_support.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <thread>

#include "tests/unit/kernels/reference.h"
#include "tests/unit/kernels/test_data.h"

namespace loom::kernels::cuda::engine::testing {
namespace {

std::atomic<uint64_t> gDelaySeed{1};
std::atomic<uint64_t> gThreadCounter{0};

struct PendingStores {
  std::vector<unsigned char> bytes;
  std::vector<std::pair<void*, size_t>> stores;
};
thread_local PendingStores tPending;

bool isFloat(DataType t) {
  return t == DataType::kFloat16 || t == DataType::kFloat32 || t == DataType::kFloat64 || t == DataType::kBfloat16;
}

testref::Value valueOf(DataType t, int64_t v) {
  testref::Value x;
  x.isFloat = isFloat(t);
  x.isSigned = !x.isFloat && (t == DataType::kInt8 || t == DataType::kInt32 || t == DataType::kInt64);
  x.bytes = static_cast<int>(dataTypeSize(t));
  x.i = v;
  x.u = static_cast<uint64_t>(v);
  x.d = static_cast<double>(v);
  // Through the type's representation, so integers carry their wrapped value.
  unsigned char buf[8];
  testref::store(t, buf, 0, x);
  return testref::load(t, buf, 0);
}

size_t sendElems(EngineOp op, size_t count, int n) {
  return op == EngineOp::kReduceScatter || op == EngineOp::kAllToAll ? count * static_cast<size_t>(n) : count;
}
size_t recvElems(EngineOp op, size_t count, int n) {
  return op == EngineOp::kAllGather || op == EngineOp::kAllToAll ? count * static_cast<size_t>(n) : count;
}
bool reduces(EngineOp op) {
  return op == EngineOp::kAllReduce || op == EngineOp::kReduceScatter || op == EngineOp::kReduce;
}

unsigned char* alignedIn(std::vector<unsigned char>& storage, size_t offset) {
  const uintptr_t p = reinterpret_cast<uintptr_t>(storage.data()) + offset;
  return reinterpret_cast<unsigned char*>((p + 15) / 16 * 16);
}

}  // namespace

void setDelaySeed(uint64_t seed) { gDelaySeed.store(seed); }

void DelayingMemory::delay() {
  thread_local std::minstd_rand rng(static_cast<uint32_t>(gDelaySeed.load() * 7919 + gThreadCounter.fetch_add(1)));
  const uint32_t x = rng() % 256;
  if (x < 2) std::this_thread::sleep_for(std::chrono::microseconds(20 + rng() % 80));
  else if (x < 48) std::this_thread::yield();
}

void storeLineInHalves(uint64_t* line, uint64_t value) {
  thread_local std::minstd_rand rng(static_cast<uint32_t>(gDelaySeed.load() * 104729 + gThreadCounter.fetch_add(1)));
  // The halves as 4-byte atomic stores (the host's little-endian order: data low, flag high).
  auto* half = reinterpret_cast<uint32_t*>(line);
  const uint32_t data = static_cast<uint32_t>(value), flag = static_cast<uint32_t>(value >> 32);
  const bool flagFirst = rng() % 2 == 0;
  std::atomic_ref<uint32_t>(half[flagFirst ? 1 : 0]).store(flagFirst ? flag : data, std::memory_order_relaxed);
  if (rng() % 4 == 0) std::this_thread::sleep_for(std::chrono::microseconds(20 + rng() % 80));
  else std::this_thread::yield();
  std::atomic_ref<uint32_t>(half[flagFirst ? 0 : 1]).store(flagFirst ? data : flag, std::memory_order_relaxed);
}

void bufferStore(void* dst, const void* src, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(src);
  tPending.bytes.insert(tPending.bytes.end(), p, p + bytes);
  tPending.stores.emplace_back(dst, bytes);
}

void flushStores() {
  size_t at = 0;
  for (const auto& [dst, bytes] : tPending.stores) {
    std::memcpy(dst, tPending.bytes.data() + at, bytes);
    at += bytes;
  }
  tPending.bytes.clear();
  tPending.stores.clear();
}

EngineRanks::EngineRanks(int nranks, int nchannels, int slots, size_t slotBytes, size_t llSlotBytes)
    : layout_(engineLayout(nranks, nchannels, slots, slotBytes, llSlotBytes)) {
  std::vector<void*> bases;
  for (int r = 0; r < nranks; ++r) {
    void* p = std::aligned_alloc(256, (layout_.bytes + 255) / 256 * 256);
    std::memset(p, 0, layout_.bytes);
    memory_.emplace_back(static_cast<unsigned char*>(p), std::free);
    bases.push_back(p);
  }
  for (int r = 0; r < nranks; ++r) views_.push_back(makeEngineView(layout_, r, bases.data()));
}

void runRankThreads(int nranks, const std::function<void(int)>& body) {
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) threads.emplace_back(body, r);
  for (std::thread& t : threads) t.join();
}

std::string CollectiveCase::describe(int nranks) const {
  std::ostringstream os;
  os << engineOpName(op) << " " << dataTypeName(type) << " " << redOpName(redOp) << " nranks=" << nranks
     << " channels=" << channels << " protocol=" << engineProtocolName(protocol)
     << " algorithm=" << engineAlgorithmName(algorithm) << " count=" << count
     << (inPlace ? " in-place" : " out-of-place")
     << " root=" << root << " misalign=" << misalign << " post=" << static_cast<int>(post) << " seed=" << seed;
  return os.str();
}

CollectiveRun::CollectiveRun(const CollectiveCase& c, int nranks) : c_(c), n_(nranks), ranks_(nranks) {
  const size_t es = dataTypeSize(c.type);
  const bool inPlace = c.inPlace && c.op != EngineOp::kAllToAll;
  std::mt19937_64 rng(c.seed);
  for (int r = 0; r < n_; ++r) {
    RankBuffers& b = ranks_[static_cast<size_t>(r)];
    b.sendBytes = sendElems(c.op, c.count, n_) * es;
    b.recvBytes = recvElems(c.op, c.count, n_) * es;
    const size_t skew = c.misalign * es;
    b.storage.assign(b.sendBytes + b.recvBytes + 64 + 2 * skew, 0);
    if (inPlace) {
      unsigned char* buf = alignedIn(b.storage, 0) + skew;
      const size_t own = static_cast<size_t>(r) * c.count * es;
      b.send = c.op == EngineOp::kAllGather ? buf + own : buf;
      b.recv = c.op == EngineOp::kReduceScatter ? buf + own : buf;
    } else {
      b.send = alignedIn(b.storage, 0) + skew;
      b.recv = alignedIn(b.storage, static_cast<size_t>(b.send - b.storage.data()) + b.sendBytes + 1) + skew;
    }
    std::memset(b.recv, 0xA5, b.recvBytes);
    const size_t elems = sendElems(c.op, c.count, n_);
    if (c.exactData) {
      for (size_t i = 0; i < elems; ++i) {
        int64_t v;
        if (c.redOp == RedOp::kProd) {
          static const int64_t kFactors[] = {-2, -1, 1, 2};
          v = kFactors[rng() % 4];
        } else {
          v = static_cast<int64_t>(rng() % 9) - 4;
        }
        testref::store(c.type, b.send, i, valueOf(c.type, v));
      }
    } else {
      const std::vector<unsigned char> data = testdata::randomBuffer(c.type, elems, c.seed * 131 + static_cast<uint64_t>(r));
      if (!data.empty()) std::memcpy(b.send, data.data(), data.size());
    }
    b.input.assign(b.send, b.send + b.sendBytes);
    b.recvInit.assign(b.recv, b.recv + b.recvBytes);
  }
  uint64_t scalarBits = 0;
  {
    unsigned char buf[8] = {};
    testref::store(c.type, buf, 0, valueOf(c.type, static_cast<int64_t>(c.scalar)));
    std::memcpy(&scalarBits, buf, es);
  }
  for (int r = 0; r < n_; ++r) {
    const RankBuffers& b = ranks_[static_cast<size_t>(r)];
    EngineCall call;
    call.op = c.op;
    call.type = c.type;
    call.redOp = c.redOp;
    call.post = c.post;
    call.scalar = scalarBits;
    call.send = b.send;
    call.recv = b.recv;
    call.count = c.count;
    call.root = c.root;
    call.channels = c.channels;
    call.protocol = c.protocol;
    call.algorithm = c.algorithm;
    call.timeoutNs = 60'000'000'000ull;  // a protocol bug fails the test instead of hanging it
    // NCCL's meaning: broadcast reads send only at the root, reduce writes recv only there.
    if (!inPlace && c.op == EngineOp::kBroadcast && r != c.root) call.send = nullptr;
    if (!inPlace && c.op == EngineOp::kReduce && r != c.root) call.recv = nullptr;
    calls_.push_back(call);
  }
}

void CollectiveRun::setTimeout(uint64_t ns) {
  for (EngineCall& call : calls_) call.timeoutNs = ns;
}

std::vector<unsigned char> CollectiveRun::output(int rank) const {
  const RankBuffers& b = ranks_[static_cast<size_t>(rank)];
  return std::vector<unsigned char>(b.recv, b.recv + b.recvBytes);
}

std::vector<unsigned char> CollectiveRun::expected(int rank) const {
  const size_t es = dataTypeSize(c_.type);
  const RankBuffers& mine = ranks_[static_cast<size_t>(rank)];
  std::vector<unsigned char> out = mine.recvInit;
  auto input = [&](int j) { return ranks_[static_cast<size_t>(j)].input.data(); };
  // Element `index` of every rank's input, reduced in rank order, then the post step.
  auto fold = [&](size_t index) {
    testref::Value acc = testref::load(c_.type, input(0), index);
    for (int j = 1; j < n_; ++j)
      acc = testref::roundTo(c_.type, testref::combine(c_.redOp, acc, testref::load(c_.type, input(j), index)));
    if (c_.redOp == RedOp::kAvg || c_.post == PostOp::kDivideByRanks)
      acc = testref::roundTo(c_.type, testref::divide(acc, n_));
    else if (c_.post == PostOp::kMultiplyByScalar)
      acc = testref::roundTo(c_.type, testref::combine(RedOp::kProd, acc, valueOf(c_.type, static_cast<int64_t>(c_.scalar))));
    return acc;
  };
  const size_t count = c_.count;
  switch (c_.op) {
    case EngineOp::kAllReduce:
      for (size_t i = 0; i < count; ++i) testref::store(c_.type, out.data(), i, fold(i));
      break;
    case EngineOp::kReduceScatter:
      for (size_t i = 0; i < count; ++i)
        testref::store(c_.type, out.data(), i, fold(static_cast<size_t>(rank) * count + i));
      break;
    case EngineOp::kReduce:
      if (rank == c_.root)
        for (size_t i = 0; i < count; ++i) testref::store(c_.type, out.data(), i, fold(i));
      break;
    case EngineOp::kAllGather:
      for (int j = 0; j < n_; ++j)
        if (count) std::memcpy(out.data() + static_cast<size_t>(j) * count * es, input(j), count * es);
      break;
    case EngineOp::kBroadcast:
      if (count) std::memcpy(out.data(), input(c_.root), count * es);
      break;
    case EngineOp::kAllToAll:
      for (int j = 0; j < n_; ++j)
        if (count)
          std::memcpy(out.data() + static_cast<size_t>(j) * count * es,
                      input(j) + static_cast<size_t>(rank) * count * es, count * es);
      break;
    case EngineOp::kSendRecv: break;
  }
  return out;
}

std::string CollectiveRun::check() const {
  const size_t es = dataTypeSize(c_.type);
  for (int r = 0; r < n_; ++r) {
    const std::vector<unsigned char> want = expected(r);
    const std::vector<unsigned char> got = output(r);
    const size_t elems = want.size() / es;
    size_t bad = elems;
    if (reduces(c_.op)) bad = testref::firstMismatch(c_.type, want.data(), got.data(), elems);
    else
      for (size_t i = 0; i < elems && bad == elems; ++i)
        if (std::memcmp(want.data() + i * es, got.data() + i * es, es) != 0) bad = i;
    if (bad != elems) {
      std::ostringstream os;
      os << c_.describe(n_) << ": rank " << r << " element " << bad << " of " << elems << " differs (expected 0x";
      for (size_t k = es; k-- > 0;) os << std::hex << (want[bad * es + k] >> 4) << (want[bad * es + k] & 15);
      os << ", got 0x";
      for (size_t k = es; k-- > 0;) os << std::hex << (got[bad * es + k] >> 4) << (got[bad * es + k] & 15);
      os << ")";
      return os.str();
    }
  }
  return {};
}

SendRecvRun::SendRecvRun(int nranks, const std::vector<int>& shifts, const std::vector<size_t>& bytes, int channels,
                         uint64_t seed)
    : n_(nranks), shifts_(shifts), bytes_(bytes), sendData_(nranks), recvData_(nranks) {
  std::mt19937_64 rng(seed);
  for (int r = 0; r < n_; ++r) {
    for (size_t k = 0; k < shifts_.size(); ++k) {
      // Odd transfers start one byte past an aligned address: the byte path takes any alignment.
      const size_t skew = k % 2;
      std::vector<unsigned char> s(bytes_[k] + skew), d(bytes_[k] + skew, 0x5A);
      for (unsigned char& x : s) x = static_cast<unsigned char>(rng());
      sendData_[static_cast<size_t>(r)].push_back(std::move(s));
      recvData_[static_cast<size_t>(r)].push_back(std::move(d));
    }
  }
  for (int r = 0; r < n_; ++r) {
    EngineCall call;
    call.op = EngineOp::kSendRecv;
    call.channels = channels;
    call.timeoutNs = 60'000'000'000ull;
    for (size_t k = 0; k < shifts_.size(); ++k) {
      const size_t skew = k % 2;
      const int i = static_cast<int>(k);
      call.sendPeer[i] = ((r + shifts_[k]) % n_ + n_) % n_;
      call.sendBuf[i] = sendData_[static_cast<size_t>(r)][k].data() + skew;
      call.sendBytes[i] = bytes_[k];
      call.recvPeer[i] = ((r - shifts_[k]) % n_ + n_) % n_;
      call.recvBuf[i] = recvData_[static_cast<size_t>(r)][k].data() + skew;
      call.recvBytes[i] = bytes_[k];
    }
    call.nsends = call.nrecvs = static_cast<int>(shifts_.size());
    calls_.push_back(call);
  }
}

std::string SendRecvRun::check() const {
  for (int r = 0; r < n_; ++r) {
    for (size_t k = 0; k < shifts_.size(); ++k) {
      const size_t skew = k % 2;
      const int from = ((r - shifts_[k]) % n_ + n_) % n_;
      const auto& got = recvData_[static_cast<size_t>(r)][k];
      const auto& sent = sendData_[static_cast<size_t>(from)][k];
      // An empty transfer's vectors may have no storage at all (memcmp's
      // pointers must not be null, even for 0 bytes).
      if (bytes_[k] != 0 && std::memcmp(got.data() + skew, sent.data() + skew, bytes_[k]) != 0) {
        std::ostringstream os;
        os << "send/recv nranks=" << n_ << ": rank " << r << " transfer " << k << " (" << bytes_[k]
           << " bytes from rank " << from << ") differs";
        return os.str();
      }
    }
  }
  return {};
}

}  // namespace loom::kernels::cuda::engine::testing
