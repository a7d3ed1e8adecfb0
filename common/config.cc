#include "common/config.h"

#include <cerrno>
#include <cstdlib>

#include "common/format.h"

namespace loom {
namespace {

// Parses a size with an optional K/M/G suffix (powers of 1024).
bool parseBytes(const char* text, size_t* out) {
  // strtoull would accept "-1" (as 2^64-1) and leading blanks: digits only.
  if (*text < '0' || *text > '9') return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text, &end, 10);
  if (errno != 0 || end == text) return false;
  unsigned long long mult = 1;
  if (*end == 'K' || *end == 'k') mult = 1ull << 10, ++end;
  else if (*end == 'M' || *end == 'm') mult = 1ull << 20, ++end;
  else if (*end == 'G' || *end == 'g') mult = 1ull << 30, ++end;
  if (*end != '\0') return false;
  // A product that wraps could land in range ("17592186044417M" is 1M mod 2^64).
  if (v > ~0ull / mult) return false;
  *out = static_cast<size_t>(v * mult);
  return true;
}

bool parseInt(const char* text, long lo, long hi, int* out) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
}

}  // namespace

const std::vector<KnobDoc>& configKnobs() {
  static const std::vector<KnobDoc> knobs = {
      {"LOOM_TIMEOUT", "300", "seconds any blocking wait may last before it fails with loomTimeout"},
      {"LOOM_CHUNK_SIZE", "256K", "bytes per pipelined chunk (one FIFO slot); K/M suffixes; multiple of 64, 4K..64M; unset: 2M where only TCP serves pairs"},
      {"LOOM_SHM_SLOTS", "4", "chunks in flight per shared-memory connection (2..64)"},
      {"LOOM_SPIN_US", "5 (0 when a host runs more ranks than it has cores)", "microseconds a wait busy-polls before it starts to yield the core"},
      {"LOOM_YIELD_US", "200", "microseconds a wait polls with sched_yield before it sleeps on a futex"},
      {"LOOM_SHM_DIR", "/dev/shm", "directory of shared-memory segments"},
      {"LOOM_TRANSPORT", "", "force one transport for every peer: shm, ib, ucx, tcp (e.g. tcp to test TCP on one host); empty: shared memory within a host; across hosts ib if a device exists, else ucx if built in, else tcp"},
      {"LOOM_SHM_DISABLE", "0", "1: never use shared memory (peers on this host go over the network transports)"},
      {"LOOM_IB_DISABLE", "0", "1: never use the verbs (InfiniBand/RoCE) transport"},
      {"LOOM_UCX_DISABLE", "0", "1: never use the UCX transport"},
      {"LOOM_TCP_DISABLE", "0", "1: never use the TCP transport"},
      {"LOOM_TCP_TEST_DELAY_US", "0", "tests and benchmarks only: the TCP transport holds each chunk this many microseconds after commit before sending it (emulated link latency; 0..1000000)"},
      {"LOOM_NSOCKS", "2", "TCP sockets per peer that chunks are striped over (1..16)"},
      {"LOOM_SOCKET_IFNAME", "", "interfaces TCP listens on, as NCCL_SOCKET_IFNAME: comma list of name prefixes, ^ excludes, = exact names (eth0, ^docker,lo, =eth0); empty: first interface up that is not docker* or lo, else lo"},
      {"LOOM_ALGO", "", "algorithms the tuner may pick: comma list (ring, rd, tree, hd, oneshot, chain, deterministic), ^ excludes, per collective as allreduce:tree,ring;broadcast:chain; case-insensitive; empty lets Loom choose"},
      {"LOOM_PROTO", "", "protocols the tuner may pick: simple, ll; same syntax as LOOM_ALGO; empty lets Loom choose"},
      {"LOOM_TUNING_FILE", "", "text file of cost-model parameters (alpha, bandwidth or measured points per collective, algorithm, protocol, nranks; format in src/tuner/tuning_table.h; written by perf/tune.sh) read after the built-in defaults"},
      {"LOOM_DETERMINISTIC", "0", "1: all-reduce, reduce and reduce-scatter of floating-point data use the deterministic algorithm (identical results run to run), whatever LOOM_ALGO says"},
      {"LOOM_TUNER_ONLINE", "1", "1: a call repeated with the same collective, count, type, op and root times the algorithms the cost model predicts within 1.5x of its pick (a few calls each, all ranks agreeing on the fastest by one small all-reduce) and keeps the fastest, re-checking now and then; 0: the cost model's pick only. Off whenever LOOM_ALGO or LOOM_PROTO is set; rank 0's setting applies to all"},
      {"LOOM_CHECK", "0", "1: before moving data, every collective exchanges (sequence number, type, count, dtype, op, root) among all ranks and fails on every rank, naming each rank's call, if they differ; rank 0's setting applies to all"},
      {"LOOM_FLIGHT_RECORDER_ENTRIES", "64", "operations each communicator keeps (state, progress, timestamps) for the dump on a timeout, loomCommAbort or LOOM_DUMP_ON_SIGNAL; 0 keeps none (0..1000000)"},
      {"LOOM_DUMP_ON_SIGNAL", "", "signal (SIGUSR1, USR2, or a number) that makes every communicator dump its flight recorder to the log and LOOM_DUMP_DIR"},
      {"LOOM_DUMP_DIR", "/tmp", "directory of flight-recorder dumps: loom-flight-<host>-<pid>-rank<R>.txt"},
      {"LOOM_TRACE", "", "Chrome-trace JSON timeline of operations and their phases, one file per rank (%r: rank; else .rank<N> is inserted before the extension)"},
      {"LOOM_KERNEL_ISA", "best", "cap the reduction kernels' instruction set (portable, avx2, avx512); read once per process since it describes the CPU"},
      {"LOOM_BOOTSTRAP_ADDR", "127.0.0.1", "address the bootstrap root started by loomGetUniqueId listens on"},
      {"LOOM_DEBUG", "WARN", "log level: NONE, VERSION, WARN, INFO, TRACE"},
      {"LOOM_DEBUG_SUBSYS", "ALL", "comma list of INIT,BOOTSTRAP,TRANSPORT,ALGO,COLL,KERNEL,ENV,PROGRESS,TUNER; ^ excludes"},
      {"LOOM_DEBUG_FILE", "", "log file instead of stderr; %h host, %p pid"},
  };
  return knobs;
}

