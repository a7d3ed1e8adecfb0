/* The C side of the NCCL API test: a C program written only against NCCL's
 * API, in the single-process style (one thread drives every rank through
 * ncclGroupStart/End). Built against Loom's nccl.h and against the CUDA
 * toolkit's; links Loom's libnccl.so.2 only. Streams: 0 everywhere; without a GPU
 * Loom runs each call (each group) blocking, so results are ready on return
 * (a GPU program would cudaStreamSynchronize, which needs a GPU). */
#include <nccl.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#if defined(EXPECT_LOOM_NCCL_H) && !defined(LOOM_NCCL_SHIM)
#error "this build must use Loom's nccl.h (shim/nccl/include), not the CUDA toolkit's"
#endif
#if defined(EXPECT_TOOLKIT_NCCL_H) && defined(LOOM_NCCL_SHIM)
#error "this build must use the CUDA toolkit's nccl.h, not Loom's"
#endif

#define NRANKS 3
#define COUNT 40 /* 40 = NRANKS * 13 + 1: reduce-scatter uses the first 39 */
#define BLOCK 13

static int failures = 0;

#define CHECK(cond, ...)                                                   \
  do {                                                                     \
    if (!(cond)) {                                                         \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);      \
      fprintf(stderr, __VA_ARGS__);                                        \
      fprintf(stderr, "\n");                                               \
      ++failures;                                                          \
    }                                                                      \
  } while (0)

#define NCCL_OK(call)                                                                                   \
  do {                                                                                                  \
    ncclResult_t r_ = (call);                                                                           \
    CHECK(r_ == ncclSuccess, "%s -> %s: %s", #call, ncclGetErrorString(r_), ncclGetLastError(NULL));    \
  } while (0)

static const cudaStream_t kStream = 0;

int main(void) {
  ncclComm_t comms[NRANKS], halves[NRANKS];
  float fin[NRANKS][COUNT], fout[NRANKS][COUNT], gathered[NRANKS][NRANKS * BLOCK], block[NRANKS][BLOCK];
  int32_t iin[NRANKS][COUNT], iout[NRANKS][COUNT], toNext[NRANKS][COUNT], fromPrev[NRANKS][COUNT];
  int32_t scalars[NRANKS];
  ncclRedOp_t ops[NRANKS];
  int r, q, i;

  NCCL_OK(ncclCommInitAll(comms, NRANKS, NULL));
  for (r = 0; r < NRANKS; ++r) {
    for (i = 0; i < COUNT; ++i) {
      fin[r][i] = (float)(r * 10 + i);
      iin[r][i] = r - i;
      toNext[r][i] = 1000 * r + i;
    }
    scalars[r] = r + 2;
    NCCL_OK(ncclRedOpCreatePreMulSum(&ops[r], &scalars[r], ncclInt32, ncclScalarHostImmediate, comms[r]));
  }

  /* Collectives of every rank in one group. */
  NCCL_OK(ncclGroupStart());
  for (r = 0; r < NRANKS; ++r) {
    NCCL_OK(ncclAllReduce(fin[r], fout[r], COUNT, ncclFloat, ncclAvg, comms[r], kStream));
    NCCL_OK(ncclAllReduce(iin[r], iout[r], COUNT, ncclInt32, ops[r], comms[r], kStream));
    NCCL_OK(ncclAllGather(fin[r], gathered[r], BLOCK, ncclFloat32, comms[r], kStream));
    NCCL_OK(ncclReduceScatter(fin[r], block[r], BLOCK, ncclFloat32, ncclMax, comms[r], kStream));
  }
  NCCL_OK(ncclGroupEnd());
  for (r = 0; r < NRANKS; ++r)
    for (i = 0; i < COUNT; ++i) {
      float avg = 0;
      int32_t weighted = 0;
      for (q = 0; q < NRANKS; ++q) {
        avg += (float)(q * 10 + i);
        weighted += (q + 2) * (q - i);
      }
      avg /= NRANKS;
      CHECK(fout[r][i] > avg - 1e-4f && fout[r][i] < avg + 1e-4f, "avg rank %d [%d]: %g, want %g", r, i, fout[r][i],
            avg);
      CHECK(iout[r][i] == weighted, "premulsum rank %d [%d]: %d, want %d", r, i, (int)iout[r][i], (int)weighted);
      if (i < NRANKS * BLOCK)
        CHECK(gathered[r][i] == (float)((i / BLOCK) * 10 + i % BLOCK), "allgather rank %d [%d]", r, i);
      if (i < BLOCK)
        CHECK(block[r][i] == (float)((NRANKS - 1) * 10 + r * BLOCK + i), "reducescatter max rank %d [%d]", r, i);
    }

  /* A ring of sends and receives, all ranks in one group. */
  NCCL_OK(ncclGroupStart());
  for (r = 0; r < NRANKS; ++r) {
    NCCL_OK(ncclSend(toNext[r], COUNT, ncclInt32, (r + 1) % NRANKS, comms[r], kStream));
    NCCL_OK(ncclRecv(fromPrev[r], COUNT, ncclInt32, (r + NRANKS - 1) % NRANKS, comms[r], kStream));
  }
  NCCL_OK(ncclGroupEnd());
  for (r = 0; r < NRANKS; ++r)
    for (i = 0; i < COUNT; ++i)
      CHECK(fromPrev[r][i] == 1000 * ((r + NRANKS - 1) % NRANKS) + i, "ring recv rank %d [%d]", r, i);

  /* Split (grouped) and a broadcast on each half. */
  NCCL_OK(ncclGroupStart());
  for (r = 0; r < NRANKS; ++r) NCCL_OK(ncclCommSplit(comms[r], r % 2, r, &halves[r], NULL));
  NCCL_OK(ncclGroupEnd());
  NCCL_OK(ncclGroupStart());
  for (r = 0; r < NRANKS; ++r) NCCL_OK(ncclBcast(toNext[r], COUNT, ncclInt32, 0, halves[r], kStream));
  NCCL_OK(ncclGroupEnd());
  for (r = 0; r < NRANKS; ++r) {
    int count = 0;
    NCCL_OK(ncclCommCount(halves[r], &count));
    CHECK(count == (r % 2 == 0 ? (NRANKS + 1) / 2 : NRANKS / 2), "half of rank %d has %d ranks", r, count);
    CHECK(toNext[r][5] == 1000 * (r % 2) + 5, "bcast in half of rank %d: %d", r, (int)toNext[r][5]);
    NCCL_OK(ncclCommDestroy(halves[r]));
  }

  /* An fp8 type is refused, naming it. */
  CHECK(ncclAllReduce(fin[0], fout[0], 1, ncclFloat8e5m2, ncclSum, comms[0], kStream) == ncclInvalidArgument,
        "fp8 accepted");
  CHECK(strstr(ncclGetLastError(comms[0]), "ncclFloat8e5m2") != NULL, "message: %s", ncclGetLastError(comms[0]));

  for (r = 0; r < NRANKS; ++r) {
    NCCL_OK(ncclRedOpDestroy(ops[r], comms[r]));
    NCCL_OK(ncclCommDestroy(comms[r]));
  }
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("nccl api test (C): all checks passed\n");
  return 0;
}
