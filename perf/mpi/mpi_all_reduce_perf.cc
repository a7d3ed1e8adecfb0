// mpi_all_reduce_perf: the Open MPI baseline for all_reduce_perf. The same
// sweep, checks and table (perf/harness), with MPI_Allreduce on host memory
// (MPI_IN_PLACE for the in-place column). One rank per MPI process.
//
// MPI has no avg: it runs as MPI_SUM followed by a local division, inside the
// timed region, since Loom's avg includes its division too. MPI has no half
// or bfloat16 type: -d all skips them and asking for them is an error.
//
// The same file, compiled with LOOM_PERF_ONECCL, is the oneCCL baseline
// (oneccl_all_reduce_perf, built by perf/compare_mpi.sh where oneCCL is
// installed): MPI still starts the ranks and carries the harness's own small
// reductions and oneCCL's key-value store address, and the timed call is
// ccl::allreduce, waited on before launch() returns, as MPI_Allreduce is.
// The library column names whichever MPI the binary runs on (Open MPI,
// MPICH or Intel MPI: the MPICH build runs on Intel MPI's ABI-compatible
// libmpi.so.12), or oneCCL.
#include <mpi.h>
#ifdef LOOM_PERF_ONECCL
#include <oneapi/ccl.hpp>
#endif

#include <climits>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "perf/harness/datatypes.h"
#include "perf/harness/memory_bound.h"
#include "perf/harness/memory_usage.h"
#include "perf/harness/perf_options.h"
#include "perf/harness/sweep.h"

namespace loom::perf {
namespace {

std::optional<MPI_Datatype> mpiType(loomDataType_t type) {
  switch (type) {
    case loomInt8: return MPI_INT8_T;
    case loomUint8: return MPI_UINT8_T;
    case loomInt32: return MPI_INT32_T;
    case loomUint32: return MPI_UINT32_T;
    case loomInt64: return MPI_INT64_T;
    case loomUint64: return MPI_UINT64_T;
    case loomFloat32: return MPI_FLOAT;
    case loomFloat64: return MPI_DOUBLE;
    default: return std::nullopt;
  }
}

MPI_Op mpiOp(loomRedOp_t op) {
  switch (op) {
    case loomProd: return MPI_PROD;
    case loomMax: return MPI_MAX;
    case loomMin: return MPI_MIN;
    default: return MPI_SUM;  // sum, and avg before its division
  }
}

// Divides count elements by nranks in place (integers truncate, as Loom's avg).
void divideInPlace(loomDataType_t type, void* buffer, size_t count, int nranks) {
  visitType(type, [&](auto codec) {
    using S = typename decltype(codec)::Storage;
    S* elements = static_cast<S*>(buffer);
    for (size_t i = 0; i < count; ++i) elements[i] = static_cast<S>(elements[i] / static_cast<S>(nranks));
  });
}

#ifdef LOOM_PERF_ONECCL
ccl::datatype cclType(loomDataType_t type) {
  switch (type) {
    case loomInt8: return ccl::datatype::int8;
    case loomUint8: return ccl::datatype::uint8;
    case loomInt32: return ccl::datatype::int32;
    case loomUint32: return ccl::datatype::uint32;
    case loomInt64: return ccl::datatype::int64;
    case loomUint64: return ccl::datatype::uint64;
    case loomFloat64: return ccl::datatype::float64;
    default: return ccl::datatype::float32;  // mpiType() admits no other type
  }
}

ccl::reduction cclOp(loomRedOp_t op) {
  switch (op) {
    case loomProd: return ccl::reduction::prod;
    case loomMax: return ccl::reduction::max;
    case loomMin: return ccl::reduction::min;
    default: return ccl::reduction::sum;
  }
}

// One oneCCL communicator over MPI_COMM_WORLD: rank 0 makes the main
// key-value store, and its address reaches the others by MPI_Bcast.
ccl::communicator makeCclComm() {
  int rank = 0, nranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  ccl::init();
  ccl::shared_ptr_class<ccl::kvs> kvs;
  ccl::kvs::address_type address;
  if (rank == 0) {
    kvs = ccl::create_main_kvs();
    address = kvs->get_address();
  }
  MPI_Bcast(address.data(), static_cast<int>(address.size()), MPI_BYTE, 0, MPI_COMM_WORLD);
  if (rank != 0) kvs = ccl::create_kvs(address);
  return ccl::create_communicator(nranks, rank, kvs);
}
#endif

// The library the timed calls go to, for the header.
std::string libraryName() {
#ifdef LOOM_PERF_ONECCL
  return "oneccl";
#else
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = "";
  int length = 0;
  MPI_Get_library_version(text, &length);
  if (std::strstr(text, "Intel")) return "intelmpi";
  if (std::strstr(text, "MPICH")) return "mpich";
  return "openmpi";
#endif
}

class MpiExecutor final : public RankExecutor {
 public:
  MpiExecutor() {
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks_);
  }
  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }

  void launch(const CollArgs& a) override {
#ifdef LOOM_PERF_ONECCL
    ccl::allreduce(a.sendbuff, a.recvbuff, a.count, cclType(a.type), cclOp(a.op), ccl_).wait();
    if (a.op == loomAvg) divideInPlace(a.type, a.recvbuff, a.count, nranks_);
    return;
#endif
    if (a.count > static_cast<size_t>(INT_MAX)) fail("MPI_Allreduce", "count does not fit MPI's int", MPI_SUCCESS);
    const void* send = a.sendbuff == a.recvbuff ? MPI_IN_PLACE : a.sendbuff;
    check("MPI_Allreduce", MPI_Allreduce(send, a.recvbuff, static_cast<int>(a.count), *mpiType(a.type), mpiOp(a.op),
                                         MPI_COMM_WORLD));
    if (a.op == loomAvg) divideInPlace(a.type, a.recvbuff, a.count, nranks_);
  }
  void groupStart() override {}  // -m > 1 is refused for MPI
  void groupEnd() override {}
  void synchronize() override {}  // MPI_Allreduce is blocking
  void barrier() override { check("MPI_Barrier", MPI_Barrier(MPI_COMM_WORLD)); }

