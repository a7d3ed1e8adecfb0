// A program written only against NCCL's API (no Loom header): every
// collective over every data type and op (PreMulSum and avg included),
// send/recv in groups, ncclCommSplit, the three ways to create
// communicators and the error paths, on host buffers, each result checked
// against a reference computed here. It is built twice: against Loom's
// nccl.h, and against the CUDA toolkit's real nccl.h (ABI check); both link
// Loom's libnccl.so.2 only.
//
// Streams: every call passes stream 0. Loom with no CUDA device runs each
// call blocking, so results are ready when it returns; a program for real
// GPUs would call cudaStreamSynchronize here, which needs a GPU.
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#if defined(EXPECT_LOOM_NCCL_H) && !defined(LOOM_NCCL_SHIM)
#error "this build must use Loom's nccl.h (shim/nccl/include), not the CUDA toolkit's"
#endif
#if defined(EXPECT_TOOLKIT_NCCL_H) && defined(LOOM_NCCL_SHIM)
#error "this build must use the CUDA toolkit's nccl.h, not Loom's"
#endif
#if defined(EXPECT_CUDA_RUNTIME_H) && !defined(CUDART_VERSION)
#error "Loom's nccl.h should have taken cudaStream_t from <cuda_runtime.h> here"
#endif

// The layout facts the shim relies on, whichever header this is.
static_assert(sizeof(ncclUniqueId) == 128, "ncclUniqueId");
static_assert(sizeof(ncclResult_t) == 4 && sizeof(ncclDataType_t) == 4 && sizeof(ncclRedOp_t) == 4, "enums");
static_assert(sizeof(ncclConfig_t) == 80 && offsetof(ncclConfig_t, blocking) == 16 &&
                  offsetof(ncclConfig_t, netName) == 32 && offsetof(ncclConfig_t, commName) == 48 &&
                  offsetof(ncclConfig_t, nvlinkCentricSched) == 76,
              "ncclConfig_t (NCCL 2.28's layout)");
static_assert(ncclInProgress == 7 && ncclNumResults == 8 && ncclBfloat16 == 9 && ncclFloat8e5m2 == 11 &&
                  ncclNumTypes == 12 && ncclAvg == 4 && ncclNumOps == 5 && ncclMaxRedOp == 0x7fffffff &&
                  ncclScalarHostImmediate == 1,
              "enum values");
static_assert(sizeof(ncclSimInfo_t) == 24 && offsetof(ncclSimInfo_t, estimatedTime) == 16, "ncclSimInfo_t (2.22+)");
static_assert(NCCL_WIN_COLL_SYMMETRIC == 1 && NCCL_WIN_REQUIRED_ALIGNMENT == 4096 && NCCL_SHRINK_ABORT == 1 &&
                  NCCL_REVOKE_DEFAULT == 0 && NCCL_CTA_POLICY_ZERO == 2,
              "2.28's flag values");
#ifdef LOOM_NCCL_SHIM
static_assert(NCCL_VERSION_CODE == 22809, "Loom's nccl.h is NCCL 2.28.9's API");
#endif

namespace {

const cudaStream_t kStream = 0;  // see the header comment: calls are blocking without a GPU

std::atomic<int> failures{0};

#define CHECK(cond, ...)                                                     \
  do {                                                                       \
    if (!(cond)) {                                                           \
      std::fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);   \
      std::fprintf(stderr, __VA_ARGS__);                                     \
      std::fprintf(stderr, "\n");                                            \
      ++failures;                                                            \
    }                                                                        \
  } while (0)

#define NCCL_OK(call, comm)                                                                            \
  do {                                                                                                 \
    ncclResult_t r_ = (call);                                                                          \
    CHECK(r_ == ncclSuccess, "%s -> %s: %s", #call, ncclGetErrorString(r_), ncclGetLastError(comm));   \
  } while (0)

// ---- element access by data type (fp16/bf16 encoded here, not by the library) ----

const ncclDataType_t kTypes[] = {ncclInt8,  ncclUint8,   ncclInt32,   ncclUint32,  ncclInt64,
                                 ncclUint64, ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16};
const ncclRedOp_t kOps[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};

size_t sizeOf(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
  }
}
bool isFloat(ncclDataType_t t) {
  return t == ncclFloat16 || t == ncclFloat32 || t == ncclFloat64 || t == ncclBfloat16;
}
bool isSigned(ncclDataType_t t) { return t == ncclInt8 || t == ncclInt32 || t == ncclInt64 || isFloat(t); }

