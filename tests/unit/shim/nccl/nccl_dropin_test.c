/* The drop-in test: an NCCL program built against the CUDA toolkit's own
 * nccl.h and linked with NVIDIA's libnccl.so.2 (-lnccl), then run with
 * Loom's build folder first on LD_LIBRARY_PATH. It checks that the library
 * it got is Loom's (libloom's loomGetVersion is loaded with it, from the
 * folder named in argv[1]), that it reports the toolkit header's version,
 * and runs 1- and 2-rank communicators on host buffers (Loom runs calls on
 * host memory blocking when it has no GPU; the test sets
 * CUDA_VISIBLE_DEVICES= so this holds on GPU machines as well). */
#define _GNU_SOURCE
#include <nccl.h>

#include <dlfcn.h>
#include <stdint.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef LOOM_NCCL_SHIM
#error "this program must be built against the CUDA toolkit's nccl.h, not Loom's"
#endif

#define COUNT 64

static int failures = 0;

#define CHECK(cond, ...)                                              \
  do {                                                                \
    if (!(cond)) {                                                    \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                   \
      fprintf(stderr, "\n");                                          \
      ++failures;                                                     \
    }                                                                 \
  } while (0)

#define NCCL_OK(call)                                                                                \
  do {                                                                                               \
    ncclResult_t r_ = (call);                                                                        \
    CHECK(r_ == ncclSuccess, "%s -> %s: %s", #call, ncclGetErrorString(r_), ncclGetLastError(NULL)); \
  } while (0)

static const cudaStream_t kStream = 0;

/* One rank of a 2-rank job as NCCL programs write it: one thread (or
 * process) per rank, ncclCommInitRank with the shared unique id. */
struct RankArgs {
  ncclUniqueId id;
  int rank;
  ncclResult_t init, allReduce, destroy;
  double out[COUNT];
};

static void* runRank(void* opaque) {
  struct RankArgs* a = (struct RankArgs*)opaque;
  ncclComm_t comm = NULL;
  double in[COUNT];
  int i;
  for (i = 0; i < COUNT; ++i) in[i] = (a->rank + 1) * 0.5 * i;
  a->init = ncclCommInitRank(&comm, 2, a->id, a->rank);
  a->allReduce = a->init == ncclSuccess ? ncclAllReduce(in, a->out, COUNT, ncclDouble, ncclMax, comm, kStream)
                                        : ncclInternalError;
  a->destroy = comm ? ncclCommDestroy(comm) : ncclInternalError;
  return NULL;
}

static void twoRanksInThreads(void) {
  struct RankArgs args[2];
  pthread_t threads[2];
  int r, i;
  NCCL_OK(ncclGetUniqueId(&args[0].id));
  args[1].id = args[0].id;
  for (r = 0; r < 2; ++r) {
    args[r].rank = r;
    CHECK(pthread_create(&threads[r], NULL, runRank, &args[r]) == 0, "pthread_create");
  }
  for (r = 0; r < 2; ++r) {
    pthread_join(threads[r], NULL);
    CHECK(args[r].init == ncclSuccess && args[r].allReduce == ncclSuccess && args[r].destroy == ncclSuccess,
          "rank %d: init %d, all-reduce %d, destroy %d", r, args[r].init, args[r].allReduce, args[r].destroy);
    for (i = 0; i < COUNT; ++i)
      CHECK(args[r].out[i] == 1.0 * i, "2-rank max all-reduce rank %d [%d]: %g, want %g", r, i, args[r].out[i], 1.0 * i);
  }
}

/* The library ncclGetVersion came from must be Loom's, in expectedDir. */
static void checkRunningOnLoom(const char* expectedDir) {
  Dl_info info;
  char got[PATH_MAX], want[PATH_MAX];
  int (*loomGetVersion)(int*) = (int (*)(int*))dlsym(RTLD_DEFAULT, "loomGetVersion");
  CHECK(dladdr((void*)&ncclGetVersion, &info) != 0 && info.dli_fname, "dladdr(ncclGetVersion) failed");
  CHECK(realpath(info.dli_fname, got) != NULL, "realpath(%s)", info.dli_fname);
  CHECK(realpath(expectedDir, want) != NULL, "realpath(%s)", expectedDir);
  CHECK(strncmp(got, want, strlen(want)) == 0, "ncclGetVersion comes from %s, not from Loom's %s", got, want);
  CHECK(loomGetVersion != NULL, "libloom is not loaded: this is not Loom's libnccl");
  if (loomGetVersion) {
    int loom = 0;
    loomGetVersion(&loom);
    printf("running on Loom %d.%d.%d: ncclGetVersion is in %s\n", loom / 10000, loom / 100 % 100, loom % 100, got);
  }
}

int main(int argc, char** argv) {
  ncclUniqueId id;
  ncclComm_t one, pair[2], configured;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  float in[2][COUNT], out[2][COUNT], gathered[2 * COUNT], scattered[2][COUNT];
  int version = 0, r, i, count = -1;
  void* ptr = (void*)&version;

  setvbuf(stdout, NULL, _IONBF, 0); /* in order with Loom's log on stderr */
  if (argc != 2) {
    fprintf(stderr, "usage: %s <folder of Loom's libnccl.so.2>\n", argv[0]);
    return 2;
  }
  checkRunningOnLoom(argv[1]);

  NCCL_OK(ncclGetVersion(&version));
  CHECK(version == NCCL_VERSION_CODE, "ncclGetVersion says %d, the toolkit's nccl.h %d", version, NCCL_VERSION_CODE);
  printf("NCCL API version %d (toolkit nccl.h %d.%d.%d)\n", version, NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);

  /* One rank, through a unique id. */
  NCCL_OK(ncclGetUniqueId(&id));
  NCCL_OK(ncclCommInitRank(&one, 1, id, 0));
  for (i = 0; i < COUNT; ++i) in[0][i] = (float)i;
  NCCL_OK(ncclAllReduce(in[0], out[0], COUNT, ncclFloat, ncclSum, one, kStream));
  for (i = 0; i < COUNT; ++i) CHECK(out[0][i] == (float)i, "1-rank all-reduce [%d]: %g", i, out[0][i]);
  NCCL_OK(ncclCommCount(one, &count));
  CHECK(count == 1, "1-rank comm counts %d", count);

  /* ncclConfig_t of 2.28 from NCCL_CONFIG_INITIALIZER is accepted; one
   * without the initializer's magic is refused. */
  config.blocking = 1;
  config.commName = "dropin";
  NCCL_OK(ncclGetUniqueId(&id));
  NCCL_OK(ncclCommInitRankConfig(&configured, 1, id, 0, &config));
  NCCL_OK(ncclCommDestroy(configured));
  config.magic = 0;
  CHECK(ncclCommInitRankConfig(&configured, 1, id, 0, &config) == ncclInvalidArgument, "config without magic accepted");

  twoRanksInThreads();

  /* Two ranks driven by one thread: all-reduce, all-to-all, gather, scatter. */
  NCCL_OK(ncclCommInitAll(pair, 2, NULL));
  for (r = 0; r < 2; ++r)
    for (i = 0; i < COUNT; ++i) in[r][i] = (float)((r + 1) * (i + 1));
  NCCL_OK(ncclGroupStart());
  for (r = 0; r < 2; ++r) NCCL_OK(ncclAllReduce(in[r], out[r], COUNT, ncclFloat, ncclSum, pair[r], kStream));
  NCCL_OK(ncclGroupEnd());
  for (r = 0; r < 2; ++r)
    for (i = 0; i < COUNT; ++i)
      CHECK(out[r][i] == (float)(3 * (i + 1)), "2-rank all-reduce rank %d [%d]: %g", r, i, out[r][i]);

  NCCL_OK(ncclGroupStart());
  for (r = 0; r < 2; ++r) NCCL_OK(ncclAlltoAll(in[r], out[r], COUNT / 2, ncclFloat, pair[r], kStream));
  NCCL_OK(ncclGroupEnd());
  for (r = 0; r < 2; ++r)
    for (i = 0; i < COUNT; ++i) {
      const int from = i / (COUNT / 2), at = r * (COUNT / 2) + i % (COUNT / 2);
      CHECK(out[r][i] == in[from][at], "all-to-all rank %d [%d]: %g, want %g", r, i, out[r][i], in[from][at]);
    }

  NCCL_OK(ncclGroupStart());
  for (r = 0; r < 2; ++r) NCCL_OK(ncclGather(in[r], r == 1 ? gathered : NULL, COUNT, ncclFloat, 1, pair[r], kStream));
  NCCL_OK(ncclGroupEnd());
  for (i = 0; i < 2 * COUNT; ++i)
    CHECK(gathered[i] == in[i / COUNT][i % COUNT], "gather at root [%d]: %g", i, gathered[i]);

  NCCL_OK(ncclGroupStart());
  for (r = 0; r < 2; ++r)
    NCCL_OK(ncclScatter(r == 0 ? gathered : NULL, scattered[r], COUNT, ncclFloat, 0, pair[r], kStream));
  NCCL_OK(ncclGroupEnd());
  for (r = 0; r < 2; ++r)
    for (i = 0; i < COUNT; ++i)
      CHECK(scattered[r][i] == in[r][i], "scatter rank %d [%d]: %g", r, i, scattered[r][i]);

  /* Loom has no simulator: the group still runs (and closes), the estimate
   * stays undefined and the call says it is unsupported. */
  {
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    NCCL_OK(ncclGroupStart());
    for (r = 0; r < 2; ++r) NCCL_OK(ncclAllReduce(in[r], out[r], COUNT, ncclFloat, ncclMax, pair[r], kStream));
    CHECK(ncclGroupSimulateEnd(&sim) == ncclInvalidUsage, "ncclGroupSimulateEnd succeeded");
    CHECK(sim.estimatedTime == NCCL_UNDEF_FLOAT, "estimatedTime %g", sim.estimatedTime);
    for (r = 0; r < 2; ++r)
      for (i = 0; i < COUNT; ++i) CHECK(out[r][i] == in[1][i], "simulated group's all-reduce rank %d [%d]", r, i);
  }

  /* Registration is accepted (a no-op on Loom); what Loom lacks fails with
   * ncclInvalidUsage and says so. */
  {
    void* handle = NULL;
    NCCL_OK(ncclCommRegister(pair[0], in[0], sizeof(in[0]), &handle));
    NCCL_OK(ncclCommDeregister(pair[0], handle));
  }
  /* ncclMemAlloc (nccl-tests allocates with it): host memory in a process
   * that uses no CUDA, usable by the collectives, freed by ncclMemFree. */
  {
    float* a[2] = {NULL, NULL};
    CHECK(ncclMemAlloc(NULL, 4096) == ncclInvalidArgument, "ncclMemAlloc(NULL) accepted");
    for (r = 0; r < 2; ++r) {
      NCCL_OK(ncclMemAlloc((void**)&a[r], COUNT * sizeof(float)));
      CHECK(a[r] != NULL && ((uintptr_t)a[r] % 4096) == 0, "ncclMemAlloc gave %p", (void*)a[r]);
      for (i = 0; i < COUNT; ++i) a[r][i] = (float)(r + 1) * (float)i;
    }
    NCCL_OK(ncclGroupStart());
    for (r = 0; r < 2; ++r) NCCL_OK(ncclAllReduce(a[r], a[r], COUNT, ncclFloat, ncclSum, pair[r], kStream));
    NCCL_OK(ncclGroupEnd());
    for (r = 0; r < 2; ++r)
      for (i = 0; i < COUNT; ++i) CHECK(a[r][i] == 3.0f * (float)i, "all-reduce in ncclMemAlloc memory, rank %d [%d]", r, i);
    for (r = 0; r < 2; ++r) NCCL_OK(ncclMemFree(a[r]));
    NCCL_OK(ncclMemFree(NULL));
    CHECK(ncclMemFree(&failures) == ncclInvalidArgument, "ncclMemFree of a pointer it never gave accepted");
    CHECK(strstr(ncclGetLastError(NULL), "not one ncclMemAlloc returned") != NULL, "message: %s", ncclGetLastError(NULL));
  }
  CHECK(ncclCommShrink(pair[0], &r, 1, &configured, NULL, NCCL_SHRINK_DEFAULT) == ncclInvalidUsage,
        "ncclCommShrink did not fail");
  printf("unsupported call says: %s\n", ncclGetLastError(NULL));

  for (r = 0; r < 2; ++r) NCCL_OK(ncclCommDestroy(pair[r]));
  NCCL_OK(ncclCommDestroy(one));
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("nccl drop-in test: all checks passed\n");
  return 0;
}
