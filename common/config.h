// Every variable Loom reads from the environment, declared once (the table in
// config.cc: variable, section, default, meaning, the layer that uses it) and
// snapshotted into an immutable Config when a communicator is created. Layers
// receive the Config (or the parts they need). What must be read before any
// communicator exists (the log settings, the kernels' ISA, the bootstrap and
// launcher variables) goes through readKnob(), which serves only declared
// names; common/config.cc is the one file that calls getenv for Loom (a test,
// check_env_reads.cmake, keeps it so). `loomrun --help-env` prints the table,
// and docs/environment.md is its Markdown form.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "common/config_files.h"
#include "common/log.h"

namespace loom {

struct Config {
  double timeoutSeconds = 300.0;       // LOOM_TIMEOUT: deadline of every blocking wait
  size_t chunkBytes = 256 * 1024;      // LOOM_CHUNK_SIZE: bytes per pipelined chunk (one FIFO slot)
  bool chunkBytesSet = false;          // LOOM_CHUNK_SIZE was given (else a backend may prefer another, e.g. TCP)
  int fifoSlots = 4;                   // LOOM_SHM_SLOTS: chunks in flight per peer connection
  int spinMicros = 5;                  // LOOM_SPIN_US: busy polling before a wait starts yielding
  bool spinMicrosSet = false;          // LOOM_SPIN_US was given (else oversubscribed hosts spin 0)
  int yieldMicros = 200;               // LOOM_YIELD_US: sched_yield polling before a wait sleeps
  bool placeRanks = true;              // LOOM_PLACE_RANKS: an unbound rank starts on a core of its own
  std::string shmDir = "/dev/shm";     // LOOM_SHM_DIR: where shared-memory segments live
  bool shmSingleCopy = true;           // LOOM_SHM_SINGLE_COPY: copy straight between ranks' buffers where the kernel allows
  std::string transport;               // LOOM_TRANSPORT: force one transport for every peer (shm, ib, ucx, tcp; empty: per-peer choice)
  std::vector<std::string> disabledTransports;  // LOOM_SHM_DISABLE, LOOM_IB_DISABLE, LOOM_UCX_DISABLE, LOOM_TCP_DISABLE =1 (lower-case names)
  int tcpTestDelayMicros = 0;          // LOOM_TCP_TEST_DELAY_US: test only, holds each TCP chunk this long before sending (emulated latency)
  int socketsPerPeer = 2;              // LOOM_NSOCKS: TCP sockets per peer that chunks are striped over
  std::string socketIfname;            // LOOM_SOCKET_IFNAME: interfaces TCP may listen on (NCCL_SOCKET_IFNAME syntax)
  std::string algo;                    // LOOM_ALGO: algorithms the tuner may pick (empty: all)
  std::string proto;                   // LOOM_PROTO: protocols the tuner may pick (empty: all)
  std::string tuningFile;              // LOOM_TUNING_FILE: cost-model parameters (empty: built-in)
  bool deterministic = false;          // LOOM_DETERMINISTIC: run-to-run identical float reductions
  bool onlineTuning = true;            // LOOM_TUNER_ONLINE: time close candidates of repeated calls, keep the fastest
  int asyncInlineMicros = 20;          // LOOM_ASYNC_INLINE_US: how long a small call on an idle stream polls for its peers to run it inline (0: never inline)
  bool asyncInlineMicrosSet = false;  // LOOM_ASYNC_INLINE_US was given (else oversubscribed hosts use 0)
  bool check = false;                  // LOOM_CHECK: cross-check every collective's arguments across ranks
  int flightRecorderEntries = 64;      // LOOM_FLIGHT_RECORDER_ENTRIES: operations kept for dumps (0: none)
  std::string dumpOnSignal;            // LOOM_DUMP_ON_SIGNAL: signal that dumps the flight recorder (empty: none)
  std::string dumpDir = "/tmp";        // LOOM_DUMP_DIR: directory of flight-recorder dump files
  std::string tracePath;               // LOOM_TRACE: Chrome-trace JSON file per rank (empty: no trace)
  LogSettings log;                     // LOOM_DEBUG, LOOM_DEBUG_SUBSYS, LOOM_DEBUG_FILE
  std::string hostId;                  // LOOM_HOST_ID: this rank's host identity (empty: host name and boot id)
  int localCores = 0;                  // LOOM_LOCAL_CORES: cores this host's ranks share, set by loomrun --bind (0: unset)
  // LOOM_CUDA_P2P, LOOM_NET_GDR, LOOM_CUDA_COPY_CHUNK as given (empty: unset).
  // src/device parses them (DeviceSettings::fromConfig) and warns about a bad
  // value only where a device is in use, so they stay text here.
  std::string cudaEngine;
  std::string cudaP2P;
  std::string netGdr;
  std::string cudaCopyChunk;
  std::string cudaChannels;  // LOOM_CUDA_CHANNELS

  // Reads every knob; values that do not parse keep their default and are
  // reported in `warnings` (so the caller can log them with its rank).
  static Config fromEnv(std::vector<std::string>* warnings = nullptr);
};

// The chunk sizes LOOM_CHUNK_SIZE and loomConfig_t::chunkBytes accept: whole
// cache lines (64 B), from a page (4 KiB) to 64 MiB.
constexpr size_t kMinChunkBytes = 4096;
constexpr size_t kMaxChunkBytes = size_t{64} << 20;
constexpr bool isValidChunkBytes(size_t bytes) {
  return bytes >= kMinChunkBytes && bytes <= kMaxChunkBytes && bytes % 64 == 0;
}

struct KnobDoc {
  const char* env;           // the variable
  const char* section;       // heading it is listed under (the table keeps sections together)
  const char* defaultValue;  // as the user sees it; "" when unset means "off" or "Loom chooses"
  const char* doc;           // meaning, accepted values and range
  const char* usedBy;        // the layer that acts on it; "set by loomrun" for launcher-to-rank variables
};
// The table behind fromEnv() and readKnob(), for documentation and
// `loomrun --help-env`; in the order the documentation lists it.
const std::vector<KnobDoc>& configKnobs();

// The raw value of a variable declared in configKnobs() (nullptr when unset),
// for readers that run before any communicator (and its Config) exists.
// Asking for an undeclared name is a programming error: it aborts, naming
// the variable, so a new knob cannot bypass the table.
// Sources, first match wins: the environment, the user's settings file, the
// system's (common/config_files.h): ~/.loom.conf and /etc/loom.conf for
// LOOM_* names, NCCL_CONF_FILE (else ~/.nccl.conf) and /etc/nccl.conf for
// NCCL_* names. Other names (RANK, MASTER_ADDR, ...) and the variables that
// locate the files come from the environment only.
const char* readKnob(const char* env);

// The value of a declared variable in one source only (nullptr when that
// source does not set it): for the NCCL shim, which ranks an NCCL_* setting
// against the LOOM_* one of the same source.
const char* readKnobFrom(const char* env, SettingSource source);

// The files are read once per process, at the first readKnob. Tests that
// write them (or change HOME, LOOM_SYSTEM_CONF_DIR, NCCL_CONF_FILE) re-read
// them with this; values returned before stay valid.
void reloadSettingsFiles();

// Every name the settings files set (both families, all files), so the NCCL
// shim can warn about NCCL_* names it has no meaning for.
std::vector<std::string> namesInSettingsFiles();

}  // namespace loom
