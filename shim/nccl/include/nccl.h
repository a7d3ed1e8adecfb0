/*
 * nccl.h for Loom: NCCL's API (names, types, values and struct layouts) on
 * top of Loom (Loom's libnccl.so.2), so that a program written for NCCL builds and
 * links against Loom unchanged:
 *
 *     c++ app.cc -I<loom>/shim/nccl/include -L<build>/lib/nccl-shim -lnccl
 *
 * The library is libnccl.so.2 (SONAME libnccl.so.2), so a binary built
 * against NVIDIA's NCCL also runs on Loom unchanged when Loom's library comes
 * first on LD_LIBRARY_PATH (docs/nccl.md).
 *
 * It declares the API of NCCL 2.28.9, with the same types, values, struct
 * layouts and functions; every function is exported. Those Loom has no
 * feature for return ncclInvalidUsage with a message (ncclGetLastError) that
 * says so: ncclMemAlloc/ncclMemFree, ncclCommRevoke, ncclCommShrink,
 * ncclCommWindowRegister/Deregister and ncclGroupSimulateEnd (which still
 * runs the group, as ncclGroupEnd would). ncclCommRegister accepts a buffer
 * and does nothing (Loom copies through its own buffers), and
 * ncclCommInitRankScalable uses the first of its ids.
 *
 * What differs from NCCL, all through ncclGetLastError's message:
 *  - Streams: with a usable CUDA device a call is asynchronous on its CUDA
 *    stream, as in NCCL (Loom's loomStreamFromCuda), and buffers may be
 *    device memory. Without one (Loom built without CUDA, no GPU or driver)
 *    every call blocks until done on host buffers, so stream 0 is fine.
 *  - ncclRedOpCreatePreMulSum ops scale the input on the host: they work
 *    where calls block (host buffers) and give ncclInvalidUsage on a CUDA
 *    stream (that needs a device kernel Loom does not have yet).
 *  - ncclFloat8e4m3/ncclFloat8e5m2 are rejected with ncclInvalidArgument.
 *  - ncclConfig_t fields are validated (magic, size) but only tune NCCL's GPU
 *    engine, so Loom ignores them; initialization always completes in the
 *    call (ncclSuccess, never ncclInProgress).
 *  - A Loom timeout (LOOM_TIMEOUT) comes back as ncclRemoteError.
 */
#ifndef NCCL_H_
#define NCCL_H_

/* Defined only by Loom's nccl.h: lets a build check that it did not pick up
 * the CUDA toolkit's nccl.h instead. */
#define LOOM_NCCL_SHIM 1

/* cudaStream_t: CUDA's own definition when the toolkit is on the include
 * path, else the same typedef CUDA makes, so code compiles either way. */
#if defined(__has_include)
#if __has_include(<cuda_runtime.h>)
#define LOOM_NCCL_HAVE_CUDA_RUNTIME 1
#endif
#endif
#ifdef LOOM_NCCL_HAVE_CUDA_RUNTIME
/* The same headers NCCL's nccl.h brings in (programs may rely on __half). */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#if CUDART_VERSION >= 11000
#include <cuda_bf16.h>
#endif
#if defined(__cplusplus) && CUDART_VERSION >= 11080
#include <cuda_fp8.h>
#endif
#else
typedef struct CUstream_st* cudaStream_t;
#endif

#include <limits.h>
#include <stddef.h>

#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_PATCH 9
#define NCCL_SUFFIX ""

/* NCCL's encoding: 2.8.x and older used X*1000+Y*100+Z. */
#define NCCL_VERSION(X, Y, Z) \
  (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))
#define NCCL_VERSION_CODE NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

/* Only the declarations of this header are exported from Loom's libnccl.so.2. */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

/* In C++ the enums get int as their fixed underlying type (as in loom.h):
 * same size and calling convention as NCCL's, and any int a caller casts in
 * is a value the library can reject instead of undefined behaviour. */
#ifdef __cplusplus
#define LOOM_NCCL_ENUM_BASE : int
#else
#define LOOM_NCCL_ENUM_BASE
#endif

