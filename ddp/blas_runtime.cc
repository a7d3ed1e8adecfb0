#include "ddp/blas_runtime.h"

#include <cblas.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace loom::ddp {

const char* blasCoreName() {
  const char* name = openblas_get_corename();
  return name ? name : "unknown";
}

void configureBlasForRanks(char** argv, bool verbose) {
  openblas_set_num_threads(1);
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;  // the user's (or our earlier) choice
  if (strcasecmp(blasCoreName(), "Prescott") != 0) return;  // detection worked
  const char* better = nullptr;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
    better = "SkylakeX";
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    better = "Haswell";
  if (better == nullptr) return;
  setenv("OPENBLAS_CORETYPE", better, 1);
  if (verbose)
    std::fprintf(stderr, "[loom] OpenBLAS picked its generic Prescott kernels on this CPU; re-executing with OPENBLAS_CORETYPE=%s\n",
                 better);
  execv("/proc/self/exe", argv);
  // exec failed (no /proc?): carry on with the slow kernels rather than fail.
  std::fprintf(stderr, "[loom] re-exec with OPENBLAS_CORETYPE=%s failed (%s); continuing with the generic kernels\n", better,
               std::strerror(errno));
}

}  // namespace loom::ddp