// Exact for the values this test uses (small multiples of 1/4, |x| < 2^10).
uint16_t toHalf(double v) {
  if (v == 0) return 0;
  const uint16_t sign = v < 0 ? 0x8000 : 0;
  int exponent;
  const double m = std::frexp(std::fabs(v), &exponent);  // v = m * 2^exponent, m in [0.5, 1)
  const auto mantissa = static_cast<uint16_t>(std::lround((m * 2 - 1) * 1024));
  return static_cast<uint16_t>(sign | ((exponent - 1 + 15) << 10) | mantissa);
}
double fromHalf(uint16_t h) {
  const int exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  const double magnitude = exponent == 0 ? std::ldexp(mantissa, -24) : std::ldexp(1024 + mantissa, exponent - 25);
  return (h & 0x8000) ? -magnitude : magnitude;
}
uint16_t toBf16(double v) {
  const auto f = static_cast<float>(v);  // exact here: few significant bits
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>(u >> 16);
}
double fromBf16(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

void put(ncclDataType_t t, void* buf, size_t i, double v) {
  auto* p = static_cast<unsigned char*>(buf) + i * sizeOf(t);
  auto store = [p](auto x) { std::memcpy(p, &x, sizeof(x)); };
  switch (t) {
    case ncclInt8: return store(static_cast<int8_t>(v));
    case ncclUint8: return store(static_cast<uint8_t>(v));
    case ncclInt32: return store(static_cast<int32_t>(v));
    case ncclUint32: return store(static_cast<uint32_t>(v));
    case ncclInt64: return store(static_cast<int64_t>(v));
    case ncclUint64: return store(static_cast<uint64_t>(v));
    case ncclFloat16: return store(toHalf(v));
    case ncclFloat32: return store(static_cast<float>(v));
    case ncclFloat64: return store(v);
    case ncclBfloat16: return store(toBf16(v));
    default: return;
  }
}
double get(ncclDataType_t t, const void* buf, size_t i) {
  const auto* p = static_cast<const unsigned char*>(buf) + i * sizeOf(t);
  auto load = [p](auto x) {
    std::memcpy(&x, p, sizeof(x));
    return x;
  };
  switch (t) {
    case ncclInt8: return load(int8_t{});
    case ncclUint8: return load(uint8_t{});
    case ncclInt32: return load(int32_t{});
    case ncclUint32: return load(uint32_t{});
    case ncclInt64: return static_cast<double>(load(int64_t{}));
    case ncclUint64: return static_cast<double>(load(uint64_t{}));
    case ncclFloat16: return fromHalf(load(uint16_t{}));
    case ncclFloat32: return load(float{});
    case ncclFloat64: return load(double{});
    case ncclBfloat16: return fromBf16(load(uint16_t{}));
    default: return NAN;
  }
}

// Rank r's element i: small values whose sums and products stay exact and
// in range for every type (int8 included) with up to 4 ranks.
double input(ncclDataType_t t, ncclRedOp_t op, int r, size_t i) {
  if (op == ncclProd) return 1 + (r + i) % 3;  // <= 3^4 = 81
  double v = static_cast<double>((r * 7 + i * 3) % 11);
  if (isSigned(t)) v -= 5;
  if (isFloat(t)) v += 0.5;
  return v;
}

double reference(ncclDataType_t t, ncclRedOp_t op, int nranks, size_t i) {
  double acc = input(t, op, 0, i);
  for (int r = 1; r < nranks; ++r) {
    const double x = input(t, op, r, i);
    if (op == ncclSum || op == ncclAvg) acc += x;
    if (op == ncclProd) acc *= x;
    if (op == ncclMax) acc = std::max(acc, x);
    if (op == ncclMin) acc = std::min(acc, x);
  }
  if (op == ncclAvg) acc = isFloat(t) ? acc / nranks : std::trunc(acc / nranks);  // integers truncate
  return acc;
}

bool close(ncclDataType_t t, double got, double want) {
  if (!isFloat(t)) return got == want;
  const double tolerance = (t == ncclFloat16 || t == ncclBfloat16) ? 1e-2 : 1e-6;
  return std::fabs(got - want) <= tolerance * std::max(1.0, std::fabs(want));
}

struct Buffer {
  ncclDataType_t type;
  std::vector<unsigned char> bytes;
  Buffer(ncclDataType_t t, size_t n) : type(t), bytes(n * sizeOf(t) + 1) {}  // +1: never size 0
  void* data() { return bytes.data(); }
  void* at(size_t i) { return bytes.data() + i * sizeOf(type); }
};

const char* typeName(ncclDataType_t t) {
  static const char* const names[] = {"int8", "uint8",   "int32",   "uint32",  "int64",
                                      "uint64", "float16", "float32", "float64", "bfloat16"};
  return names[static_cast<int>(t)];
}

// ---- one rank's work (one thread per rank) ----

void collectives(ncclComm_t comm, int rank, int nranks) {
  const size_t count = 37, recvcount = 13;
  for (ncclDataType_t t : kTypes) {
    for (ncclRedOp_t op : kOps) {
      // All-reduce, out of place for even ops, in place for odd.
      Buffer send(t, count), recv(t, count);
      for (size_t i = 0; i < count; ++i) put(t, send.data(), i, input(t, op, rank, i));
      const bool inPlace = static_cast<int>(op) % 2 == 1;
      NCCL_OK(ncclAllReduce(send.data(), inPlace ? send.data() : recv.data(), count, t, op, comm, kStream), comm);
      const void* result = inPlace ? send.data() : recv.data();
      for (size_t i = 0; i < count; ++i) {
        const double got = get(t, result, i), want = reference(t, op, nranks, i);
        CHECK(close(t, got, want), "allreduce %s op %d rank %d [%zu]: %g, want %g", typeName(t), op, rank, i, got,
              want);
      }

      // Reduce to a root that moves with type and op.
      const int root = (static_cast<int>(t) + static_cast<int>(op)) % nranks;
      for (size_t i = 0; i < count; ++i) put(t, send.data(), i, input(t, op, rank, i));
      Buffer rootOut(t, count);
      NCCL_OK(ncclReduce(send.data(), rank == root ? rootOut.data() : nullptr, count, t, op, root, comm, kStream),
              comm);
      if (rank == root)
        for (size_t i = 0; i < count; ++i) {
          const double got = get(t, rootOut.data(), i), want = reference(t, op, nranks, i);
          CHECK(close(t, got, want), "reduce %s op %d root %d [%zu]: %g, want %g", typeName(t), op, root, i, got,
                want);
        }

      // Reduce-scatter: rank gets block `rank` of the reduction.
      Buffer full(t, recvcount * nranks), block(t, recvcount);
      for (size_t i = 0; i < recvcount * nranks; ++i) put(t, full.data(), i, input(t, op, rank, i));
      NCCL_OK(ncclReduceScatter(full.data(), block.data(), recvcount, t, op, comm, kStream), comm);
      for (size_t i = 0; i < recvcount; ++i) {
        const double got = get(t, block.data(), i), want = reference(t, op, nranks, rank * recvcount + i);
        CHECK(close(t, got, want), "reducescatter %s op %d rank %d [%zu]: %g, want %g", typeName(t), op, rank, i,
              got, want);
      }
    }

    // Broadcast (out of place), Bcast (in place) and all-gather (in place on
    // every other type).
    const int root = static_cast<int>(t) % nranks;
    Buffer send(t, count), recv(t, count), buff(t, count);
    for (size_t i = 0; i < count; ++i) {
      put(t, send.data(), i, rank == root ? input(t, ncclSum, 100, i) : 99);  // 99: no input value
      put(t, buff.data(), i, rank == root ? input(t, ncclMax, 200, i) : 99);
    }
    NCCL_OK(ncclBroadcast(send.data(), recv.data(), count, t, root, comm, kStream), comm);
    NCCL_OK(ncclBcast(buff.data(), count, t, root, comm, kStream), comm);
    for (size_t i = 0; i < count; ++i) {
      CHECK(get(t, recv.data(), i) == input(t, ncclSum, 100, i), "broadcast %s rank %d [%zu]", typeName(t), rank, i);
      CHECK(get(t, buff.data(), i) == input(t, ncclMax, 200, i), "bcast %s rank %d [%zu]", typeName(t), rank, i);
    }

    Buffer mine(t, count), gathered(t, count * nranks);
    const bool inPlace = static_cast<int>(t) % 2 == 1;
    void* sendPart = inPlace ? gathered.at(rank * count) : mine.data();
    for (size_t i = 0; i < count; ++i) put(t, sendPart, i, input(t, ncclSum, rank, i));
    NCCL_OK(ncclAllGather(sendPart, gathered.data(), count, t, comm, kStream), comm);
    for (int r = 0; r < nranks; ++r)
      for (size_t i = 0; i < count; ++i)
        CHECK(get(t, gathered.data(), r * count + i) == input(t, ncclSum, r, i), "allgather %s rank %d from %d [%zu]",
              typeName(t), rank, r, i);
  }
}

// PreMulSum: rank r's input is scaled by its own scalar, then summed.
void preMulSum(ncclComm_t comm, int rank, int nranks) {
  const ncclDataType_t types[] = {ncclFloat32, ncclFloat64, ncclFloat16, ncclBfloat16, ncclInt32, ncclUint8,
                                  ncclInt64};
  const size_t count = 29, recvcount = 5;
  auto scalarOf = [](ncclDataType_t t, int r) { return isFloat(t) ? 0.5 * (r + 1) : static_cast<double>(r + 1); };
  auto value = [](ncclDataType_t, int r, size_t i) { return static_cast<double>((r * 5 + i) % 9); };
  auto want = [&](ncclDataType_t t, size_t i) {
    double sum = 0;
    for (int r = 0; r < nranks; ++r) sum += scalarOf(t, r) * value(t, r, i);
    return sum;
  };
  for (ncclDataType_t t : types) {
    for (ncclScalarResidence_t residence : {ncclScalarHostImmediate, ncclScalarDevice}) {
      unsigned char scalar[8];
      put(t, scalar, 0, scalarOf(t, rank));
      ncclRedOp_t op;
      NCCL_OK(ncclRedOpCreatePreMulSum(&op, scalar, t, residence, comm), comm);
      CHECK(static_cast<int>(op) >= static_cast<int>(ncclNumOps), "PreMulSum op %d is a built-in value", op);

      Buffer send(t, count), recv(t, count);
      for (size_t i = 0; i < count; ++i) put(t, send.data(), i, value(t, rank, i));
      NCCL_OK(ncclAllReduce(send.data(), recv.data(), count, t, op, comm, kStream), comm);
      for (size_t i = 0; i < count; ++i)
        CHECK(get(t, recv.data(), i) == want(t, i), "premulsum allreduce %s residence %d rank %d [%zu]: %g, want %g",
              typeName(t), residence, rank, i, get(t, recv.data(), i), want(t, i));
      for (size_t i = 0; i < count; ++i)
        CHECK(get(t, send.data(), i) == value(t, rank, i), "premulsum changed sendbuff %s [%zu]", typeName(t), i);

      // In place, and reduce to the last rank.
      NCCL_OK(ncclAllReduce(send.data(), send.data(), count, t, op, comm, kStream), comm);
      for (size_t i = 0; i < count; ++i)
        CHECK(get(t, send.data(), i) == want(t, i), "premulsum in place %s rank %d [%zu]", typeName(t), rank, i);
      for (size_t i = 0; i < count; ++i) put(t, send.data(), i, value(t, rank, i));
      Buffer rootOut(t, count);
      NCCL_OK(ncclReduce(send.data(), rootOut.data(), count, t, op, nranks - 1, comm, kStream), comm);
      if (rank == nranks - 1)
        for (size_t i = 0; i < count; ++i)
          CHECK(get(t, rootOut.data(), i) == want(t, i), "premulsum reduce %s [%zu]", typeName(t), i);

      Buffer full(t, recvcount * nranks), block(t, recvcount);
      for (size_t i = 0; i < recvcount * nranks; ++i) put(t, full.data(), i, value(t, rank, i));
      NCCL_OK(ncclReduceScatter(full.data(), block.data(), recvcount, t, op, comm, kStream), comm);
      for (size_t i = 0; i < recvcount; ++i)
        CHECK(get(t, block.data(), i) == want(t, rank * recvcount + i), "premulsum reducescatter %s rank %d [%zu]",
              typeName(t), rank, i);

      // ncclScalarDevice is read when the op runs: a new value counts.
      if (residence == ncclScalarDevice) {
        put(t, scalar, 0, 1);
        for (size_t i = 0; i < count; ++i) put(t, send.data(), i, value(t, rank, i));
        NCCL_OK(ncclAllReduce(send.data(), recv.data(), count, t, op, comm, kStream), comm);
        for (size_t i = 0; i < count; ++i) {
          double plain = 0;
          for (int r = 0; r < nranks; ++r) plain += value(t, r, i);
          CHECK(get(t, recv.data(), i) == plain, "premulsum device scalar re-read %s [%zu]", typeName(t), i);
        }
      }

      // Misuse: another datatype; after destroy the handle is gone.
      const ncclDataType_t other = t == ncclFloat64 ? ncclFloat32 : ncclFloat64;
      CHECK(ncclAllReduce(send.data(), recv.data(), 1, other, op, comm, kStream) == ncclInvalidArgument,
            "premulsum with another datatype");
      NCCL_OK(ncclRedOpDestroy(op, comm), comm);
      CHECK(ncclAllReduce(send.data(), recv.data(), count, t, op, comm, kStream) == ncclInvalidArgument,
            "destroyed op accepted");
      CHECK(std::string(ncclGetLastError(comm)).find("destroyed") != std::string::npos, "message: %s",
            ncclGetLastError(comm));
    }
  }
  CHECK(ncclRedOpDestroy(ncclSum, comm) == ncclInvalidArgument, "destroying ncclSum");
}

// Sends and receives in one group: a ring both ways, a self send, two types.
void pointToPoint(ncclComm_t comm, int rank, int nranks) {
  const size_t count = 1000;
  const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  std::vector<float> toNext(count), fromPrev(count, -1), toPrev(count), fromNext(count, -1);
  std::vector<int64_t> toSelf(count), fromSelf(count, -1);
  for (size_t i = 0; i < count; ++i) {
    toNext[i] = rank * 1000.0f + i;
    toPrev[i] = -rank * 1000.0f - i;
    toSelf[i] = rank * 7 + static_cast<int64_t>(i);
  }
  NCCL_OK(ncclGroupStart(), comm);
  NCCL_OK(ncclSend(toNext.data(), count, ncclFloat32, next, comm, kStream), comm);
  NCCL_OK(ncclSend(toPrev.data(), count, ncclFloat32, prev, comm, kStream), comm);
  NCCL_OK(ncclRecv(fromPrev.data(), count, ncclFloat32, prev, comm, kStream), comm);
  NCCL_OK(ncclRecv(fromNext.data(), count, ncclFloat32, next, comm, kStream), comm);
  NCCL_OK(ncclSend(toSelf.data(), count, ncclInt64, rank, comm, kStream), comm);
  NCCL_OK(ncclRecv(fromSelf.data(), count, ncclInt64, rank, comm, kStream), comm);
  NCCL_OK(ncclGroupEnd(), comm);
  for (size_t i = 0; i < count; ++i) {
    CHECK(fromPrev[i] == prev * 1000.0f + i, "recv from prev rank %d [%zu]", rank, i);
    CHECK(fromNext[i] == -next * 1000.0f - i, "recv from next rank %d [%zu]", rank, i);
    CHECK(fromSelf[i] == toSelf[i], "self recv rank %d [%zu]", rank, i);
  }
}

// Even and odd ranks split, ordered by descending rank; the last rank opts out.
void split(ncclComm_t comm, int rank, int nranks) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  ncclComm_t half = nullptr;
  NCCL_OK(ncclCommSplit(comm, rank % 2, -rank, &half, &config), comm);
  int subRank = -1, subCount = -1;
  NCCL_OK(ncclCommUserRank(half, &subRank), half);
  NCCL_OK(ncclCommCount(half, &subCount), half);
  const int members = (nranks - rank % 2 + 1) / 2;  // ranks of my parity
  CHECK(subCount == members, "split count %d, want %d", subCount, members);
  CHECK(subRank == members - 1 - rank / 2, "split rank %d of rank %d", subRank, rank);
  int64_t mine = rank, sum = -1, want = 0;
  for (int r = rank % 2; r < nranks; r += 2) want += r;
  NCCL_OK(ncclAllReduce(&mine, &sum, 1, ncclInt64, ncclSum, half, kStream), half);
  CHECK(sum == want, "split allreduce %lld, want %lld", static_cast<long long>(sum), static_cast<long long>(want));
  NCCL_OK(ncclCommDestroy(half), comm);

  ncclComm_t others = nullptr;
  const int color = rank == nranks - 1 ? NCCL_SPLIT_NOCOLOR : 0;
  NCCL_OK(ncclCommSplit(comm, color, 0, &others, nullptr), comm);
  CHECK((others == nullptr) == (color == NCCL_SPLIT_NOCOLOR), "NOCOLOR split on rank %d", rank);
  if (others) {
    int count = 0;
    NCCL_OK(ncclCommCount(others, &count), others);
    CHECK(count == nranks - 1, "split without the last rank has %d ranks", count);
  }
  NCCL_OK(ncclCommDestroy(others), comm);  // NULL is fine, as with NCCL
}

