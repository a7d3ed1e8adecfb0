// Input buffers for the kernel tests: random bit patterns for integers; for
// floats a mix of moderate values (so sums and products stay finite and hit
// rounding ties), raw random bit patterns (subnormals, huge values, NaNs) and
// the special values of each type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "common/types.h"
#include "kernels/reduce.h"

namespace loom::kernels::testdata {

std::vector<unsigned char> randomBuffer(DataType type, size_t count, uint64_t seed);

// Every DataType / RedOp / Isa, for loops in tests. allOps() are the ops
// defined on every type; opsFor(type) adds the bitwise ones for integers.
std::vector<DataType> allTypes();
std::vector<RedOp> allOps();
std::vector<RedOp> opsFor(DataType type);
std::vector<Isa> allIsas();

// "float sum avx2 count=17" for failure messages.
std::string describe(DataType type, RedOp op, Isa isa, size_t count);

}  // namespace loom::kernels::testdata

namespace loom::kernels {
// Lets gtest print an Isa parameter by name.
inline void PrintTo(Isa isa, std::ostream* os) { *os << isaName(isa); }
}  // namespace loom::kernels
