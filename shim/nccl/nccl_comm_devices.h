// The CUDA device of each communicator, for ncclCommCuDevice: NCCL ties a
// communicator to the device current at its creation; Loom has no such
// notion, so the shim remembers it beside Loom's handle.
#pragma once

#include "nccl.h"

namespace loom::nccl_shim {

void rememberDevice(ncclComm_t comm, int device);
// The device remembered for comm, or 0 if none was.
int deviceOf(ncclComm_t comm);
// On destroy/abort: the address may be reused by a later communicator.
void forgetDevice(ncclComm_t comm);

}  // namespace loom::nccl_shim
