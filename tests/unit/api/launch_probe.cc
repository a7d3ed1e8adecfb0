// A Loom program without MPI, as a user writes it: it joins whatever job its
// launcher started (loomGetUniqueIdFromEnv) and checks an all-reduce of the
// ranks against n(n-1)/2. Prints one line per rank; exits 1 on any failure.
// check_launchers.sh runs it under mpirun and srun's variables.
#include <loom/loom.h>

#include <cstdio>

int main() {
  int rank = -1, nranks = 0, localRank = -1;
  const char* launcher = "";
  loomUniqueId id;
  if (loomGetLaunchEnv(&rank, &nranks, &localRank, &launcher) != loomSuccess ||
      loomGetUniqueIdFromEnv(&id, &rank, &nranks) != loomSuccess) {
    std::fprintf(stderr, "launch_probe: %s\n", loomGetLastError(nullptr));
    return 1;
  }
  loomComm_t comm = nullptr;
  if (loomCommInitRank(&comm, nranks, id, rank) != loomSuccess) {
    std::fprintf(stderr, "launch_probe: rank %d: loomCommInitRank: %s\n", rank, loomGetLastError(nullptr));
    return 1;
  }
  int mine = rank, sum = -1;
  const bool ok = loomAllReduce(&mine, &sum, 1, loomInt32, loomSum, comm, nullptr) == loomSuccess;
  const int expected = nranks * (nranks - 1) / 2;
  std::printf("launch_probe: %s rank %d of %d (local %d): sum %d, expected %d\n", launcher, rank, nranks, localRank,
              sum, expected);
  loomCommDestroy(comm);
  return ok && sum == expected ? 0 : 1;
}
