#include "bootstrap/rendezvous_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

namespace loom::bootstrap {
namespace {

constexpr const char* kMagic = "loom-rendezvous-1";

// FNV-1a: a short, stable file name for a job key of any length.
std::string hashHex(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// `dir` exists (created 0700 if missing), is a directory (not a link) owned
// by this user, and nobody else may enter it.
Status ensurePrivateDir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return makeError(Code::kSystemError, "rendezvous: cannot create directory %s: %s", dir.c_str(), std::strerror(errno));
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0)
    return makeError(Code::kSystemError, "rendezvous: %s: %s", dir.c_str(), std::strerror(errno));
  if (!S_ISDIR(st.st_mode) || st.st_uid != ::getuid() || (st.st_mode & 077) != 0)
    return makeError(Code::kSystemError,
                     "rendezvous: %s must be a directory owned by uid %u with mode 0700 (it holds job secrets); "
                     "fix or remove it",
                     dir.c_str(), static_cast<unsigned>(::getuid()));
  return Status::ok();
}

std::mutex gPublishedMutex;
std::vector<std::string>* gPublished = nullptr;

void removePublished() {
  std::lock_guard<std::mutex> lock(gPublishedMutex);
  if (!gPublished) return;
  for (const std::string& p : *gPublished) ::unlink(p.c_str());
}

// Reads and checks the file; kInProgress while it is not there yet, or
// while only a file older than `maxAgeSeconds` is: its root, which lives at
// most that long, is gone (a job that was killed left it behind).
Result<UniqueId> readFile(const std::string& path, double maxAgeSeconds) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return makeError(Code::kInProgress, "rendezvous file %s is not there yet", path.c_str());
    return makeError(Code::kSystemError, "rendezvous: cannot open %s: %s", path.c_str(), std::strerror(errno));
  }
  struct stat st {};
  char buf[512] = {0};
  ssize_t n = -1;
  if (::fstat(fd, &st) == 0) n = ::read(fd, buf, sizeof(buf) - 1);
  ::close(fd);
  if (!S_ISREG(st.st_mode) || st.st_uid != ::getuid() || (st.st_mode & 077) != 0)
    return makeError(Code::kSystemError,
                     "rendezvous: %s is not a file of uid %u readable by it alone; refusing its secret", path.c_str(),
                     static_cast<unsigned>(::getuid()));
  if (static_cast<double>(::time(nullptr) - st.st_mtime) > maxAgeSeconds)
    return makeError(Code::kInProgress, "rendezvous file %s is stale", path.c_str());
  if (n <= 0) return makeError(Code::kSystemError, "rendezvous: cannot read %s", path.c_str());
  std::istringstream in(std::string(buf, static_cast<size_t>(n)));
  std::string magic, host, secretHex;
  unsigned port = 0;
  if (!(in >> magic >> host >> port >> secretHex) || magic != kMagic || port == 0 || port > 65535)
    return makeError(Code::kInvalidArgument, "rendezvous: %s is not a Loom rendezvous file", path.c_str());
  auto secret = parseSecret(secretHex);
  if (!secret.isOk()) return secret.status().withContext("rendezvous file " + path + ": ");
  UniqueId id;
  id.rootHost = host;
  id.rootPort = static_cast<uint16_t>(port);
  id.secret = secret.value();
  return id;
}

}  // namespace

Result<std::string> rendezvousFilePath(const LaunchEnv& place, const std::string& runtimeDir, const std::string& home,
                                       uid_t uid, pid_t parent) {
  std::string dir;
  std::string name = hashHex(place.jobKey);
  if (place.singleHost()) {
    dir = !runtimeDir.empty() ? runtimeDir + "/loom" : "/tmp/loom-" + std::to_string(uid);
    // Without a job id from the launcher, the ranks' common parent (the
    // launcher's agent on this host) tells this job from others.
    if (!place.jobKeyUnique) name += "-" + std::to_string(parent);
  } else {
    if (!place.jobKeyUnique)
      return makeError(Code::kInvalidArgument,
                       "%s: ranks on several hosts, but the launcher exports no job id to name their rendezvous; "
                       "set LOOM_JOB_SECRET, MASTER_ADDR and MASTER_PORT the same on every rank",
                       launcherName(place.launcher));
    if (home.empty())
      return makeError(Code::kInvalidArgument,
                       "%s: ranks on several hosts meet through a file in $HOME/.loom/rendezvous, but HOME is not "
                       "set; set HOME (shared by the hosts), or LOOM_JOB_SECRET, MASTER_ADDR and MASTER_PORT",
                       launcherName(place.launcher));
    dir = home + "/.loom/rendezvous";
  }
  return dir + "/" + name;
}

Status publishRendezvous(const std::string& path, const UniqueId& id) {
  const std::string dir = path.substr(0, path.rfind('/'));
  if (dir.size() > 12 && dir.compare(dir.size() - 11, 11, "/rendezvous") == 0) {
    // $HOME/.loom/rendezvous: its parent too.
    Status parent = ensurePrivateDir(dir.substr(0, dir.rfind('/')));
    if (!parent.isOk()) return parent;
  }
  Status s = ensurePrivateDir(dir);
  if (!s.isOk()) return s;
  std::string tmp = path + ".XXXXXX";
  const int fd = ::mkstemp(tmp.data());  // 0600
  if (fd < 0) return makeError(Code::kSystemError, "rendezvous: mkstemp in %s: %s", dir.c_str(), std::strerror(errno));
  const std::string text =
      std::string(kMagic) + " " + id.rootHost + " " + std::to_string(id.rootPort) + " " + secretToHex(id.secret) + "\n";
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  // rename: readers see no file or the whole of it.
  if (!written || ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return makeError(Code::kSystemError, "rendezvous: cannot write %s: %s", path.c_str(), std::strerror(errno));
  }
  std::lock_guard<std::mutex> lock(gPublishedMutex);
  if (!gPublished) {
    gPublished = new std::vector<std::string>;
    std::atexit(removePublished);
  }
  gPublished->push_back(path);
  return Status::ok();
}

Result<UniqueId> awaitRendezvous(const std::string& path, double timeoutSeconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeoutSeconds);
  for (;;) {
    auto id = readFile(path, timeoutSeconds);
    if (id.isOk() || id.status().code() != Code::kInProgress) return id;
    if (std::chrono::steady_clock::now() >= deadline)
      return makeError(Code::kTimeout,
                       "rendezvous: rank 0 did not write %s within %.0f s (is rank 0 running, and on a host that "
                       "shares this directory?); a file older than that is ignored",
                       path.c_str(), timeoutSeconds);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace loom::bootstrap
