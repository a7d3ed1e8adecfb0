// The per-instruction-set table of kernels behind reduce(). Each ISA's
// translation unit (isa_portable.cc, isa_avx2.cc, isa_avx512.cc) compiles the
// same generic loops with its own compiler flags and exports one table; the
// dispatcher (reduce.cc) picks a table once and indexes it by type and op.
// Internal to kernels/.
#pragma once

#include <cstddef>

#include "common/types.h"

namespace loom::kernels::detail {

// dst[i] = a[i] (op) b[i].
using BinaryKernel = void (*)(void* dst, const void* a, const void* b, size_t count);
// dst[i] = src[i] / nranks (avg's final step).
using DivideKernel = void (*)(int nranks, void* dst, const void* src, size_t count);
// dst[i] = (a[i] + b[i]) / nranks, rounding the sum first as two passes would.
using SumDivideKernel = void (*)(int nranks, void* dst, const void* a, const void* b, size_t count);

struct KernelTable {
  BinaryKernel reduce[kNumDataTypes][kNumRedOps];
  DivideKernel divide[kNumDataTypes];
  SumDivideKernel sumDivide[kNumDataTypes];
};

// Always available.
const KernelTable& portableKernelTable();
// nullptr when the compiler could not build the ISA (the CPU is not checked
// here; see isaSupported()).
const KernelTable* avx2KernelTable();
const KernelTable* avx512KernelTable();

}  // namespace loom::kernels::detail
