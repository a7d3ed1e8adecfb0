// Bootstrap wire format: arbitrary bytes through every decoder, and through
// recvFrame over a real socket pair (the framing every rank and the root use).
//
// Properties: no decoder crashes or reads out of bounds; a hello or ring hello
// that decodes re-encodes to the same bytes (decoding is strict, so no field
// can hide a flipped byte); a decoded address table has the expected count; a
// decoded error text has no control characters.
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "bootstrap/socket.h"
#include "bootstrap/wire.h"
#include "tests/fuzz/fuzz_check.h"

using namespace loom;
using namespace loom::bootstrap;

namespace {

void decodePayload(const std::vector<uint8_t>& payload, int expectedCount) {
  if (Result<Hello> h = decodeHello(payload); h.isOk()) FUZZ_CHECK(encodeHello(h.value()) == payload);
  if (Result<RingHello> h = decodeRingHello(payload); h.isOk()) FUZZ_CHECK(encodeRingHello(h.value()) == payload);
  if (Result<std::vector<SockAddr>> t = decodeAddressTable(payload, expectedCount); t.isOk()) {
    FUZZ_CHECK(static_cast<int>(t.value().size()) == expectedCount);
    FUZZ_CHECK(encodeAddressTable(t.value()) == payload);
  }
  if (Result<RemoteError> e = decodeRemoteError(payload); e.isOk()) {
    for (char c : e.value().text) FUZZ_CHECK(static_cast<unsigned char>(c) >= 0x20 && c != 0x7f);
  }
}

// Writes the bytes into one end of a socket pair, closes it, and reads frames
// from the other end until the first error (malformed frame or end of stream).
void readFramesFromSocket(const uint8_t* data, size_t size) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) != 0) return;
  Socket reader(fds[0]);
  Socket writer(fds[1]);
  // Fuzz inputs are a few KiB: they fit the socket buffer in one write.
  if (::send(writer.fd(), data, size, MSG_NOSIGNAL) != static_cast<ssize_t>(size)) return;
  writer.close();
  for (int frames = 0; frames < 64; ++frames) {
    Result<Frame> f = recvFrame(reader.fd(), WaitContext{Deadline::after(1.0)}, "fuzz input");
    if (!f.isOk()) {
      // A closed stream is reported, never waited on until the deadline.
      FUZZ_CHECK(f.status().code() != Code::kTimeout);
      return;
    }
    FUZZ_CHECK(f.value().type != MsgType::kData);
    decodePayload(f.value().payload, 2);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size >= kFrameHeaderBytes) {
    Result<FrameHeader> h = decodeHeader(data);
    if (h.isOk()) {
      uint8_t again[kFrameHeaderBytes];
      encodeHeader(h.value().type, h.value().length, again);
      FUZZ_CHECK(std::equal(again, again + kFrameHeaderBytes, data));
    }
  }
  // The first byte picks the table size the decoder expects; the rest is a payload.
  if (size >= 1) decodePayload(std::vector<uint8_t>(data + 1, data + size), data[0] % 8);
  readFramesFromSocket(data, size);
  return 0;
}
