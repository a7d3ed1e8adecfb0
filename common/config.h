// Every knob Loom reads from the environment, declared once (config.cc) with
// its variable, default and meaning, and snapshotted into an immutable Config
// when a communicator is created. Layers receive the Config (or the parts
// they need); nothing reads the environment on its own.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

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
  std::string shmDir = "/dev/shm";     // LOOM_SHM_DIR: where shared-memory segments live
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
  bool check = false;                  // LOOM_CHECK: cross-check every collective's arguments across ranks
  int flightRecorderEntries = 64;      // LOOM_FLIGHT_RECORDER_ENTRIES: operations kept for dumps (0: none)
  std::string dumpOnSignal;            // LOOM_DUMP_ON_SIGNAL: signal that dumps the flight recorder (empty: none)
  std::string dumpDir = "/tmp";        // LOOM_DUMP_DIR: directory of flight-recorder dump files
  std::string tracePath;               // LOOM_TRACE: Chrome-trace JSON file per rank (empty: no trace)
  LogSettings log;                     // LOOM_DEBUG, LOOM_DEBUG_SUBSYS, LOOM_DEBUG_FILE

  // Reads every knob; values that do not parse keep their default and are
  // reported in `warnings` (so the caller can log them with its rank).
  static Config fromEnv(std::vector<std::string>* warnings = nullptr);
};

struct KnobDoc {
  const char* env;
  const char* defaultValue;
  const char* doc;
};
// The table behind fromEnv(), for documentation and `loomrun --help-env`.
const std::vector<KnobDoc>& configKnobs();

}  // namespace loom
