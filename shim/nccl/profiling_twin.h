// NCCL exports each function under two names: ncclX, which a profiler may
// interpose, and pncclX, which the profiler calls to reach the library.
// Here pncclX is an alias of ncclX (one function, two symbols).
#pragma once

#define LOOM_NCCL_PROFILING_TWIN(ret, name, params) extern "C" ret p##name params __attribute__((alias(#name)));
