// Files and mappings behind shared-memory segments: naming, creation with
// the memory reserved up front, opening a peer's segment, and RAII for the
// descriptors and mappings. No knowledge of the FIFO layout lives here.
//
// Thread safety: every object here is used by one thread at a time.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.h"

namespace loom::transport::shm {

// Where rank `rank`'s segment of job `jobTag` lives. With shmDir /dev/shm
// (the default) it is the POSIX shared-memory object /loom-<jobTag>-<rank>
// (shm_open); with any other directory it is the plain file
// <shmDir>/loom-<jobTag>-<rank>, for systems whose /dev/shm is too small.
class SegmentLocation {
 public:
  SegmentLocation() = default;
  SegmentLocation(const std::string& shmDir, const std::string& jobTag, int rank);

  // The file-system path, as shown in error messages.
  const std::string& path() const { return path_; }
  // open(2) semantics: a descriptor, or -1 with errno set.
  int open(int flags, mode_t mode) const;
  // unlink(2) semantics: 0, or -1 with errno set.
  int unlink() const;

 private:
  bool posixShm_ = true;
  std::string shmName_;  // "/loom-<tag>-<rank>" for shm_open
  std::string path_;
};

// Owns a file descriptor.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  int release() { int fd = fd_; fd_ = -1; return fd; }
  void reset();

 private:
  int fd_ = -1;
};

// Owns one mmap'd range; unmaps it on destruction.
class Mapping {
 public:
  Mapping() = default;
  Mapping(std::byte* base, size_t bytes) : base_(base), bytes_(bytes) {}
  Mapping(Mapping&& other) noexcept : base_(other.base_), bytes_(other.bytes_) {
    other.base_ = nullptr;
    other.bytes_ = 0;
  }
  Mapping& operator=(Mapping&& other) noexcept;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() { reset(); }

  std::byte* data() const { return base_; }
  size_t size() const { return bytes_; }
  explicit operator bool() const { return base_ != nullptr; }
  void reset();

 private:
  std::byte* base_ = nullptr;
  size_t bytes_ = 0;
};

// Creates the segment (failing if it already exists), sizes it, reserves its
// memory with posix_fallocate so that a full /dev/shm fails here with ENOSPC
// instead of raising SIGBUS at the first touch of a slot, and maps it
// (populated, read-write). On failure nothing is left behind.
Result<Mapping> createSegment(const SegmentLocation& where, uint64_t bytes, int ownerRank);

// Opens peer `peerRank`'s existing segment read-write and returns its size in `bytes`.
Result<UniqueFd> openPeerSegment(const SegmentLocation& where, int peerRank, uint64_t* bytes);

// Maps [offset, offset + bytes) of an open segment (offset page aligned).
// `populate` pre-faults the pages so the hot path never takes a page fault.
Result<Mapping> mapRange(int fd, uint64_t offset, uint64_t bytes, bool populate,
                         const SegmentLocation& where, int ownerRank);

}  // namespace loom::transport::shm
