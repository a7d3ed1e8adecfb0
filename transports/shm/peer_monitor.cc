#include "transports/shm/peer_monitor.h"

#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <new>
#include <sstream>

#include "common/clock.h"
#include "common/format.h"
#include "transports/shm/shm_layout.h"

namespace loom::transport::shm {
namespace {

constexpr uint64_t kBoardMagic = 0x48544c48544f4f4cull;  // "LOOTHLTH"
constexpr uint32_t kBoardVersion = 1;

enum SlotState : uint32_t { kUnused = 0, kAlive = 1, kDeparted = 2 };

// What /proc/<pid>/stat says about a process: its state letter and, for a
// zombie (exited, not yet reaped), its wait status. '\0' if it is gone.
struct ProcState {
  char state = '\0';
  int exitCode = -1;
};

ProcState readProcState(int pid) {
  ProcState out;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return out;
  // The command name (field 2) may hold spaces and parentheses: fields
  // resume after the last ')'.
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return out;
  std::istringstream fields(line.substr(close + 1));
  std::string field;
  // Field 3 is the state; field 52 (Linux >= 3.5) is the exit code.
  for (int index = 3; fields >> field; ++index) {
    if (index == 3) out.state = field.empty() ? '\0' : field[0];
    if (index == 52) out.exitCode = std::atoi(field.c_str());
  }
  return out;
}

// Cause word of the failure slot: 0 unknown, 0x100 | signal, 0x200 | exit status.
uint32_t causeOf(int pid) {
  ProcState proc = readProcState(pid);
  if (proc.state != 'Z' || proc.exitCode < 0) return 0;
  if (WIFSIGNALED(proc.exitCode)) return 0x100u | static_cast<uint32_t>(WTERMSIG(proc.exitCode));
  if (WIFEXITED(proc.exitCode)) return 0x200u | static_cast<uint32_t>(WEXITSTATUS(proc.exitCode));
  return 0;
}

// The inode of this process's pid namespace: pids mean the same thing to two
// processes only if theirs are equal (containers can share a host's /dev/shm).
uint64_t pidNamespace() {
  struct stat st {};
  return ::stat("/proc/self/ns/pid", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

std::string describeCause(uint32_t cause) {
  if (cause & 0x100u) {
    const int sig = static_cast<int>(cause & 0xffu);
    const char* abbrev = sigabbrev_np(sig);
    return strprintf("killed by signal %d%s%s%s", sig, abbrev ? " (SIG" : "", abbrev ? abbrev : "", abbrev ? ")" : "");
  }
  if (cause & 0x200u)
    return strprintf("exited with status %u without destroying its communicator", cause & 0xffu);
  return "its process exited without destroying its communicator";
}

}  // namespace

struct HealthSlot {
  alignas(kCacheLineBytes) std::atomic<uint32_t> state{kUnused};
  std::atomic<int32_t> pid{0};
  std::atomic<int64_t> heartbeatNanos{0};  // CLOCK_MONOTONIC when last seen waiting
  std::atomic<uint64_t> pidNamespace{0};    // see pidNamespace(); 0 unknown
};

struct PeerMonitor::Board {
  uint64_t magic;
  uint32_t version;
  uint32_t slotCount;
  // (local index + 1) | cause << 32 of the first rank found dead; 0: none.
  // One word, so a reader never sees a rank without its cause.
  alignas(kCacheLineBytes) std::atomic<uint64_t> failure{0};

  HealthSlot* slots() { return reinterpret_cast<HealthSlot*>(this + 1); }
  static size_t bytesFor(size_t ranks) { return roundUp(sizeof(Board) + ranks * sizeof(HealthSlot), kPageBytes); }
};

static_assert(std::atomic<uint64_t>::is_always_lock_free, "the failure word must be lock free across processes");

PeerMonitor::PeerMonitor(const SetupContext& ctx, std::vector<int> local)
    : rank_(ctx.rank),
      local_(std::move(local)),
      timeoutSeconds_(ctx.config ? ctx.config->timeoutSeconds : 300.0),
      jobTag_(ctx.jobTag),
      where_(ctx.config ? ctx.config->shmDir : "/dev/shm", ctx.jobTag + "-health", local_.front()) {
  for (int r : local_) peerInfo_.push_back((*ctx.peers)[static_cast<size_t>(r)]);
  self_ = static_cast<size_t>(std::find(local_.begin(), local_.end(), rank_) - local_.begin());
  pidfds_.assign(local_.size(), kNotWatched);
}

PeerMonitor::~PeerMonitor() {
  if (board_) board_->slots()[self_].state.store(kDeparted, std::memory_order_release);
  for (int fd : pidfds_)
    if (fd >= 0) ::close(fd);
  mapping_.reset();
  unlinkBoard();
}

Status PeerMonitor::createBoard() {
  const size_t bytes = Board::bytesFor(local_.size());
  Result<Mapping> mapped = createSegment(where_, bytes, rank_);
  if (!mapped.isOk()) return mapped.status().withContext("shm peer monitor: ");
  linked_ = true;
  mapping_ = std::move(mapped).value();
  auto* board = new (mapping_.data()) Board{kBoardMagic, kBoardVersion, static_cast<uint32_t>(local_.size()), {}};
  for (size_t i = 0; i < local_.size(); ++i) new (&board->slots()[i]) HealthSlot{};
  return Status::ok();
}

Status PeerMonitor::attach() {
  static_assert(sizeof(Board) % kCacheLineBytes == 0, "slots start on a cache line");
  const size_t bytes = Board::bytesFor(local_.size());
  if (!isOwner()) {
    uint64_t fileBytes = 0;
    Result<UniqueFd> fd = openPeerSegment(where_, local_.front(), &fileBytes);
    if (!fd.isOk()) return fd.status().withContext("shm peer monitor: ");
    LOOM_ENFORCE(fileBytes >= bytes, Code::kSystemError, "shm peer monitor: %s holds %llu bytes, expected %zu",
                 where_.path().c_str(), static_cast<unsigned long long>(fileBytes), bytes);
    Result<Mapping> mapped = mapRange(fd->get(), 0, bytes, true, where_, local_.front());
    if (!mapped.isOk()) return mapped.status().withContext("shm peer monitor: ");
    mapping_ = std::move(mapped).value();
  }
  auto* board = reinterpret_cast<Board*>(mapping_.data());
  LOOM_ENFORCE(board->magic == kBoardMagic && board->version == kBoardVersion && board->slotCount == local_.size(),
               Code::kSystemError, "shm peer monitor: %s is not a health board for %zu ranks", where_.path().c_str(),
               local_.size());
  HealthSlot& mine = board->slots()[self_];
  mine.pid.store(static_cast<int32_t>(::getpid()), std::memory_order_relaxed);
  mine.heartbeatNanos.store(monotonicNanos(), std::memory_order_relaxed);
  mine.pidNamespace.store(pidNamespace(), std::memory_order_relaxed);
  mine.state.store(kAlive, std::memory_order_release);
  board_ = board;
  return Status::ok();
}

// At the first check(), when every local rank has attached (connect()'s last
// exchange is behind us). A pidfd becomes readable when its process exits,
// whoever its parent is, and is not fooled by pid reuse.
void PeerMonitor::startWatching() {
  watching_ = true;
  const int selfPid = static_cast<int>(::getpid());
  const uint64_t ns = pidNamespace();
  HealthSlot* slots = board_->slots();
  for (size_t i = 0; i < local_.size(); ++i) {
    const int pid = peerInfo_[i].pid;
    if (i == self_ || pid == selfPid || pid <= 0) continue;
    if (ns == 0 || slots[i].pidNamespace.load(std::memory_order_relaxed) != ns) continue;  // its pid is not ours to check
    const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    // ESRCH: it exited already; other errors (no pidfds): kill(pid, 0) instead.
    pidfds_[i] = fd >= 0 ? fd : errno == ESRCH ? kExitedBeforeWatch : kPollWithKill;
  }
}

void PeerMonitor::unlinkBoard() {
  if (!linked_) return;
  where_.unlink();
  linked_ = false;
}

std::string PeerMonitor::describePeer(int i) const {
  const PeerInfo& p = peerInfo_[static_cast<size_t>(i)];
  return strprintf("rank %d (host %s, pid %d)", local_[static_cast<size_t>(i)], p.hostName, p.pid);
}

Status PeerMonitor::failureFromBoard() const {
  const uint64_t word = board_->failure.load(std::memory_order_acquire);
  const int index = static_cast<int>(word & 0xffffffffu) - 1;
  if (index < 0 || index >= static_cast<int>(local_.size())) return Status::ok();
  return makeError(Code::kRemoteError, "%s died: %s", describePeer(index).c_str(),
                   describeCause(static_cast<uint32_t>(word >> 32)).c_str());
}

bool PeerMonitor::processExited(size_t i) const {
  const int fd = pidfds_[i];
  if (fd >= 0) {
    pollfd pfd{fd, POLLIN, 0};
    return ::poll(&pfd, 1, 0) > 0;
  }
  if (fd == kExitedBeforeWatch) return true;
  if (fd != kPollWithKill) return false;  // not watched
  const int pid = peerInfo_[i].pid;
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  return readProcState(pid).state == 'Z';
}

Status PeerMonitor::check() {
  if (!board_) return Status::ok();
  if (board_->failure.load(std::memory_order_acquire) != 0) return failureFromBoard();
  const int64_t now = monotonicNanos();
  if (now - lastPollNs_.load(std::memory_order_relaxed) < kPollMillis * 1000000LL) return Status::ok();
  std::unique_lock<std::mutex> lock(pollMu_, std::try_to_lock);
  if (!lock.owns_lock()) return Status::ok();
  lastPollNs_.store(now, std::memory_order_relaxed);
  if (!watching_) startWatching();
  HealthSlot* slots = board_->slots();
  slots[self_].heartbeatNanos.store(now, std::memory_order_relaxed);
  for (size_t i = 0; i < local_.size(); ++i) {
    if (i == self_ || !processExited(i)) continue;
    if (slots[i].state.load(std::memory_order_acquire) != kAlive) {
      // Left cleanly (or never got as far as attaching): not a failure.
      if (pidfds_[i] >= 0) ::close(pidfds_[i]);
      pidfds_[i] = kNotWatched;
      continue;
    }
    const uint64_t word = (static_cast<uint64_t>(causeOf(peerInfo_[i].pid)) << 32) | (i + 1);
    uint64_t expected = 0;
    board_->failure.compare_exchange_strong(expected, word, std::memory_order_acq_rel);
    return failureFromBoard();  // ours, or the one another rank published first
  }
  return Status::ok();
}

std::string PeerMonitor::describeStalls() {
  if (!board_) return "";
  const int64_t now = monotonicNanos();
  const double threshold = std::min(1.0, timeoutSeconds_ / 2);
  HealthSlot* slots = board_->slots();
  std::lock_guard<std::mutex> lock(pollMu_);
  if (!watching_) startWatching();
  std::string out;
  for (size_t i = 0; i < local_.size(); ++i) {
    if (i == self_) continue;
    const std::string who = describePeer(static_cast<int>(i));
    if (slots[i].state.load(std::memory_order_acquire) == kDeparted) {
      out += "; " + who + " has destroyed its communicator";
      continue;
    }
    const double idle = static_cast<double>(now - slots[i].heartbeatNanos.load(std::memory_order_relaxed)) / 1e9;
    // A process state only where the pid means the same process here.
    const bool known = pidfds_[i] != kNotWatched;
    const char state = known ? readProcState(peerInfo_[i].pid).state : 'R';
    const bool stopped = state == 'T' || state == 't';
    if (!stopped && idle < threshold) continue;
    out += strprintf("; %s made no progress for %.1f s%s", who.c_str(), idle,
                     stopped ? " (process stopped)" : state == '\0' ? " (process gone)" : "");
  }
  return out;
}

}  // namespace loom::transport::shm
