/*
 * Loom: collective communication for host and CUDA device memory.
 *
 * The API mirrors NCCL's so that its users feel at home: the same argument
 * order, the same in-place conventions and the same result-code categories.
 *
 * Thread safety: a communicator may be used by one thread at a time for
 * enqueueing collectives (as in NCCL). Streams may be shared between threads.
 * Every call returns a loomResult_t; on failure loomGetLastError(comm) (or
 * loomGetLastError(NULL) for calls without a communicator) returns a message
 * naming the argument and the rank.
 */
#ifndef LOOM_LOOM_H_
#define LOOM_LOOM_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Only the declarations of this header are exported from libloom. */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

#define LOOM_MAJOR 0
#define LOOM_MINOR 1
#define LOOM_PATCH 0
#define LOOM_VERSION_CODE (LOOM_MAJOR * 10000 + LOOM_MINOR * 100 + LOOM_PATCH)

/* In C++ the enums below have int as their fixed underlying type, so every int
 * a caller passes is a valid value that the API can reject (without a fixed
 * type, reading e.g. (loomDataType_t)42 is undefined behaviour in C++). Same
 * size and calling convention as the plain C enums. */
#ifdef __cplusplus
#define LOOM_ENUM_BASE : int
#else
#define LOOM_ENUM_BASE
#endif

/* Result codes: the same categories and values as ncclResult_t. */
typedef enum LOOM_ENUM_BASE {
  loomSuccess = 0,
  loomUnhandledCudaError = 1,
  loomSystemError = 2,     /* a system call or library failed (errno is in the message) */
  loomInternalError = 3,   /* a bug in Loom */
  loomInvalidArgument = 4, /* a bad argument; the communicator stays usable */
  loomInvalidUsage = 5,    /* a call made in the wrong state (e.g. group misuse) */
  loomRemoteError = 6,     /* a peer failed or disagreed */
  loomInProgress = 7,      /* asynchronous work has not finished yet */
  loomTimeout = 8,         /* a wait passed LOOM_TIMEOUT */
  loomNumResults = 9
} loomResult_t;

typedef enum LOOM_ENUM_BASE {
  loomInt8 = 0, loomChar = 0,
  loomUint8 = 1,
  loomInt32 = 2, loomInt = 2,
  loomUint32 = 3,
  loomInt64 = 4,
  loomUint64 = 5,
  loomFloat16 = 6, loomHalf = 6,
  loomFloat32 = 7, loomFloat = 7,
  loomFloat64 = 8, loomDouble = 8,
  loomBfloat16 = 9,
  loomNumTypes = 10
} loomDataType_t;

typedef enum LOOM_ENUM_BASE {
  loomSum = 0,
  loomProd = 1,
  loomMax = 2,
  loomMin = 3,
  loomAvg = 4, /* sum, then divided by the number of ranks (integers: truncated) */
  /* Bitwise and, or, xor: integer types only (loomInvalidArgument otherwise). */
  loomBand = 5,
  loomBor = 6,
  loomBxor = 7,
  loomNumOps = 8
} loomRedOp_t;

#define LOOM_UNIQUE_ID_BYTES 128
/* Opaque bootstrap handle: the root's address and port and a 128-bit job
 * secret. Created once (loomGetUniqueId) and passed to every rank out of band. */
typedef struct {
  char internal[LOOM_UNIQUE_ID_BYTES];
} loomUniqueId;

typedef struct loomComm* loomComm_t;

/* An ordered queue of asynchronous operations. Operations enqueued on a
 * stream run in order, driven by their communicator's progress engine.
 * A NULL stream makes a collective blocking: it returns when done. */
typedef struct loomStream* loomStream_t;

loomResult_t loomGetVersion(int* version);
const char* loomGetErrorString(loomResult_t result);
/* The message of the last error on `comm` (or of this thread, if comm is NULL). */
const char* loomGetLastError(loomComm_t comm);

/* Creates a unique id and starts the bootstrap root in this process. */
loomResult_t loomGetUniqueId(loomUniqueId* uniqueId);
/* Builds the unique id from the launcher's environment: loomrun, torchrun,
 * mpirun (Open MPI, MPICH, Intel MPI), srun (docs/launching.md). Under
 * loomrun (MASTER_ADDR, MASTER_PORT, LOOM_JOB_SECRET) rank 0 starts the
 * bootstrap root on MASTER_ADDR:MASTER_PORT; under the others rank 0 starts
 * it on a free port and passes it, with a fresh secret, to the other ranks in
 * a file only this user can read. rank and nranks (either may be NULL)
 * receive this process's rank and the job's size. A partial or wrong
 * environment is an error that names the variable. */
