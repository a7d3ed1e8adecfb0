// The portable kernels: the generic loops with the build's baseline flags.
#define LOOM_KERNELS_ISA_NS portable
#include "kernels/kernel_table_impl.h"

namespace loom::kernels::detail {

const KernelTable& portableKernelTable() {
  static const KernelTable table = portable::buildKernelTable();
  return table;
}

}  // namespace loom::kernels::detail
