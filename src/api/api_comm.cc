// C ABI: versions, errors, unique ids, communicator and stream lifetime.
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "src/api/cuda_streams.h"
#include "src/api/group.h"
#include "src/api/handles.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/launch_env.h"
#include "bootstrap/rendezvous_file.h"
#include "common/config.h"

using loom::Code;
using loom::Status;
using loom::api::fail;

namespace {

// Runs `body`, turning escaped exceptions into loomInternalError.
template <class Body>
loomResult_t guarded(loomComm_t comm, Body&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    return fail(comm, loom::makeError(Code::kInternalError, "unexpected exception: %s", e.what()));
  }
}

double processTimeout() { return loom::Config::fromEnv().timeoutSeconds; }

// getaddrinfo to a numeric address, so hostnames work in MASTER_ADDR.
loom::Result<std::string> numericHost(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || !res)
    return loom::makeError(Code::kInvalidArgument, "cannot resolve address '%s': %s", host.c_str(),
                           gai_strerror(rc));
  char buf[NI_MAXHOST] = {0};
  rc = getnameinfo(res->ai_addr, res->ai_addrlen, buf, sizeof(buf), nullptr, 0, NI_NUMERICHOST);
  freeaddrinfo(res);
  if (rc != 0) return loom::makeError(Code::kSystemError, "getnameinfo: %s", gai_strerror(rc));
  return std::string(buf);
}

// The launcher's variables, through the declared table (common/config.cc).
const char* launcherVariable(const char* name) { return loom::readKnob(name); }

// loomrun's rendezvous (or one a user names): MASTER_ADDR:MASTER_PORT and
// LOOM_JOB_SECRET; rank 0 starts the root there.
loom::Result<loom::bootstrap::UniqueId> namedRendezvous(const loom::bootstrap::LaunchEnv& place) {
  auto host = numericHost(place.masterAddr.empty() ? "127.0.0.1" : place.masterAddr);
  if (!host.isOk()) return host.status().withContext("MASTER_ADDR: ");
  auto secret = loom::bootstrap::parseSecret(place.secretHex);
  if (!secret.isOk()) return secret.status().withContext("LOOM_JOB_SECRET: ");
  loom::bootstrap::UniqueId id;
  id.rootHost = host.value();
  id.rootPort = static_cast<uint16_t>(place.masterPort);
  id.secret = secret.value();
  if (place.rank == 0) {
    auto started = loom::bootstrap::startRoot(id.rootHost, id.rootPort, id.secret, processTimeout(),
                                              loom::Logger::process());
    if (!started.isOk()) return started.status();
  }
  return id;
}

// Launchers that name no Loom rendezvous (torchrun, whose store holds
// MASTER_PORT; srun; mpirun): rank 0 starts the root on a free port with a
// fresh secret and publishes both in a file only this user can read
// (bootstrap/rendezvous_file.h); the other ranks read it.
loom::Result<loom::bootstrap::UniqueId> fileRendezvous(const loom::bootstrap::LaunchEnv& place) {
  const char* runtimeDir = loom::readKnob("XDG_RUNTIME_DIR");
  const char* home = loom::readKnob("HOME");
  auto path = loom::bootstrap::rendezvousFilePath(place, runtimeDir ? runtimeDir : "", home ? home : "", ::getuid(),
                                                  ::getppid());
  if (!path.isOk()) return path.status();
  if (place.rank != 0) return loom::bootstrap::awaitRendezvous(path.value(), processTimeout());
  // One host: loopback. Several: LOOM_BOOTSTRAP_ADDR, else MASTER_ADDR,
  // else the first interface that is up (startRoot's choice for "").
  std::string host = "127.0.0.1";
  if (!place.singleHost()) {
    const char* addr = loom::readKnob("LOOM_BOOTSTRAP_ADDR");
    if (!addr || !*addr) addr = place.masterAddr.empty() ? nullptr : place.masterAddr.c_str();
    host.clear();
    if (addr) {
      auto numeric = numericHost(addr);
      if (!numeric.isOk()) return numeric.status();
      host = numeric.value();
    }
  }
  auto id = loom::bootstrap::startRoot(host, 0, loom::bootstrap::randomSecret(), processTimeout(),
                                       loom::Logger::process());
  if (!id.isOk()) return id.status();
  Status published = loom::bootstrap::publishRendezvous(path.value(), id.value());
  if (!published.isOk()) return published;
  return id;
}

}  // namespace