// Local argument errors: each fails at once on this rank alone, names the
// argument and the rank, and leaves the communicator usable.
void errors(ncclComm_t comm, int rank, int nranks) {
  float x[4] = {1, 2, 3, 4}, y[4];
  const std::string rankText = "rank " + std::to_string(rank);
  auto lastError = [comm] { return std::string(ncclGetLastError(comm)); };

  CHECK(ncclAllReduce(x, y, 4, ncclFloat8e4m3, ncclSum, comm, kStream) == ncclInvalidArgument, "fp8 accepted");
  CHECK(lastError().find("ncclFloat8e4m3") != std::string::npos && lastError().find(rankText) != std::string::npos,
        "fp8 message: %s", lastError().c_str());
  CHECK(ncclBroadcast(x, y, 4, static_cast<ncclDataType_t>(13), 0, comm, kStream) == ncclInvalidArgument,
        "datatype 13 accepted");
  CHECK(lastError().find("datatype 13") != std::string::npos, "bad datatype message: %s", lastError().c_str());
  CHECK(ncclAllReduce(x, y, 4, ncclFloat32, static_cast<ncclRedOp_t>(77), comm, kStream) == ncclInvalidArgument,
        "op 77 accepted");
  CHECK(lastError().find("op 77") != std::string::npos, "bad op message: %s", lastError().c_str());
  CHECK(ncclReduce(x, y, 4, ncclFloat32, ncclSum, nranks, comm, kStream) == ncclInvalidArgument, "root accepted");
  CHECK(lastError().find("root") != std::string::npos, "bad root message: %s", lastError().c_str());
  CHECK(ncclAllReduce(x, y, 4, ncclFloat32, ncclSum, nullptr, kStream) == ncclInvalidArgument, "NULL comm");
  CHECK(std::string(ncclGetLastError(nullptr)).find("comm") != std::string::npos, "NULL comm message: %s",
        ncclGetLastError(nullptr));
  CHECK(ncclGroupEnd() == ncclInvalidUsage, "unmatched ncclGroupEnd");
  CHECK(lastError().find("ncclGroupEnd") != std::string::npos, "group message: %s", lastError().c_str());
  CHECK(ncclCommCount(comm, nullptr) == ncclInvalidArgument, "NULL count");

  ncclResult_t async = ncclInternalError;
  NCCL_OK(ncclCommGetAsyncError(comm, &async), comm);
  CHECK(async == ncclSuccess, "async error %d", async);

  // Still usable.
  NCCL_OK(ncclAllReduce(x, y, 4, ncclFloat32, ncclMax, comm, kStream), comm);
  CHECK(y[3] == 4.0f, "allreduce after errors: %g", y[3]);
}

