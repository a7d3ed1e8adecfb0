#include "transports/shm/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "common/format.h"

namespace loom::transport::shm {
namespace {

bool isDevShm(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir == "/dev/shm";
}

std::string describeBytes(uint64_t bytes) {
  return strprintf("%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
}

}  // namespace

SegmentLocation::SegmentLocation(const std::string& shmDir, const std::string& jobTag, int rank)
    : posixShm_(isDevShm(shmDir)), shmName_(strprintf("/loom-%s-%d", jobTag.c_str(), rank)) {
  std::string dir = shmDir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  path_ = (posixShm_ ? std::string("/dev/shm") : dir) + shmName_;
}

int SegmentLocation::open(int flags, mode_t mode) const {
  return posixShm_ ? ::shm_open(shmName_.c_str(), flags, mode) : ::open(path_.c_str(), flags | O_CLOEXEC, mode);
}

int SegmentLocation::unlink() const {
  return posixShm_ ? ::shm_unlink(shmName_.c_str()) : ::unlink(path_.c_str());
}

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = other.release();
  }
  return *this;
}

void UniqueFd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Mapping& Mapping::operator=(Mapping&& other) noexcept {
  if (this != &other) {
    reset();
    base_ = other.base_;
    bytes_ = other.bytes_;
    other.base_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

void Mapping::reset() {
  if (base_) ::munmap(base_, bytes_);
  base_ = nullptr;
  bytes_ = 0;
}

Result<Mapping> createSegment(const SegmentLocation& where, uint64_t bytes, int ownerRank) {
  UniqueFd fd(where.open(O_CREAT | O_EXCL | O_RDWR, 0600));
  if (fd.get() < 0) {
    int err = errno;
    if (err == EEXIST)
      return makeSystemError(err, "shm: segment %s of rank %d already exists (another communicator with the "
                                  "same job tag, or a leftover of a crashed job; remove it)",
                             where.path().c_str(), ownerRank);
    return makeSystemError(err, "shm: cannot create segment %s of rank %d", where.path().c_str(), ownerRank);
  }
  // From here on, a failure must not leave the name behind.
  auto fail = [&](int err, const char* what) -> Status {
    where.unlink();
    return makeSystemError(err, "shm: cannot %s segment %s of rank %d (%s; LOOM_SHM_DIR selects another "
                                "directory, LOOM_CHUNK_SIZE and LOOM_SHM_SLOTS shrink it)",
                           what, where.path().c_str(), ownerRank, describeBytes(bytes).c_str());
  };
  if (::ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0) return fail(errno, "size");
  // posix_fallocate returns the error instead of setting errno.
  if (int err = ::posix_fallocate(fd.get(), 0, static_cast<off_t>(bytes)); err != 0)
    return fail(err, "reserve memory for");
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd.get(), 0);
  if (base == MAP_FAILED) return fail(errno, "map");
  return Mapping(static_cast<std::byte*>(base), bytes);
}

Result<UniqueFd> openPeerSegment(const SegmentLocation& where, int peerRank, uint64_t* bytes) {
  UniqueFd fd(where.open(O_RDWR, 0));
  if (fd.get() < 0)
    return makeSystemError(errno, "shm: cannot open segment %s of peer rank %d", where.path().c_str(), peerRank);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    return makeSystemError(errno, "shm: cannot stat segment %s of peer rank %d", where.path().c_str(), peerRank);
  *bytes = static_cast<uint64_t>(st.st_size);
  return fd;
}

Result<Mapping> mapRange(int fd, uint64_t offset, uint64_t bytes, bool populate, const SegmentLocation& where,
                         int ownerRank) {
  int flags = MAP_SHARED | (populate ? MAP_POPULATE : 0);
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, flags, fd, static_cast<off_t>(offset));
  if (base == MAP_FAILED)
    return makeSystemError(errno, "shm: cannot map %s at offset %llu of segment %s of rank %d",
                           describeBytes(bytes).c_str(), static_cast<unsigned long long>(offset),
                           where.path().c_str(), ownerRank);
  return Mapping(static_cast<std::byte*>(base), bytes);
}

}  // namespace loom::transport::shm