extern "C" {

loomResult_t loomGetVersion(int* version) {
  if (!version) return fail(nullptr, loom::makeError(Code::kInvalidArgument, "loomGetVersion: version is NULL"));
  *version = LOOM_VERSION_CODE;
  return loomSuccess;
}

const char* loomGetErrorString(loomResult_t result) {
  if (result < 0 || result >= loomNumResults) return "unknown result code";
  return loom::codeName(static_cast<Code>(result));
}

const char* loomGetLastError(loomComm_t comm) {
  thread_local std::string copy;
  if (loom::api::CommRef ref{comm, "loomGetLastError"}) {
    copy = ref->impl->lastError();
    return copy.c_str();
  }
  return loom::api::lastErrorOfThread();
}

loomResult_t loomGetUniqueId(loomUniqueId* uniqueId) {
  return guarded(nullptr, [&]() -> loomResult_t {
    if (!uniqueId) return fail(nullptr, loom::makeError(Code::kInvalidArgument, "loomGetUniqueId: uniqueId is NULL"));
    // Loopback unless told otherwise: a job that spans hosts names the root's
    // address (LOOM_BOOTSTRAP_ADDR, or MASTER_ADDR through loomGetUniqueIdFromEnv).
    std::string host = "127.0.0.1";
    if (const char* addr = loom::readKnob("LOOM_BOOTSTRAP_ADDR"); addr && *addr) {
      auto numeric = numericHost(addr);
      if (!numeric.isOk()) return fail(nullptr, numeric.status().withContext("LOOM_BOOTSTRAP_ADDR: "));
      host = numeric.value();
    }
    auto id = loom::bootstrap::startRoot(host, 0, loom::bootstrap::randomSecret(), processTimeout(),
                                         loom::Logger::process());
    if (!id.isOk()) return fail(nullptr, id.status());
    std::memset(uniqueId->internal, 0, sizeof(uniqueId->internal));
    id.value().serialize(uniqueId->internal);
    return loomSuccess;
  });
}

loomResult_t loomGetUniqueIdFromEnv(loomUniqueId* uniqueId, int* rank, int* nranks) {
  return guarded(nullptr, [&]() -> loomResult_t {
    if (!uniqueId)
      return fail(nullptr, loom::makeError(Code::kInvalidArgument, "loomGetUniqueIdFromEnv: uniqueId is NULL"));
    auto place = loom::bootstrap::readLaunchEnv(launcherVariable);
    if (!place.isOk()) return fail(nullptr, place.status());
    if (place.value().launcher == loom::bootstrap::Launcher::kNone)
      return fail(nullptr, loom::makeError(Code::kInvalidArgument,
                                           "loomGetUniqueIdFromEnv: no launcher's variables are set (RANK and "
                                           "WORLD_SIZE, OMPI_COMM_WORLD_*, PMI_*, PMIX_RANK or SLURM_*): launch with "
                                           "loomrun, torchrun, mpirun or srun (docs/launching.md)"));
    auto id = place.value().namesRendezvous() ? namedRendezvous(place.value()) : fileRendezvous(place.value());
    if (!id.isOk()) return fail(nullptr, id.status());
    std::memset(uniqueId->internal, 0, sizeof(uniqueId->internal));
    id.value().serialize(uniqueId->internal);
    if (rank) *rank = place.value().rank;
    if (nranks) *nranks = place.value().size;
    return loomSuccess;
  });
}

loomResult_t loomGetLaunchEnv(int* rank, int* nranks, int* localRank, const char** launcher) {
  return guarded(nullptr, [&]() -> loomResult_t {
    auto place = loom::bootstrap::readLaunchEnv(launcherVariable);
    if (!place.isOk()) return fail(nullptr, place.status());
    const bool none = place.value().launcher == loom::bootstrap::Launcher::kNone;
    if (rank) *rank = place.value().rank;
    if (nranks) *nranks = none ? 0 : place.value().size;
    if (localRank) *localRank = place.value().localRank;
    if (launcher) *launcher = none ? "" : loom::bootstrap::launcherName(place.value().launcher);
    return loomSuccess;
  });
}

static loomResult_t initRankNow(loomComm_t handle, int nranks, loomUniqueId commId, int rank,
                                loom::Communicator::Overrides overrides) {
  auto id = loom::bootstrap::UniqueId::parse(commId.internal);
  if (!id.isOk()) return fail(nullptr, id.status().withContext("loomCommInitRank: commId: "));
  auto comm = loom::Communicator::create(id.value(), nranks, rank, overrides);
  if (!comm.isOk()) return fail(nullptr, comm.status());
  handle->impl = std::move(comm).value();
  loom::api::registerComm(handle);
  return loomSuccess;
}

// The fields of `config` that its caller's header has (`size` covers them:
// an older, smaller struct ends before later fields), checked.
static loom::Result<loom::Communicator::Overrides> overridesOf(const loomConfig_t& config, int rank) {
  auto covers = [&](size_t offset, size_t bytes) { return config.size >= offset + bytes; };
  if (!covers(offsetof(loomConfig_t, timeoutSeconds), sizeof(double)) || config.timeoutSeconds < 0)
    return loom::makeError(Code::kInvalidArgument,
                           "loomCommInitRankConfig on rank %d: config->size %zu or config->timeoutSeconds %g is "
                           "invalid (use LOOM_CONFIG_INITIALIZER)",
                           rank, config.size, config.timeoutSeconds);
  loom::Communicator::Overrides o;
  o.timeoutSeconds = config.timeoutSeconds;
  if (covers(offsetof(loomConfig_t, chunkBytes), sizeof(size_t))) {
    if (config.chunkBytes != 0 && !loom::isValidChunkBytes(config.chunkBytes))
      return loom::makeError(Code::kInvalidArgument,
                             "loomCommInitRankConfig on rank %d: config->chunkBytes %zu is invalid (0 for the "
                             "default, or a multiple of 64 from %zu to %zu)",
                             rank, config.chunkBytes, loom::kMinChunkBytes, loom::kMaxChunkBytes);
    o.chunkBytes = config.chunkBytes;
  }
  return o;
}

loomResult_t loomCommInitRank(loomComm_t* comm, int nranks, loomUniqueId commId, int rank) {
  return loomCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

loomResult_t loomCommInitRankConfig(loomComm_t* comm, int nranks, loomUniqueId commId, int rank,
                                    const loomConfig_t* config) {
  return guarded(nullptr, [&]() -> loomResult_t {
    if (!comm) return fail(nullptr, loom::makeError(Code::kInvalidArgument, "loomCommInitRank: comm is NULL"));
    *comm = nullptr;
    loom::Communicator::Overrides overrides;
    if (config) {
      auto read = overridesOf(*config, rank);
      if (!read.isOk()) return fail(nullptr, read.status());
      overrides = read.value();
    }
    if (nranks < 1)
      return fail(nullptr, loom::makeError(Code::kInvalidArgument, "loomCommInitRank: nranks %d < 1", nranks));
    if (rank < 0 || rank >= nranks)
      return fail(nullptr, loom::makeError(Code::kInvalidArgument, "loomCommInitRank: rank %d out of range [0, %d)",
                                           rank, nranks));
    auto* handle = new loomComm;
    if (loom::api::inGroup()) {
      // Deferred to loomGroupEnd, where all deferred inits run concurrently:
      // this is how one thread creates several ranks of one clique.
      *comm = handle;
      loom::api::deferInit([=] { return initRankNow(handle, nranks, commId, rank, overrides); }, comm, handle);
      return loomSuccess;
    }
    loomResult_t r = initRankNow(handle, nranks, commId, rank, overrides);
    if (r != loomSuccess) {
      delete handle;
      return r;
    }
    *comm = handle;
    return loomSuccess;
  });
}

loomResult_t loomCommInitAll(loomComm_t* comms, int ndev, const int* devlist) {
  return guarded(nullptr, [&]() -> loomResult_t {
    if (!comms) return fail(nullptr, loom::makeError(Code::kInvalidArgument, "loomCommInitAll: comms is NULL"));
    if (ndev < 1) return fail(nullptr, loom::makeError(Code::kInvalidArgument, "loomCommInitAll: ndev %d < 1", ndev));
    loomUniqueId id;
    loomResult_t r = loomGetUniqueId(&id);
    if (r != loomSuccess) return r;
    std::vector<loomResult_t> results(static_cast<size_t>(ndev), loomSuccess);
    std::vector<std::string> errors(static_cast<size_t>(ndev));
    std::vector<std::thread> threads;
    for (int i = 0; i < ndev; ++i)
      threads.emplace_back([&, i] {
        results[i] = loomCommInitRank(&comms[i], ndev, id, i);
        if (results[i] != loomSuccess) errors[i] = loom::api::lastErrorOfThread();
      });
    for (auto& t : threads) t.join();
    for (int i = 0; i < ndev; ++i) {
      if (results[i] == loomSuccess) continue;
      for (int j = 0; j < ndev; ++j)
        if (results[j] == loomSuccess) loomCommAbort(comms[j]);
      for (int j = 0; j < ndev; ++j) comms[j] = nullptr;
      return fail(nullptr, {static_cast<Code>(results[i]), "loomCommInitAll: " + errors[i]});
    }
    return loomSuccess;
  });
}

loomResult_t loomCommDestroy(loomComm_t comm) {
  return guarded(nullptr, [&]() -> loomResult_t {
    // After loomCommAbort the handle is retired (maybe already freed): there
    // is nothing left to wait for or free, so destroy just forgets it.
    if (comm && loom::api::forgetAborted(comm)) return loomSuccess;
    loom::api::CommRef ref{comm, "loomCommDestroy"};
    if (!ref) return fail(nullptr, ref.status());
    if (loom::api::hasDeferredWork(comm))
      return fail(ref, loom::makeError(Code::kInvalidUsage,
                                       "loomCommDestroy: rank %d has collectives pending in an open group",
                                       ref->impl->rank()));
    // Queued work first, while the handle is still live: a loomCommAbort from
    // another thread can then still stop work that waits for a dead peer.
    ref->impl->flush();
    if (!loom::api::retireComm(comm, loom::api::Retire::kDestroy)) {
      // Aborted (or destroyed) by another thread while we flushed.
      if (loom::api::forgetAborted(comm)) return loomSuccess;
      return fail(nullptr, loom::makeError(Code::kInvalidUsage,
                                           "loomCommDestroy: comm %p was destroyed by another thread meanwhile",
                                           static_cast<void*>(comm)));
    }
    loom::api::releaseComm(comm);  // the owner's reference; ours frees it (or the last call in progress does)
    return loomSuccess;
  });
}

loomResult_t loomCommAbort(loomComm_t comm) {
  return guarded(nullptr, [&]() -> loomResult_t {
    // Aborting twice is harmless: the first abort already did everything.
    if (comm && loom::api::wasAborted(comm)) return loomSuccess;
    loom::api::CommRef ref{comm, "loomCommAbort"};
    if (!ref) return fail(nullptr, ref.status());
    if (!loom::api::retireComm(comm, loom::api::Retire::kAbort)) {
      if (loom::api::wasAborted(comm)) return loomSuccess;  // a concurrent abort won
      return fail(nullptr, loom::makeError(Code::kInvalidUsage,
                                           "loomCommAbort: comm %p was destroyed by another thread meanwhile",
                                           static_cast<void*>(comm)));
    }
    // Calls in progress on other threads hold references: they see the abort
    // flag in their next wait round (at most ~20 ms), return an error, and the
    // last of them frees the communicator. With none, ours frees it here.
    ref->aborted.store(true, std::memory_order_release);
    ref->impl->abort();
    loom::api::releaseComm(comm);  // the owner's reference
    return loomSuccess;
  });
}

loomResult_t loomCommGetAsyncError(loomComm_t comm, loomResult_t* asyncError) {
  loom::api::CommRef ref{comm, "loomCommGetAsyncError"};
  if (!ref) return fail(nullptr, ref.status());
  if (!asyncError)
    return fail(ref, loom::makeError(Code::kInvalidArgument, "loomCommGetAsyncError: asyncError is NULL"));
  *asyncError = loom::api::toResult(ref->impl->asyncError().code());
  return loomSuccess;
}

loomResult_t loomCommCount(const loomComm_t comm, int* count) {
  loom::api::CommRef ref{comm, "loomCommCount"};
  if (!ref) return fail(nullptr, ref.status());
  if (!count) return fail(ref, loom::makeError(Code::kInvalidArgument, "loomCommCount: count is NULL"));
  *count = ref->impl->nranks();
  return loomSuccess;
}

loomResult_t loomCommUserRank(const loomComm_t comm, int* rank) {
  loom::api::CommRef ref{comm, "loomCommUserRank"};
  if (!ref) return fail(nullptr, ref.status());
  if (!rank) return fail(ref, loom::makeError(Code::kInvalidArgument, "loomCommUserRank: rank is NULL"));
  *rank = ref->impl->rank();
  return loomSuccess;
}

loomResult_t loomStreamCreate(loomStream_t* stream) {
  if (!stream) return fail(nullptr, loom::makeError(Code::kInvalidArgument, "loomStreamCreate: stream is NULL"));
  *stream = new loomStream;
  loom::api::registerStream(*stream);
  return loomSuccess;
}

static Status checkStream(loomStream_t stream, const char* call) {
  LOOM_ENFORCE(stream != nullptr, Code::kInvalidArgument, "%s: stream is NULL", call);
  LOOM_ENFORCE(loom::api::isLiveStream(stream), Code::kInvalidArgument, "%s: stream %p is not a live stream",
               call, static_cast<void*>(stream));
  return Status::ok();
}

loomResult_t loomStreamSynchronize(loomStream_t stream) {
  Status s = checkStream(stream, "loomStreamSynchronize");
  if (!s.isOk()) return fail(nullptr, s);
  s = stream->impl.synchronize();
  return s.isOk() ? loomSuccess : fail(nullptr, s);
}

loomResult_t loomStreamQuery(loomStream_t stream) {
  Status s = checkStream(stream, "loomStreamQuery");
  if (!s.isOk()) return fail(nullptr, s);
  s = stream->impl.query();
  if (s.code() == Code::kInProgress) return loomInProgress;
  return s.isOk() ? loomSuccess : fail(nullptr, s);
}

loomResult_t loomStreamDestroy(loomStream_t stream) {
  Status s = checkStream(stream, "loomStreamDestroy");
  if (!s.isOk()) return fail(nullptr, s);
  (void)stream->impl.synchronize();
  loom::api::forgetCudaStream(stream);
  loom::api::unregisterStream(stream);
  delete stream;
  return loomSuccess;
}

loomResult_t loomGroupStart(void) { return loom::api::groupStart(); }
loomResult_t loomGroupEnd(void) { return loom::api::groupEnd(); }

}  // extern "C"
