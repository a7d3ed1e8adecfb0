// A thin C++20 layer over loom.h (namespace loompp, apart from the library's
// internal namespace loom): RAII handles, typed spans and exceptions.
// Everything here is inline over the C ABI; nothing new happens underneath.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>

#include "loom/loom.h"

namespace loompp {

class Error : public std::runtime_error {
 public:
  Error(loomResult_t code, const std::string& what) : std::runtime_error(what), code_(code) {}
  loomResult_t code() const { return code_; }

 private:
  loomResult_t code_;
};

// Throws loompp::Error carrying the last error message of `comm` (or of the thread).
inline void check(loomResult_t r, loomComm_t comm = nullptr) {
  if (r != loomSuccess && r != loomInProgress)
    throw Error(r, std::string(loomGetErrorString(r)) + ": " + loomGetLastError(comm));
}

template <class T> constexpr loomDataType_t dataTypeOf();
template <> constexpr loomDataType_t dataTypeOf<int8_t>() { return loomInt8; }
template <> constexpr loomDataType_t dataTypeOf<uint8_t>() { return loomUint8; }
template <> constexpr loomDataType_t dataTypeOf<int32_t>() { return loomInt32; }
template <> constexpr loomDataType_t dataTypeOf<uint32_t>() { return loomUint32; }
template <> constexpr loomDataType_t dataTypeOf<int64_t>() { return loomInt64; }
template <> constexpr loomDataType_t dataTypeOf<uint64_t>() { return loomUint64; }
template <> constexpr loomDataType_t dataTypeOf<float>() { return loomFloat32; }
template <> constexpr loomDataType_t dataTypeOf<double>() { return loomFloat64; }

class Stream {
 public:
  Stream() { check(loomStreamCreate(&s_)); }
  ~Stream() { if (s_) loomStreamDestroy(s_); }
  Stream(Stream&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  Stream& operator=(Stream&& o) noexcept { std::swap(s_, o.s_); return *this; }
  void synchronize() { check(loomStreamSynchronize(s_)); }
  bool done() { loomResult_t r = loomStreamQuery(s_); check(r); return r == loomSuccess; }
  loomStream_t get() const { return s_; }

 private:
  loomStream_t s_ = nullptr;
};

// Calls made between construction and end() are one group (loomGroupStart/
// loomGroupEnd): sends and receives in it progress together. end() reports
// the group's errors; a Group destroyed without end() still closes the group.
class Group {
 public:
  Group() { check(loomGroupStart()); }
  ~Group() { if (open_) (void)loomGroupEnd(); }
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;
  void end() {
    open_ = false;
    check(loomGroupEnd());
  }

 private:
  bool open_ = true;
};

class Comm {
 public:
  Comm(int nranks, const loomUniqueId& id, int rank) { check(loomCommInitRank(&c_, nranks, id, rank)); }
  // From loomrun's (or torchrun's) environment.
  static Comm fromEnv() {
    loomUniqueId id;
    int rank = 0, nranks = 1;
    check(loomGetUniqueIdFromEnv(&id, &rank, &nranks));
    return Comm(nranks, id, rank);
  }
  ~Comm() { if (c_) loomCommDestroy(c_); }
  Comm(Comm&& o) noexcept : c_(std::exchange(o.c_, nullptr)) {}
  Comm& operator=(Comm&& o) noexcept { std::swap(c_, o.c_); return *this; }

  int rank() const { int r = 0; check(loomCommUserRank(c_, &r), c_); return r; }
  int size() const { int n = 0; check(loomCommCount(c_, &n), c_); return n; }
  loomComm_t get() const { return c_; }

  template <class T>
  void allReduce(std::span<const T> send, std::span<T> recv, loomRedOp_t op = loomSum, Stream* s = nullptr) {
    if (recv.size() != send.size()) throw Error(loomInvalidArgument, "allReduce: send and recv sizes differ");
    check(loomAllReduce(send.data(), recv.data(), send.size(), dataTypeOf<T>(), op, c_, s ? s->get() : nullptr), c_);
  }
  template <class T>
  void allReduce(std::span<T> inPlace, loomRedOp_t op = loomSum, Stream* s = nullptr) {
    check(loomAllReduce(inPlace.data(), inPlace.data(), inPlace.size(), dataTypeOf<T>(), op, c_, s ? s->get() : nullptr), c_);
  }
  template <class T>
  void broadcast(std::span<T> buf, int root, Stream* s = nullptr) {
    check(loomBroadcast(buf.data(), buf.data(), buf.size(), dataTypeOf<T>(), root, c_, s ? s->get() : nullptr), c_);
  }
  template <class T>
  void reduceScatter(std::span<const T> send, std::span<T> recv, loomRedOp_t op = loomSum, Stream* s = nullptr) {
    check(loomReduceScatter(send.data(), recv.data(), recv.size(), dataTypeOf<T>(), op, c_, s ? s->get() : nullptr), c_);
  }
  template <class T>
  void allGather(std::span<const T> send, std::span<T> recv, Stream* s = nullptr) {
    check(loomAllGather(send.data(), recv.data(), send.size(), dataTypeOf<T>(), c_, s ? s->get() : nullptr), c_);
  }
  // send and recv hold size() blocks of equal length; block j goes to rank j.
  template <class T>
  void allToAll(std::span<const T> send, std::span<T> recv, Stream* s = nullptr) {
    const size_t n = static_cast<size_t>(size());
    if (send.size() != recv.size() || send.size() % n != 0)
      throw Error(loomInvalidArgument, "allToAll: send and recv must hold size() blocks of equal length");
    check(loomAllToAll(send.data(), recv.data(), send.size() / n, dataTypeOf<T>(), c_, s ? s->get() : nullptr), c_);
  }
  void barrier(Stream* s = nullptr) { check(loomBarrier(c_, s ? s->get() : nullptr), c_); }
  // Point to point; pair them inside a Group to exchange in both directions.
  template <class T>
  void send(std::span<const T> buf, int peer, Stream* s = nullptr) {
    check(loomSend(buf.data(), buf.size(), dataTypeOf<T>(), peer, c_, s ? s->get() : nullptr), c_);
  }
  template <class T>
  void recv(std::span<T> buf, int peer, Stream* s = nullptr) {
    check(loomRecv(buf.data(), buf.size(), dataTypeOf<T>(), peer, c_, s ? s->get() : nullptr), c_);
  }
  // MPI_Comm_split: ranks with the same color form a communicator ordered by
  // (key, rank); a negative color takes part and gets an empty Comm (valid() false).
  Comm split(int color, int key) const {
    loomComm_t child = nullptr;
    check(loomCommSplit(c_, color, key, &child), c_);
    return Comm(child);
  }
  bool valid() const { return c_ != nullptr; }

 private:
  explicit Comm(loomComm_t adopted) : c_(adopted) {}
  loomComm_t c_ = nullptr;
};

}  // namespace loompp