void rankBody(ncclComm_t comm, int expectedRank, int nranks, int expectedDevice) {
  int rank = -1, count = -1, device = -1;
  NCCL_OK(ncclCommUserRank(comm, &rank), comm);
  NCCL_OK(ncclCommCount(comm, &count), comm);
  NCCL_OK(ncclCommCuDevice(comm, &device), comm);
  CHECK(rank == expectedRank && count == nranks, "rank %d/%d, want %d/%d", rank, count, expectedRank, nranks);
  CHECK(device == expectedDevice, "rank %d device %d, want %d", rank, device, expectedDevice);
  collectives(comm, rank, nranks);
  preMulSum(comm, rank, nranks);
  pointToPoint(comm, rank, nranks);
  split(comm, rank, nranks);
  errors(comm, rank, nranks);
}

// ncclCommInitAll, one thread per rank.
void initAllThreads(int nranks) {
  std::vector<ncclComm_t> comms(nranks);
  std::vector<int> devices(nranks);
  for (int r = 0; r < nranks; ++r) devices[r] = 10 + r;  // only reported back (host memory)
  NCCL_OK(ncclCommInitAll(comms.data(), nranks, devices.data()), nullptr);
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) threads.emplace_back(rankBody, comms[r], r, nranks, 10 + r);
  for (auto& t : threads) t.join();
  for (int r = 0; r < nranks; ++r) {
    NCCL_OK(ncclCommFinalize(comms[r]), comms[r]);
    NCCL_OK(ncclCommDestroy(comms[r]), nullptr);
  }
}