Config Config::fromEnv(std::vector<std::string>* warnings) {
  Config c;
  auto warn = [&](const char* name, const char* value, const char* why) {
    if (warnings) warnings->push_back(strprintf("ignoring %s=%s: %s", name, value, why));
  };
  if (const char* v = std::getenv("LOOM_TIMEOUT"); v && *v) {
    char* end = nullptr;
    double t = std::strtod(v, &end);
    if (end == v || *end != '\0' || !(t > 0)) warn("LOOM_TIMEOUT", v, "expected a positive number of seconds");
    else c.timeoutSeconds = t;
  }
  if (const char* v = std::getenv("LOOM_CHUNK_SIZE"); v && *v) {
    size_t b = 0;
    if (!parseBytes(v, &b) || b < 4096 || b > (64u << 20) || b % 64 != 0)
      warn("LOOM_CHUNK_SIZE", v, "expected a multiple of 64 between 4K and 64M");
    else {
      c.chunkBytes = b;
      c.chunkBytesSet = true;
    }
  }
  if (const char* v = std::getenv("LOOM_SHM_SLOTS"); v && *v)
    if (!parseInt(v, 2, 64, &c.fifoSlots)) warn("LOOM_SHM_SLOTS", v, "expected an integer in [2, 64]");
  if (const char* v = std::getenv("LOOM_SPIN_US"); v && *v) {
    if (!parseInt(v, 0, 10000000, &c.spinMicros)) warn("LOOM_SPIN_US", v, "expected microseconds in [0, 1e7]");
    else c.spinMicrosSet = true;
  }
  if (const char* v = std::getenv("LOOM_YIELD_US"); v && *v)
    if (!parseInt(v, 0, 10000000, &c.yieldMicros)) warn("LOOM_YIELD_US", v, "expected microseconds in [0, 1e7]");
  if (const char* v = std::getenv("LOOM_SHM_DIR"); v && *v) c.shmDir = v;
  if (const char* v = std::getenv("LOOM_TRANSPORT"); v && *v) {
    const std::string t = v;
    if (t != "shm" && t != "ib" && t != "ucx" && t != "tcp") warn("LOOM_TRANSPORT", v, "expected shm, ib, ucx or tcp");
    else c.transport = t;
  }
  for (const char* name : {"shm", "ib", "ucx", "tcp"}) {
    std::string var = "LOOM_" + std::string(name) + "_DISABLE";
    for (auto& ch : var) ch = static_cast<char>(ch >= 'a' && ch <= 'z' ? ch - 'a' + 'A' : ch);
    int off = 0;
    if (const char* v = std::getenv(var.c_str()); v && *v) {
      if (!parseInt(v, 0, 1, &off)) warn(var.c_str(), v, "expected 0 or 1");
      else if (off == 1) c.disabledTransports.push_back(name);
    }
  }
  if (const char* v = std::getenv("LOOM_TCP_TEST_DELAY_US"); v && *v)
    if (!parseInt(v, 0, 1000000, &c.tcpTestDelayMicros))
      warn("LOOM_TCP_TEST_DELAY_US", v, "expected microseconds in [0, 1000000]");
  if (const char* v = std::getenv("LOOM_NSOCKS"); v && *v)
    if (!parseInt(v, 1, 16, &c.socketsPerPeer)) warn("LOOM_NSOCKS", v, "expected an integer in [1, 16]");
  if (const char* v = std::getenv("LOOM_SOCKET_IFNAME"); v && *v) c.socketIfname = v;
  if (const char* v = std::getenv("LOOM_ALGO"); v && *v) c.algo = v;
  if (const char* v = std::getenv("LOOM_PROTO"); v && *v) c.proto = v;
  if (const char* v = std::getenv("LOOM_TUNING_FILE"); v && *v) c.tuningFile = v;
  if (const char* v = std::getenv("LOOM_DETERMINISTIC"); v && *v) {
    int on = 0;
    if (!parseInt(v, 0, 1, &on)) warn("LOOM_DETERMINISTIC", v, "expected 0 or 1");
    else c.deterministic = on == 1;
  }
  if (const char* v = std::getenv("LOOM_TUNER_ONLINE"); v && *v) {
    int on = 1;
    if (!parseInt(v, 0, 1, &on)) warn("LOOM_TUNER_ONLINE", v, "expected 0 or 1");
    else c.onlineTuning = on == 1;
  }
  if (const char* v = std::getenv("LOOM_CHECK"); v && *v) {
    int on = 0;
    if (!parseInt(v, 0, 1, &on)) warn("LOOM_CHECK", v, "expected 0 or 1");
    else c.check = on == 1;
  }
  if (const char* v = std::getenv("LOOM_FLIGHT_RECORDER_ENTRIES"); v && *v)
    if (!parseInt(v, 0, 1000000, &c.flightRecorderEntries))
      warn("LOOM_FLIGHT_RECORDER_ENTRIES", v, "expected an integer in [0, 1000000]");
  if (const char* v = std::getenv("LOOM_DUMP_ON_SIGNAL"); v && *v) c.dumpOnSignal = v;
  if (const char* v = std::getenv("LOOM_DUMP_DIR"); v && *v) c.dumpDir = v;
  if (const char* v = std::getenv("LOOM_TRACE"); v && *v) c.tracePath = v;
  c.log = LogSettings::fromEnv();
  return c;
}

}  // namespace loom