  double allReduceDouble(double value, loomRedOp_t op) override {
    double result = 0;
    check("MPI_Allreduce (time)", MPI_Allreduce(&value, &result, 1, MPI_DOUBLE, mpiOp(op), MPI_COMM_WORLD));
    return result;
  }
  int64_t allReduceSum(int64_t value) override {
    int64_t result = 0;
    check("MPI_Allreduce (error count)", MPI_Allreduce(&value, &result, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD));
    return result;
  }
  std::vector<RankInfo> allGatherInfo(const RankInfo& mine) override {
    std::vector<RankInfo> all(nranks_);
    check("MPI_Allgather (rank info)", MPI_Allgather(&mine, sizeof(RankInfo), MPI_BYTE, all.data(), sizeof(RankInfo),
                                                     MPI_BYTE, MPI_COMM_WORLD));
    return all;
  }

 private:
  void check(const char* call, int code) {
    if (code == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING] = "";
    int length = 0;
    MPI_Error_string(code, text, &length);
    fail(call, text, code);
  }
  [[noreturn]] void fail(const char* call, const char* why, int code) {
    std::fprintf(stderr, "rank %d: %s failed: %s\n", rank_, call, why);
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code == MPI_SUCCESS ? 1 : code);
    std::_Exit(1);
  }

  int rank_ = 0;
  int nranks_ = 1;
#ifdef LOOM_PERF_ONECCL
  ccl::communicator ccl_ = makeCclComm();
#endif
};

BufferLayout layout(size_t bytes, size_t typeSize, int /*nranks*/) {
  const size_t count = bytes / typeSize;
  return {count, count, count, 0, 0, count};
}
void fillInput(const DataContext& c, void* sendbuff, size_t count) { fillInputs(c.spec, c.rank, 0, sendbuff, count); }
int64_t countWrong(const DataContext& c, const void* recvbuff, size_t count) {
  return countWrongReduced(c.spec, 0, recvbuff, count);
}
double busBwFactor(int nranks) { return 2.0 * (nranks - 1) / nranks; }

// Flags Open MPI cannot honour; "" when the options are fine. Drops half and
// bfloat16 from -d all (with a note) since MPI has no such types.
std::string unsupported(PerfOptions* o, bool printing) {
  if (o->threads != 1) return "-t must be 1: each MPI process is one rank";
  if (!o->algos.empty()) return "--algos compares Loom's algorithms; Open MPI has none to force";
  if (o->aggIters != 1) return "-m must be 1: MPI has no group calls";
  if (o->gpus != 1 || o->graphLaunches != 0 || o->memcpyBaseline)
    return "-g, -G and --memcpy-baseline need device buffers: the Open MPI baseline uses host memory";
  std::vector<loomDataType_t> kept;
  for (loomDataType_t t : o->types)
    if (mpiType(t)) kept.push_back(t);
    else if (printing && o->types.size() > 1) std::printf("# skipping -d %s: MPI has no such type\n", typeName(t));
  if (kept.empty()) return std::string("-d ") + typeName(o->types.front()) + ": MPI has no such type";
  o->types = kept;
  return "";
}

int mpiMain(int argc, char** argv) {
  noteStartOfRun();  // -M's "Initialization" counts from here
  MpiExecutor executor;
  const bool printing = executor.rank() == 0;
  PerfOptions options;
  const ParseOutcome parsed = parseOptions(argc, argv, &options, /*quiet=*/!printing);
  if (parsed != ParseOutcome::kRun) return parsed == ParseOutcome::kHelp ? 0 : 2;
  if (const std::string why = unsupported(&options, printing); !why.empty()) {
    if (printing) std::fprintf(stderr, "%s: %s\n", argv[0], why.c_str());
    return 2;
  }
  static const CollectiveShape kShape{"mpi_all_reduce_perf", /*usesOp=*/true, /*usesRoot=*/false, layout, fillInput,
                                      countWrong, busBwFactor, allReduceMemTrafficFactor};
  // Where nccl-tests names NCCL's versions: the MPI standard's, compiled and running.
  int major = 0, minor = 0;
  MPI_Get_version(&major, &minor);
  const HeaderVersions versions{MPI_VERSION * 10000 + MPI_SUBVERSION * 100, major * 10000 + minor * 100};
  const std::string library = libraryName();
  const std::string where = "host memory (" + library + ")";
  const SweepOutcome outcome = runSweep(options, kShape, executor,
                                        SweepIdentity{library.c_str(), where.c_str(), 0, versions, ""}, nullptr);
  // Every rank holds the summed counts, so every process agrees on the status.
  return outcome.wrong != 0 || outcome.outOfBounds != 0 || !outcome.reportWritten || outcome.belowMinBusBw ? 1 : 0;
}

}  // namespace
}  // namespace loom::perf

int main(int argc, char** argv) {
#ifdef LOOM_PERF_ONECCL
  // oneCCL's MPI transport asks for a fully thread-safe MPI.
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
#else
  MPI_Init(&argc, &argv);
#endif
  const int status = loom::perf::mpiMain(argc, argv);
  MPI_Finalize();
  return status;
}