loomResult_t loomGetUniqueIdFromEnv(loomUniqueId* uniqueId, int* rank, int* nranks);
/* Reads only where this process sits in the job, from the same variables:
 * rank, job size, rank among this host's processes and the launcher's name
 * ("loomrun", "torchrun", "Open MPI", "MPICH/Intel MPI (PMI)", "PMIx",
 * "Slurm"). Without any launcher: *nranks 0, *launcher "". Any pointer may be
 * NULL. */
loomResult_t loomGetLaunchEnv(int* rank, int* nranks, int* localRank, const char** launcher);

loomResult_t loomCommInitRank(loomComm_t* comm, int nranks, loomUniqueId commId, int rank);

/* Settings of one communicator that override the environment, as with NCCL's
 * ncclConfig_t: start from LOOM_CONFIG_INITIALIZER and set what you need; a
 * field left at 0 keeps the environment's value. (Framework bindings use it:
 * PyTorch's process-group timeout becomes the communicator's deadline.) */
typedef struct {
  size_t size;           /* sizeof(loomConfig_t): lets later versions add fields */
  double timeoutSeconds; /* deadline of every blocking wait, as LOOM_TIMEOUT */
  /* Bytes per pipelined chunk, as LOOM_CHUNK_SIZE: a multiple of 64 from 4096
   * to 64 MiB, the same on every rank. Larger chunks mean fewer hand-offs per
   * large message (fewer wake-ups where ranks share cores); smaller ones start
   * the pipeline sooner. Read only when size covers it (a caller built
   * against an older header keeps the environment's value). */
  size_t chunkBytes;
} loomConfig_t;
#define LOOM_CONFIG_INITIALIZER {sizeof(loomConfig_t), 0.0, 0}
/* loomCommInitRank with settings; config NULL is the same as loomCommInitRank.
 * loomCommSplit's children keep their parent's settings. */
loomResult_t loomCommInitRankConfig(loomComm_t* comm, int nranks, loomUniqueId commId, int rank,
                                    const loomConfig_t* config);
/* Creates ndev communicators of one clique, all in this process (one per
 * thread that will drive them, or driven together from one thread inside a
 * group). devlist is accepted for NCCL compatibility and ignored for host
 * memory; it may be NULL. */
loomResult_t loomCommInitAll(loomComm_t* comms, int ndev, const int* devlist);
/* Waits for outstanding work, then frees the communicator. */
loomResult_t loomCommDestroy(loomComm_t comm);
/* Stops outstanding work at once (waits return loomRemoteError/aborted) and
 * frees the communicator without blocking on peers. May be called from
 * another thread to unblock a call in progress on comm: that call returns
 * loomRemoteError saying so, and the communicator is freed when it returns.
 * Afterwards calls on comm fail with loomInvalidUsage ("was aborted"); a
 * repeated loomCommAbort and loomCommDestroy return loomSuccess at once. */
loomResult_t loomCommAbort(loomComm_t comm);
/* The first error of asynchronous work on comm, or loomInProgress/loomSuccess. */
loomResult_t loomCommGetAsyncError(loomComm_t comm, loomResult_t* asyncError);
loomResult_t loomCommCount(const loomComm_t comm, int* count);
loomResult_t loomCommUserRank(const loomComm_t comm, int* rank);

/* MPI_Comm_split's semantics: collective over comm; ranks passing the same
 * color form one new communicator, ordered by key, then by rank in comm.
 * color LOOM_SPLIT_NOCOLOR (or any negative color) takes part but gets
 * *newcomm = NULL. Outstanding work on comm finishes first. */
#define LOOM_SPLIT_NOCOLOR (-1)
loomResult_t loomCommSplit(loomComm_t comm, int color, int key, loomComm_t* newcomm);

/* The algorithm and protocol that ran the last collective on comm, e.g.
 * "tree/LL", or "engine/Simple" for the device engine (empty before the first). Perf tools print it per row. */
loomResult_t loomCommGetLastAlgorithm(const loomComm_t comm, char* name, size_t nameLen);

loomResult_t loomStreamCreate(loomStream_t* stream);
/* Waits until everything enqueued on the stream has finished; returns the
 * first error of that work. */
loomResult_t loomStreamSynchronize(loomStream_t stream);
/* loomSuccess when everything enqueued has finished, loomInProgress if not. */
loomResult_t loomStreamQuery(loomStream_t stream);
/* Synchronizes, then frees the stream. */
loomResult_t loomStreamDestroy(loomStream_t stream);

