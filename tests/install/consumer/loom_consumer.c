/* A program built against an installed Loom (tests/install): the header's
 * version must be the library's, and a one-rank all-reduce must run. */
#include <loom/loom.h>
#include <stdio.h>

static int failed(const char* what, loomResult_t result, loomComm_t comm) {
  fprintf(stderr, "loom_consumer: %s: %s: %s\n", what, loomGetErrorString(result), loomGetLastError(comm));
  return 1;
}

int main(void) {
  int version = 0;
  loomResult_t r = loomGetVersion(&version);
  if (r != loomSuccess) return failed("loomGetVersion", r, NULL);
  if (version != LOOM_VERSION_CODE) {
    fprintf(stderr, "loom_consumer: header version %d, library version %d\n", LOOM_VERSION_CODE, version);
    return 1;
  }
  loomUniqueId id;
  loomComm_t comm = NULL;
  if ((r = loomGetUniqueId(&id)) != loomSuccess) return failed("loomGetUniqueId", r, NULL);
  if ((r = loomCommInitRank(&comm, 1, id, 0)) != loomSuccess) return failed("loomCommInitRank", r, NULL);
  float in[4] = {1.5f, -2.0f, 3.25f, 40.0f}, out[4] = {0};
  /* The NULL stream: the call returns when the result is in out. */
  if ((r = loomAllReduce(in, out, 4, loomFloat32, loomSum, comm, NULL)) != loomSuccess)
    return failed("loomAllReduce", r, comm);
  for (int i = 0; i < 4; ++i) {
    if (out[i] != in[i]) {
      fprintf(stderr, "loom_consumer: one-rank sum: out[%d] = %g, expected %g\n", i, out[i], in[i]);
      return 1;
    }
  }
  if ((r = loomCommDestroy(comm)) != loomSuccess) return failed("loomCommDestroy", r, NULL);
  printf("loom_consumer: Loom %d.%d.%d, one-rank all-reduce ok\n", version / 10000, version / 100 % 100,
         version % 100);
  return 0;
}