typedef struct ncclComm* ncclComm_t;
typedef struct ncclWindow_vidmem* ncclWindow_t;
#define NCCL_COMM_NULL NULL

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum LOOM_NCCL_ENUM_BASE {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;

#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR -1
#define NCCL_UNDEF_FLOAT -1.0f

/* ncclCommWindowRegister flags and alignment. */
#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096

#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO 0x02

/* ncclCommShrink flags. */
#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01

/* ncclCommRevoke flags (must be 0). */
#define NCCL_REVOKE_DEFAULT 0x00

/* Communicator settings. Start from NCCL_CONFIG_INITIALIZER; size, magic and
 * version identify the caller's layout. Field order and types are NCCL's. */
typedef struct ncclConfig_v22800 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
  int trafficClass;
  const char* commName;
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
} ncclConfig_t;

#define LOOM_NCCL_CONFIG_MAGIC 0xcafebeef /* NCCL's value: marks an initialized config */
#define NCCL_CONFIG_INITIALIZER                                                                              \
  {                                                                                                          \
    sizeof(ncclConfig_t), LOOM_NCCL_CONFIG_MAGIC, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH),               \
        NCCL_CONFIG_UNDEF_INT /* blocking */, NCCL_CONFIG_UNDEF_INT /* cgaClusterSize */,                    \
        NCCL_CONFIG_UNDEF_INT /* minCTAs */, NCCL_CONFIG_UNDEF_INT /* maxCTAs */,                            \
        NCCL_CONFIG_UNDEF_PTR /* netName */, NCCL_CONFIG_UNDEF_INT /* splitShare */,                         \
        NCCL_CONFIG_UNDEF_INT /* trafficClass */, NCCL_CONFIG_UNDEF_PTR /* commName */,                      \
        NCCL_CONFIG_UNDEF_INT /* collnetEnable */, NCCL_CONFIG_UNDEF_INT /* CTAPolicy */,                    \
        NCCL_CONFIG_UNDEF_INT /* shrinkShare */, NCCL_CONFIG_UNDEF_INT /* nvlsCTAs */,                       \
        NCCL_CONFIG_UNDEF_INT /* nChannelsPerNetPeer */, NCCL_CONFIG_UNDEF_INT /* nvlinkCentricSched */      \
  }

/* What ncclGroupSimulateEnd reports. Start from NCCL_SIM_INFO_INITIALIZER. */
typedef struct ncclSimInfo_v22200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime;
} ncclSimInfo_t;

#define LOOM_NCCL_SIM_INFO_MAGIC 0x74685283 /* NCCL's value */
#define NCCL_SIM_INFO_INITIALIZER \
  { sizeof(ncclSimInfo_t), LOOM_NCCL_SIM_INFO_MAGIC, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), NCCL_UNDEF_FLOAT }

/* Reduction operators: the built-in ones, then handles from
 * ncclRedOpCreatePreMulSum (values from ncclNumOps up to ncclMaxRedOp). */
typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;
typedef enum LOOM_NCCL_ENUM_BASE {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4, /* sum divided by the number of ranks (integers truncate) */
  ncclNumOps = 5,
  ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

typedef enum LOOM_NCCL_ENUM_BASE {
  ncclInt8 = 0, ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2, ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6, ncclHalf = 6,
  ncclFloat32 = 7, ncclFloat = 7,
  ncclFloat64 = 8, ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10, /* not supported by Loom: ncclInvalidArgument */
  ncclFloat8e5m2 = 11, /* not supported by Loom: ncclInvalidArgument */
  ncclNumTypes = 12
} ncclDataType_t;

/* Where the scalar of ncclRedOpCreatePreMulSum lives. */
typedef enum LOOM_NCCL_ENUM_BASE {
  ncclScalarDevice = 0,       /* read each time a collective using the op runs */
  ncclScalarHostImmediate = 1 /* copied before ncclRedOpCreatePreMulSum returns */
} ncclScalarResidence_t;

/* Every function has a p-prefixed twin (pncclAllReduce, ...) for profilers
 * that interpose the plain names, as in NCCL. */
/* Not supported by Loom (ncclInvalidUsage): allocate with cudaMalloc. */
ncclResult_t ncclMemAlloc(void** ptr, size_t size);
ncclResult_t pncclMemAlloc(void** ptr, size_t size);
ncclResult_t ncclMemFree(void* ptr);
ncclResult_t pncclMemFree(void* ptr);

ncclResult_t ncclGetVersion(int* version);
ncclResult_t pncclGetVersion(int* version);
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId);
ncclResult_t pncclGetUniqueId(ncclUniqueId* uniqueId);

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config);
ncclResult_t pncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                     ncclConfig_t* config);
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
/* ndev ranks in this process; devlist (may be NULL: 0..ndev-1) only sets
 * what ncclCommCuDevice reports. */
ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);
ncclResult_t pncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);
/* Work issued so far completes before ncclCommDestroy frees the comm. */
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t pncclCommFinalize(ncclComm_t comm);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t pncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t pncclCommAbort(ncclComm_t comm);
/* Not supported by Loom (ncclInvalidUsage): ncclCommAbort stops a comm. */
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags);
ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags);
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config);
ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config);
/* Not supported by Loom (ncclInvalidUsage): ncclCommSplit, called by every
 * rank, makes the smaller communicator. */
ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                            ncclConfig_t* config, int shrinkFlags);
ncclResult_t pncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                             ncclConfig_t* config, int shrinkFlags);
/* ncclCommInitRankConfig with the first of the nId ids (Loom's bootstrap
 * root serves every rank). */
ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                                      ncclConfig_t* config);
ncclResult_t pncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                                       ncclConfig_t* config);

