// Fault injection with ranks as processes: the test process forks the ranks
// (with the environment loomrun would give them: RANK, WORLD_SIZE,
// MASTER_ADDR/PORT, LOOM_JOB_SECRET), waits until every rank runs one
// collective in a loop, then SIGKILLs or SIGSTOPs one of them. Each survivor
// keeps calling until a call fails, then destroys its communicator and sends
// the parent a report: the error it saw, when, and whether anything it
// created (/dev/shm segment, descriptor, thread) outlived the communicator.
//
// loomrun is not used because it stops every rank as soon as one fails,
// and the point here is what the survivors see.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace loom::testing::faults {

// kExit: the victim calls _exit(7) after a few more calls, without
// destroying its communicator (a crash that is not a signal).
enum class Fault { kKill, kStop, kExit };

struct FaultCase {
  std::string collective;  // see collectiveNames()
  Fault fault = Fault::kKill;
  int nranks = 4;
  int victim = 2;
  double timeoutSeconds = 30;  // LOOM_TIMEOUT of every rank
  size_t count = 1 << 20;      // elements (float) per rank and call
  bool onStream = false;       // enqueue on a stream + synchronize (error from the worker thread)
};

// What one surviving rank saw.
struct RankReport {
  int rank = -1;
  int code = -1;              // loomResult_t of the failing call
  double failedAfter = -1;    // seconds from the fault to the failing call's return
  double destroySeconds = -1; // loomCommDestroy's duration
  int asyncCode = -1;         // loomCommGetAsyncError after the failure
  int nextCallCode = -1;      // one more call after the failure
  double nextCallSeconds = -1;
  int callsBeforeFault = 0;   // collectives completed before the failing one
  int fdsBefore = -1, fdsAfter = -1;     // /proc/self/fd before init, after destroy
  int tasksBefore = -1, tasksAfter = -1; // /proc/self/task likewise
  std::string shmLeft;        // /dev/shm entries of the job left after destroy
  std::string message;        // loomGetLastError of the failing call
};

struct FaultOutcome {
  std::string setupError;          // non-empty: the fault was never injected
  pid_t victimPid = 0;
  std::string hostName;            // as Loom reports it (gethostname, 63 chars at most)
  std::vector<RankReport> reports; // one per survivor that reported, by rank
  std::vector<int> missing;        // survivors that sent no report
  double seconds = 0;              // whole case, forks to reaping
};

// The collectives a rank can loop on: allreduce, broadcast, reduce,
// reducescatter, allgather, sendrecv, alltoall, barrier.
const std::vector<std::string>& collectiveNames();

// Runs one case; never leaves a child behind (stragglers are SIGKILLed).
FaultOutcome runFaultCase(const FaultCase& c);

}  // namespace loom::testing::faults