/* The Loom stream bound to a CUDA stream (cudaStream_t, passed as void*; NULL
 * is the legacy default stream). A collective enqueued on it returns at once;
 * it starts after the work enqueued before it on the CUDA stream has finished,
 * and the CUDA stream's later work waits until it has completed (also when it
 * failed: its error then surfaces through loomCommGetAsyncError and
 * loomStreamSynchronize, as with NCCL). Buffers may be device memory.
 * Lifetime: created on the first call for a CUDA stream and cached for the
 * process, so later calls (from any thread) return the same handle; it lives
 * until loomStreamDestroy (after which a call creates a new one) or process
 * exit. Destroy it before the CUDA stream if your program creates and
 * destroys CUDA streams repeatedly.
 * When Loom has no usable CUDA device (built without CUDA, no driver, no GPU)
 * it returns loomSuccess with *stream = NULL: collectives on a NULL stream are
 * blocking, which keeps stream order for host buffers. */
loomResult_t loomStreamFromCuda(void* cudaStream, loomStream_t* stream);

/* Collectives: NCCL's argument order and in-place conventions.
 *  AllReduce:     in place when sendbuff == recvbuff.
 *  Broadcast:     sendbuff is read on the root only; in place when equal.
 *  Reduce:        recvbuff is written on the root only.
 *  ReduceScatter: recvcount elements per rank; sendbuff holds nranks*recvcount;
 *                 in place when recvbuff == sendbuff + rank*recvcount.
 *  AllGather:     sendcount elements per rank; recvbuff holds nranks*sendcount;
 *                 in place when sendbuff == recvbuff + rank*sendcount. */
loomResult_t loomAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           loomDataType_t datatype, loomRedOp_t op, loomComm_t comm,
                           loomStream_t stream);
loomResult_t loomBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           loomDataType_t datatype, int root, loomComm_t comm,
                           loomStream_t stream);
/* In-place broadcast, as ncclBcast. */
loomResult_t loomBcast(void* buff, size_t count, loomDataType_t datatype, int root,
                       loomComm_t comm, loomStream_t stream);
loomResult_t loomReduce(const void* sendbuff, void* recvbuff, size_t count,
                        loomDataType_t datatype, loomRedOp_t op, int root, loomComm_t comm,
                        loomStream_t stream);
loomResult_t loomReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               loomDataType_t datatype, loomRedOp_t op, loomComm_t comm,
                               loomStream_t stream);
loomResult_t loomAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           loomDataType_t datatype, loomComm_t comm, loomStream_t stream);
/* Every rank sends count elements to each rank: block j of sendbuff
 * (count elements at offset j*count) goes to rank j, and block i of recvbuff
 * comes from rank i. sendbuff and recvbuff hold nranks*count elements each;
 * they may be the same buffer (in place) but must not overlap otherwise.
 * It runs as one fused group of nranks sends and nranks recvs. */
loomResult_t loomAllToAll(const void* sendbuff, void* recvbuff, size_t count,
                          loomDataType_t datatype, loomComm_t comm, loomStream_t stream);
/* Returns (blocking) or completes on the stream once every rank has called it. */
loomResult_t loomBarrier(loomComm_t comm, loomStream_t stream);

/* Point to point, as ncclSend/ncclRecv: a send of count elements to peer is
 * matched by a recv of count elements from this rank, in call order per pair.
 * Outside a group each call blocks until its data has moved; inside a group
 * all sends and recvs of a communicator progress together at GroupEnd (after
 * the group's collectives), so exchanges in both directions cannot deadlock.
 * peer may be this rank only inside a group. A recv may land where a send of
 * the same group reads (in-place exchanges): each byte is sent before it is
 * overwritten. A recv whose matching send has another size fails with
 * loomRemoteError naming the peer. */
loomResult_t loomSend(const void* sendbuff, size_t count, loomDataType_t datatype, int peer,
                      loomComm_t comm, loomStream_t stream);
loomResult_t loomRecv(void* recvbuff, size_t count, loomDataType_t datatype, int peer,
                      loomComm_t comm, loomStream_t stream);

/* Groups: calls between GroupStart and GroupEnd are validated at once but
 * started together at GroupEnd (so one thread can drive several
 * communicators); errors of the grouped work surface at GroupEnd. Groups nest. */
loomResult_t loomGroupStart(void);
loomResult_t loomGroupEnd(void);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* LOOM_LOOM_H_ */
