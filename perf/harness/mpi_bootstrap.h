// Under an MPI launcher (mpirun, mpiexec), the perf tools meet as nccl-tests
// do: MPI gives rank and size, and rank 0's unique id reaches the others by
// MPI_Bcast. Only built when the tools link MPI (LOOM_WITH_MPI, MPI found).
#pragma once

#include <loom/loom.h>

namespace loom::perf {

// Whether `launcher` (loomGetLaunchEnv's name) starts processes of the MPI
// these tools link (Open MPI's mpirun for Open MPI, Hydra for MPICH).
bool isMpiLauncher(const char* launcher);

// MPI_Init, then rank 0 creates the unique id and broadcasts it. Returns
// false, having printed why, when a call fails or MPI's size is not
// `launcherSize`. MPI_Finalize runs at exit.
bool mpiShareUniqueId(const char* tool, int launcherSize, loomUniqueId* id, int* rank, int* size);

}  // namespace loom::perf