// ncclGetUniqueId + ncclCommInitRank(Config) in threads, as processes would.
void initRankThreads(int nranks) {
  ncclUniqueId id;
  NCCL_OK(ncclGetUniqueId(&id), nullptr);
  std::vector<ncclComm_t> comms(nranks, nullptr);
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r)
    threads.emplace_back([&, r] {
      if (r % 2 == 0) {
        NCCL_OK(ncclCommInitRank(&comms[r], nranks, id, r), nullptr);
      } else {
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        config.blocking = 0;
        ncclResult_t result = ncclCommInitRankConfig(&comms[r], nranks, id, r, &config);
        while (result == ncclInProgress) ncclCommGetAsyncError(comms[r], &result);  // NCCL's nonblocking idiom
        CHECK(result == ncclSuccess, "ncclCommInitRankConfig: %s", ncclGetLastError(nullptr));
      }
      int device = -1;
      NCCL_OK(ncclCommCuDevice(comms[r], &device), comms[r]);
      CHECK(device == 0, "device %d without CUDA", device);
      double mine = r + 1, sum = 0;
      NCCL_OK(ncclAllReduce(&mine, &sum, 1, ncclFloat64, ncclSum, comms[r], kStream), comms[r]);
      CHECK(sum == nranks * (nranks + 1) / 2.0, "initrank allreduce %g", sum);
    });
  for (auto& t : threads) t.join();
  NCCL_OK(ncclCommAbort(comms[0]), nullptr);  // abort works on a quiet communicator too
  for (int r = 1; r < nranks; ++r) NCCL_OK(ncclCommDestroy(comms[r]), nullptr);

  ncclConfig_t garbage;
  std::memset(&garbage, 0, sizeof(garbage));
  ncclComm_t never = nullptr;
  CHECK(ncclCommInitRankConfig(&never, nranks, id, 0, &garbage) == ncclInvalidArgument, "uninitialized config");
  CHECK(std::string(ncclGetLastError(nullptr)).find("NCCL_CONFIG_INITIALIZER") != std::string::npos,
        "config message: %s", ncclGetLastError(nullptr));
}

