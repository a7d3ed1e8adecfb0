#include "perf/harness/mpi_bootstrap.h"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace loom::perf {
namespace {

void finalizeMpi() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace

bool isMpiLauncher(const char* launcher) {
  if (!launcher) return false;
  // Only the launchers of the MPI these tools link: Open MPI's MPI_Init under
  // MPICH's mpiexec (or the reverse) would start N singletons.
#if defined(OMPI_MAJOR_VERSION)
  return std::strcmp(launcher, "Open MPI") == 0 || std::strcmp(launcher, "PMIx") == 0;
#else
  return std::strcmp(launcher, "MPICH/Intel MPI (PMI)") == 0 || std::strcmp(launcher, "PMIx") == 0;
#endif
}

bool mpiShareUniqueId(const char* tool, int launcherSize, loomUniqueId* id, int* rank, int* size) {
  if (MPI_Init(nullptr, nullptr) != MPI_SUCCESS) {
    std::fprintf(stderr, "%s: MPI_Init failed\n", tool);
    return false;
  }
  std::atexit(finalizeMpi);
  MPI_Comm_rank(MPI_COMM_WORLD, rank);
  MPI_Comm_size(MPI_COMM_WORLD, size);
  if (*size != launcherSize) {
    std::fprintf(stderr,
                 "%s: rank %d: MPI_COMM_WORLD has %d ranks but the launcher's environment says %d: the MPI this tool "
                 "links is not the launcher's\n",
                 tool, *rank, *size, launcherSize);
    return false;
  }
  // Rank 0's outcome travels with the id, so that a failure there ends
  // every rank instead of leaving them waiting at the root.
  struct {
    int ok;
    loomUniqueId id;
  } message{};
  if (*rank == 0) {
    const loomResult_t r = loomGetUniqueId(&message.id);
    message.ok = r == loomSuccess;
    if (!message.ok)
      std::fprintf(stderr, "%s: rank 0: loomGetUniqueId failed: %s: %s\n", tool, loomGetErrorString(r),
                   loomGetLastError(nullptr));
  }
  if (MPI_Bcast(&message, sizeof(message), MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS) {
    std::fprintf(stderr, "%s: rank %d: MPI_Bcast of the unique id failed\n", tool, *rank);
    return false;
  }
  if (!message.ok) return false;
  *id = message.id;
  return true;
}

}  // namespace loom::perf
