// CPU reduction kernels: pure functions over raw buffers, no knowledge of
// communicators, transports or algorithms.
//
// Every (DataType x RedOp) is supported. Integer arithmetic wraps (two's
// complement, as if computed in the unsigned type) so results do not depend
// on reduction order. fp16 and bf16 are widened to fp32, combined, and rounded
// back to nearest-even after every operation. kAvg reduces as kSum; the
// division by the number of ranks is applied by `finalize` (integers truncate
// toward zero, as C division does).
//
// The implementation picks, once per process, the best instruction set the
// CPU has (AVX-512, AVX2, or portable code); buffers need no alignment and
// `dst` may alias either source exactly (but must not partially overlap).
#pragma once

#include <cstddef>

#include "common/types.h"

namespace loom::kernels {

enum class Isa { kPortable = 0, kAvx2 = 1, kAvx512 = 2 };
const char* isaName(Isa isa);
// The instruction set the dispatcher chose for this CPU (LOOM_KERNEL_ISA=portable|avx2|avx512 caps it).
Isa activeIsa();
// Whether this CPU (and build) can run `isa`.
bool isaSupported(Isa isa);

// dst[i] = a[i] (op) b[i] for i < count. kAvg behaves as kSum.
void reduce(DataType type, RedOp op, void* dst, const void* a, const void* b, size_t count);
// Same, forcing an instruction set (for tests and benchmarks); isaSupported(isa) must hold.
void reduceWithIsa(Isa isa, DataType type, RedOp op, void* dst, const void* a, const void* b, size_t count);

// Applies the op's final step to `count` elements of src into dst (may alias):
// for kAvg divides by `nranks`; for every other op copies.
void finalize(DataType type, RedOp op, int nranks, void* dst, const void* src, size_t count);

// dst[i] = (a[i] (op) b[i]) then finalize: the last reduction of a collective
// fused with the averaging division (one pass instead of two).
void reduceFinal(DataType type, RedOp op, int nranks, void* dst, const void* a, const void* b,
                 size_t count);

}  // namespace loom::kernels
