// OpenBLAS set-up for processes that are one rank among several on a host.
//
// Two things go wrong with OpenBLAS's defaults here: each rank starts a
// thread per core, and the ranks' threads then fight over the same cores;
// and OpenBLAS 0.3.21 (Debian 12) does not recognise some virtual CPUs and
// falls back to its SSE3 "Prescott" kernels, 3-4x slower than its AVX2 or
// AVX-512 ones on the same machine. The core type is read only when the
// library loads, so the fix for the second is to put OPENBLAS_CORETYPE in
// the environment and exec the program again, before anything else runs.
#pragma once

namespace loom::ddp {

// Call first in main(). Caps OpenBLAS at one thread, and if OpenBLAS chose
// its generic Prescott kernels on a CPU with AVX-512 (SkylakeX kernels) or
// AVX2 (Haswell), sets OPENBLAS_CORETYPE and re-executes this program with
// the same arguments (once: a set OPENBLAS_CORETYPE is always respected).
// Returns only in the process that goes on; prints one line to stderr when
// it re-executes if `verbose`.
void configureBlasForRanks(char** argv, bool verbose = false);

// The core OpenBLAS runs ("SkylakeX", "Haswell", "Prescott", ...).
const char* blasCoreName();

}  // namespace loom::ddp
