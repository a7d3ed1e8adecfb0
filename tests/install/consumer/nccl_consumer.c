/* A program built against the installed NCCL shim (tests/install): it must
 * see the shim's nccl.h, not another NCCL's, and the library must report the
 * NCCL version that header declares. */
#include <nccl.h>
#include <stdio.h>

#ifndef LOOM_NCCL_SHIM
#error "nccl.h is not Loom's (the include path reached another NCCL's header)"
#endif

int main(void) {
  int version = 0;
  ncclResult_t r = ncclGetVersion(&version);
  if (r != ncclSuccess) {
    fprintf(stderr, "nccl_consumer: ncclGetVersion: %s\n", ncclGetErrorString(r));
    return 1;
  }
  if (version != NCCL_VERSION_CODE) {
    fprintf(stderr, "nccl_consumer: header version %d, library version %d\n", NCCL_VERSION_CODE, version);
    return 1;
  }
  printf("nccl_consumer: NCCL API %d on Loom ok\n", version);
  return 0;
}
