// Result codes and messages of the NCCL shim: Loom's codes become NCCL's,
// Loom's messages are reworded with NCCL's names, and the shim's own checks
// record messages that name the call, the argument and the rank.
#pragma once

#include <loom/loom.h>

#include <string>

#include "nccl.h"

namespace loom::nccl_shim {

// ncclResult_t for a Loom result. On failure this thread's last error
// becomes Loom's message, with "loomX" names spelled "ncclX".
ncclResult_t fromLoom(loomResult_t result);

// Records a message (printf format) as this thread's last error; returns code.
ncclResult_t fail(ncclResult_t code, const char* format, ...) __attribute__((format(printf, 2, 3)));

// The message of this thread's last failure; empty when there was none.
const char* lastErrorOfThread();

// "loomAllReduce" -> "ncclAllReduce" wherever a Loom API name starts a word.
std::string withNcclNames(const char* loomMessage);

// The loomComm_t behind an ncclComm_t: the shim hands out Loom's handles.
inline loomComm_t toLoom(ncclComm_t comm) { return reinterpret_cast<loomComm_t>(comm); }
inline ncclComm_t toNccl(loomComm_t comm) { return reinterpret_cast<ncclComm_t>(comm); }

// Checks that comm is live and gets its rank (for messages). On failure the
// error names `call` (not the Loom function used to ask).
ncclResult_t rankOf(const char* call, ncclComm_t comm, int* rank);

// Rejects data types Loom does not reduce or move (fp8, out of range).
ncclResult_t checkDataType(const char* call, int rank, ncclDataType_t datatype);

}  // namespace loom::nccl_shim
