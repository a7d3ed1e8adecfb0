// loom_vs_mpi_latency: Loom's and Open MPI's all-reduce timed in the same
// processes, in alternating blocks, so both see the same machine state.
//
// Why it exists: on this 2-core VM a tiny all-reduce's time moves between
// states that last seconds (2 ranks, 8 B: about 0.15, 0.23 or 0.45 us, for
// both libraries alike), so two separate runs compare states as much as
// libraries. Here every block of Loom calls sits next to a block of MPI calls
// a few milliseconds apart, in ABBA order (no library always goes first), and
// the report gives the median of the per-pair time ratios next to each
// library's median time.
//
// Run under mpirun, one process per rank: rank 0 makes Loom's unique id and
// MPI_Bcast hands it out. Loom's calls are blocking (NULL stream), like
// MPI_Allreduce. Each block starts after an MPI_Barrier; its time per call is
// the mean over ranks. Results of the first and last call of every block are
// checked against the exact integer-valued sum, for both libraries.
//
//   mpirun -np 2 loom_vs_mpi_latency [-b 8] [-e 8] [-f 2] [--blocks 40] [--iters 1000]
#include <loom/loom.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "perf/harness/perf_options.h"

namespace {

struct Settings {
  size_t minBytes = 8, maxBytes = 8;
  size_t factor = 2;
  int blocks = 40;
  int iters = 1000;
  int warmup = 2000;
};

[[noreturn]] void die(int rank, const std::string& why) {
  std::fprintf(stderr, "loom_vs_mpi_latency: rank %d: %s\n", rank, why.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

void checkMpi(int rank, const char* call, int code) {
  if (code != MPI_SUCCESS) die(rank, std::string(call) + " failed");
}

void checkLoom(int rank, loomComm_t comm, const char* call, loomResult_t code) {
  if (code == loomSuccess) return;
  const char* last = loomGetLastError(comm);
  die(rank,
      std::string(call) + " failed: " + loomGetErrorString(code) + (last && *last ? std::string(": ") + last : ""));
}

bool parse(int argc, char** argv, Settings* s, std::string* error) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) {
      *error = flag + " needs a value";
      return false;
    }
    const char* value = argv[++i];
    char* end = nullptr;
    if (flag == "-b" || flag == "-e") {
      size_t bytes = 0;
      if (!loom::perf::parseSize(value, &bytes) || bytes < sizeof(float)) {
        *error = flag + " " + value + ": not a size of at least 4 bytes";
        return false;
      }
      (flag == "-b" ? s->minBytes : s->maxBytes) = bytes;
      continue;
    }
    const long n = std::strtol(value, &end, 10);
    if (end == value || *end != '\0' || n < 1 || n > 100000000) {
      *error = flag + " " + value + ": not a positive count";
      return false;
    }
    if (flag == "-f" && n >= 2)
      s->factor = static_cast<size_t>(n);
    else if (flag == "--blocks")
      s->blocks = static_cast<int>(n);
    else if (flag == "--iters")
      s->iters = static_cast<int>(n);
    else if (flag == "-w")
      s->warmup = static_cast<int>(n);
    else {
      *error = "unknown flag " + flag + " (flags: -b -e -f --blocks --iters -w)";
      return false;
    }
  }
  if (s->minBytes > s->maxBytes) {
    *error = "-b is larger than -e";
    return false;
  }
  return true;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(std::lround(q * static_cast<double>(v.size() - 1)))];
}

class Pair {
 public:
  Pair(int rank, int nranks, loomComm_t comm, size_t count)
      : rank_(rank), nranks_(nranks), comm_(comm), send_(count), recv_(count) {
    // Small integers: every partial sum is exact in float, in any order.
    for (size_t i = 0; i < count; ++i) send_[i] = static_cast<float>((rank + 1) * 3 + static_cast<int>(i % 7));
  }

  // Microseconds per call, averaged over ranks; checks the first and last call.
  double timeBlock(bool loom, int iters) {
    checkMpi(rank_, "MPI_Barrier", MPI_Barrier(MPI_COMM_WORLD));
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) {
      if (i == 1 || i == iters - 1) verify(loom);
      call(loom);
    }
    const auto end = std::chrono::steady_clock::now();
    verify(loom);
    const double mine = std::chrono::duration<double, std::micro>(end - start).count() / iters;
    double sum = 0;
    checkMpi(rank_, "MPI_Allreduce (time)", MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    return sum / nranks_;
  }

