#include "kernels/isa_select.h"

#include <strings.h>

#include "kernels/kernel_table.h"

namespace loom::kernels {
namespace {

// The CPU features each ISA's translation unit was compiled for (the
// AVX-512 unit also carries the AVX2 flags). gcc's checks include the OS
// having enabled the vector state (XCR0).
bool cpuHasAvx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
}

bool cpuHasAvx512() {
  return cpuHasAvx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}

}  // namespace

const char* isaName(Isa isa) {
  switch (isa) {
    case Isa::kPortable: return "portable";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
  }
  return "unknown";
}

bool isaSupported(Isa isa) {
  switch (isa) {
    case Isa::kPortable: return true;
    // CPU first: the table functions are themselves compiled with the ISA's flags.
    case Isa::kAvx2: return cpuHasAvx2() && detail::avx2KernelTable() != nullptr;
    case Isa::kAvx512:
      return cpuHasAvx512() && detail::avx512KernelTable() != nullptr;
  }
  return false;
}

namespace detail {

bool parseIsaName(const char* text, Isa* out) {
  if (text == nullptr) return false;
  for (Isa isa : {Isa::kPortable, Isa::kAvx2, Isa::kAvx512}) {
    if (strcasecmp(text, isaName(isa)) == 0) {
      *out = isa;
      return true;
    }
  }
  return false;
}

Isa bestSupportedIsa() {
  if (isaSupported(Isa::kAvx512)) return Isa::kAvx512;
  if (isaSupported(Isa::kAvx2)) return Isa::kAvx2;
  return Isa::kPortable;
}

Isa capIsa(Isa best, const char* cap, std::string* warning) {
  if (cap == nullptr || *cap == '\0') return best;
  Isa limit;
  if (!parseIsaName(cap, &limit)) {
    if (warning != nullptr)
      *warning = std::string("LOOM_KERNEL_ISA='") + cap +
                 "' is not one of portable, avx2, avx512; ignoring it";
    return best;
  }
  return static_cast<int>(limit) < static_cast<int>(best) ? limit : best;
}

}  // namespace detail
}  // namespace loom::kernels
