// The AVX-512 kernels: the generic loops compiled with -mavx512{f,bw,vl,dq}
// on top of the AVX2 flags (see CMakeLists.txt). Only ever called after
// isaSupported(kAvx512).
#define LOOM_KERNELS_ISA_NS avx512
#include "kernels/kernel_table_impl.h"

namespace loom::kernels::detail {

const KernelTable* avx512KernelTable() {
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__)
  static const KernelTable table = avx512::buildKernelTable();
  return &table;
#else
  return nullptr;  // the compiler did not accept the AVX-512 flags
#endif
}

}  // namespace loom::kernels::detail