// One thread drives every rank through groups, as a single-process NCCL
// program with several GPUs does. PreMulSum inside the group reads its
// ncclScalarDevice scalar and its input at ncclGroupEnd.
void oneThreadGroups(int nranks) {
  std::vector<ncclComm_t> comms(nranks);
  NCCL_OK(ncclCommInitAll(comms.data(), nranks, nullptr), nullptr);
  const size_t count = 100;
  std::vector<std::vector<float>> send(nranks, std::vector<float>(count)), recv = send, scaled = send;
  std::vector<float> scalars(nranks, 0.0f);
  std::vector<ncclRedOp_t> ops(nranks);
  for (int r = 0; r < nranks; ++r) {
    int device = -1;
    NCCL_OK(ncclCommCuDevice(comms[r], &device), comms[r]);
    CHECK(device == r, "devlist NULL: device %d for rank %d", device, r);
    NCCL_OK(ncclRedOpCreatePreMulSum(&ops[r], &scalars[r], ncclFloat32, ncclScalarDevice, comms[r]), comms[r]);
  }
  NCCL_OK(ncclGroupStart(), nullptr);
  for (int r = 0; r < nranks; ++r) {
    NCCL_OK(ncclAllReduce(send[r].data(), recv[r].data(), count, ncclFloat32, ncclSum, comms[r], kStream), comms[r]);
    NCCL_OK(ncclAllReduce(send[r].data(), scaled[r].data(), count, ncclFloat32, ops[r], comms[r], kStream),
            comms[r]);
  }
  for (int r = 0; r < nranks; ++r) {  // after the calls, before ncclGroupEnd: nothing ran yet
    scalars[r] = 2.0f * (r + 1);
    for (size_t i = 0; i < count; ++i) send[r][i] = static_cast<float>(r + i);
  }
  NCCL_OK(ncclGroupEnd(), nullptr);
  for (int r = 0; r < nranks; ++r)
    for (size_t i = 0; i < count; ++i) {
      float plain = 0, weighted = 0;
      for (int q = 0; q < nranks; ++q) {
        plain += q + i;
        weighted += 2.0f * (q + 1) * (q + i);
      }
      CHECK(recv[r][i] == plain, "grouped allreduce rank %d [%zu]: %g, want %g", r, i, recv[r][i], plain);
      CHECK(scaled[r][i] == weighted, "grouped premulsum rank %d [%zu]: %g, want %g", r, i, scaled[r][i], weighted);
    }

  // Split every rank from this thread in one group.
  std::vector<ncclComm_t> halves(nranks, nullptr);
  NCCL_OK(ncclGroupStart(), nullptr);
  for (int r = 0; r < nranks; ++r) NCCL_OK(ncclCommSplit(comms[r], r % 2, r, &halves[r], nullptr), comms[r]);
  NCCL_OK(ncclGroupEnd(), nullptr);
  for (int r = 0; r < nranks; ++r) {
    int subRank = -1;
    NCCL_OK(ncclCommUserRank(halves[r], &subRank), halves[r]);
    CHECK(subRank == r / 2, "grouped split rank %d -> %d", r, subRank);
    NCCL_OK(ncclCommDestroy(halves[r]), nullptr);
  }
  for (int r = 0; r < nranks; ++r) {
    NCCL_OK(ncclRedOpDestroy(ops[r], comms[r]), comms[r]);
    NCCL_OK(ncclCommDestroy(comms[r]), nullptr);
  }
}

}  // namespace

int main() {
  int version = 0;
  NCCL_OK(ncclGetVersion(&version), nullptr);
  CHECK(version == NCCL_VERSION(2, 28, 9), "version %d", version);
  for (int code = ncclSuccess; code < ncclNumResults; ++code)
    CHECK(std::strlen(ncclGetErrorString(static_cast<ncclResult_t>(code))) > 0, "no string for %d", code);
  CHECK(std::string(ncclGetErrorString(ncclSuccess)) != ncclGetErrorString(ncclInvalidArgument), "strings");

  for (int nranks : {2, 3, 4}) {
    initAllThreads(nranks);
    if (failures) break;  // one world size's report is enough to debug
  }
  initRankThreads(3);
  oneThreadGroups(4);

  if (failures) {
    std::fprintf(stderr, "%d check(s) failed\n", failures.load());
    return 1;
  }
  std::printf("nccl api test: all checks passed (NCCL API %d as Loom's libnccl reports it, header %d)\n", version,
              NCCL_VERSION_CODE);
  return 0;
}
