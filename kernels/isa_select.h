// Choosing the instruction set: what the CPU and the build support, and how
// LOOM_KERNEL_ISA caps it. Split from the dispatcher so the parsing and
// capping rules are testable without touching the process environment.
// Internal to kernels/ (and its tests).
#pragma once

#include <string>

#include "kernels/reduce.h"

namespace loom::kernels::detail {

// Parses "portable", "avx2" or "avx512" (case-insensitive). False otherwise.
bool parseIsaName(const char* text, Isa* out);

// The best ISA that both this CPU and this build support.
Isa bestSupportedIsa();

// The ISA to use given the best supported one and the value of
// LOOM_KERNEL_ISA (nullptr or empty: no cap). A cap above `best` yields
// `best`; an unparsable cap is ignored and explained in *warning.
Isa capIsa(Isa best, const char* cap, std::string* warning);

}  // namespace loom::kernels::detail
