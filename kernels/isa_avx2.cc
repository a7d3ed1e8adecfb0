// The AVX2 kernels: the generic loops compiled with -mavx2 -mfma -mf16c
// (see CMakeLists.txt). Only ever called after isaSupported(kAvx2).
#define LOOM_KERNELS_ISA_NS avx2
#include "kernels/kernel_table_impl.h"

namespace loom::kernels::detail {

const KernelTable* avx2KernelTable() {
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
  static const KernelTable table = avx2::buildKernelTable();
  return &table;
#else
  return nullptr;  // the compiler did not accept the AVX2 flags
#endif
}

}  // namespace loom::kernels::detail