const char* ncclGetErrorString(ncclResult_t result);
const char* pncclGetErrorString(ncclResult_t result);
/* The message of this thread's last failed call (it names the argument and
 * the rank); comm is used when this thread has seen no failure yet. */
const char* ncclGetLastError(ncclComm_t comm);
const char* pncclGetLastError(ncclComm_t comm);

/* Deprecated in NCCL. Loom reads its log settings once per process, so this
 * does nothing (and says so through ncclGetLastError). */
__attribute__((deprecated("ncclResetDebugInit is not supported as part of the NCCL API and will be removed in the future")))
void ncclResetDebugInit(void);
__attribute__((deprecated("pncclResetDebugInit is not supported as part of the NCCL API and will be removed in the future")))
void pncclResetDebugInit(void);

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t pncclCommCount(const ncclComm_t comm, int* count);
/* The CUDA device current when the comm was created (0 without CUDA). */
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device);
ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* device);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);
ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* rank);

/* Accepted and ignored: Loom moves data through its own buffers, so a
 * registered buffer is used like any other. *handle is a token for
 * ncclCommDeregister. */
ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);
ncclResult_t pncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);
ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle);
ncclResult_t pncclCommDeregister(const ncclComm_t comm, void* handle);
/* Not supported by Loom (ncclInvalidUsage): no symmetric-memory windows. */
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags);
ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags);
ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);
ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);

/* An op that multiplies each rank's input by that rank's *scalar (of type
 * datatype) and sums; valid with comm and datatype only. */
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                       ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);
ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);

/* Collectives: NCCL's argument order and in-place conventions (see loom.h). */
ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                         ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);
/* In-place broadcast (deprecated in NCCL, kept for old programs). */
ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream);
ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                        cudaStream_t stream);
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                            ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                            ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                                ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                            ncclComm_t comm, cudaStream_t stream);

/* Block j of sendbuff (count elements) goes to rank j; block i of recvbuff
 * comes from rank i. */
ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                          ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream);
/* count elements of every rank land at recvbuff + i*count on root (in place
 * when sendbuff == recvbuff + root*count). */
ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream);
/* Block i of root's sendbuff (count elements) goes to rank i (in place when
 * recvbuff == sendbuff + root*count). */
ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                          ncclComm_t comm, cudaStream_t stream);

/* Point to point: pair them inside ncclGroupStart/End to exchange safely. */
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream);
ncclResult_t pncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream);
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream);
ncclResult_t pncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream);

ncclResult_t ncclGroupStart(void);
ncclResult_t pncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
ncclResult_t pncclGroupEnd(void);
/* Loom has no cost simulator: the group runs as with ncclGroupEnd,
 * simInfo->estimatedTime stays NCCL_UNDEF_FLOAT and the result is
 * ncclInvalidUsage (unless the group itself failed). */
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo);
ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t* simInfo);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* NCCL_H_ */
