// ncclGroupStart/End over Loom's groups. Loom reads a grouped call's
// buffers only at the outermost group end, so work the shim must do on
// those buffers first (PreMulSum's scaling) is deferred to that point, and
// memory it fills (the scaled copy) lives until the group has finished.
#pragma once

#include <functional>
#include <memory>

#include "nccl.h"

namespace loom::nccl_shim {

// True between ncclGroupStart and its matching ncclGroupEnd on this thread.
bool inGroup();

// Runs `beforeStart` at the outermost ncclGroupEnd, before Loom starts the
// group's work, and frees `keepAlive` once that work has finished.
void deferToGroupEnd(std::function<void()> beforeStart, std::unique_ptr<unsigned char[]> keepAlive);

ncclResult_t groupStart();
ncclResult_t groupEnd();

}  // namespace loom::nccl_shim