  void call(bool loom) {
    const int count = static_cast<int>(send_.size());
    if (loom)
      checkLoom(rank_, comm_, "loomAllReduce",
                loomAllReduce(send_.data(), recv_.data(), send_.size(), loomFloat32, loomSum, comm_, nullptr));
    else
      checkMpi(rank_, "MPI_Allreduce",
               MPI_Allreduce(send_.data(), recv_.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
  }

 private:
  void verify(bool loom) {
    for (size_t i = 0; i < recv_.size(); ++i) {
      float want = 0;
      for (int r = 0; r < nranks_; ++r) want += static_cast<float>((r + 1) * 3 + static_cast<int>(i % 7));
      if (recv_[i] != want)
        die(rank_, std::string(loom ? "Loom" : "MPI") + " all-reduce gave a wrong sum at element " + std::to_string(i) +
                       ": " + std::to_string(recv_[i]) + " where " + std::to_string(want) + " was expected");
    }
    std::fill(recv_.begin(), recv_.end(), -1.0f);  // the next checked call must write it again
  }

  int rank_, nranks_;
  loomComm_t comm_;
  std::vector<float> send_, recv_;
};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, nranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  Settings s;
  std::string error;
  if (!parse(argc, argv, &s, &error)) {
    if (rank == 0) std::fprintf(stderr, "loom_vs_mpi_latency: %s\n", error.c_str());
    MPI_Finalize();
    return 2;
  }

  loomUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (rank == 0) checkLoom(rank, nullptr, "loomGetUniqueId", loomGetUniqueId(&id));
  checkMpi(rank, "MPI_Bcast (unique id)", MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD));
  loomComm_t comm = nullptr;
  checkLoom(rank, nullptr, "loomCommInitRank", loomCommInitRank(&comm, nranks, id, rank));

  if (rank == 0) {
    std::printf("# Loom vs Open MPI all-reduce (float sum, blocking), %d processes, in the same processes:\n", nranks);
    std::printf("# %d blocks of %d calls per library and size, alternating ABBA, after %d warm-up calls each;\n",
                s.blocks, s.iters, s.warmup);
    std::printf(
        "# time = median over blocks of the per-call time (mean over ranks); ratio = Loom/MPI per block pair\n");
    std::printf("# %10s %12s %12s %14s %14s %14s\n", "size(B)", "loom(us)", "mpi(us)", "ratio(median)", "ratio(q25)",
                "ratio(q75)");
  }
  for (size_t bytes = s.minBytes; bytes <= s.maxBytes; bytes *= s.factor) {
    const size_t count = bytes / sizeof(float);
    Pair pair(rank, nranks, comm, count);
    for (int i = 0; i < s.warmup; ++i) pair.call(true);
    for (int i = 0; i < s.warmup; ++i) pair.call(false);
    std::vector<double> loomTimes, mpiTimes, ratios;
    for (int b = 0; b < s.blocks; ++b) {
      const bool loomFirst = (b % 4 == 0 || b % 4 == 3);  // ABBA
      const double first = pair.timeBlock(loomFirst, s.iters);
      const double second = pair.timeBlock(!loomFirst, s.iters);
      const double loomUs = loomFirst ? first : second, mpiUs = loomFirst ? second : first;
      loomTimes.push_back(loomUs);
      mpiTimes.push_back(mpiUs);
      ratios.push_back(loomUs / mpiUs);
    }
    if (rank == 0)
      std::printf("  %10zu %12.3f %12.3f %14.3f %14.3f %14.3f\n", count * sizeof(float), median(loomTimes),
                  median(mpiTimes), median(ratios), quantile(ratios, 0.25), quantile(ratios, 0.75));
    std::fflush(stdout);
    if (bytes > s.maxBytes / s.factor) break;  // no overflow past -e
  }
  checkLoom(rank, comm, "loomCommDestroy", loomCommDestroy(comm));
  MPI_Finalize();
  return 0;
}
