#include "bootstrap/wire.h"

#include <arpa/inet.h>

#include <cstring>

#include "bootstrap/socket_io.h"
#include "common/format.h"

namespace loom::bootstrap {
namespace {

class ByteWriter {
 public:
  explicit ByteWriter(std::vector<uint8_t>& out) : out_(out) {}
  void u8(uint8_t v) { out_.push_back(v); }
  void u16(uint16_t v) { for (int i = 0; i < 2; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i))); }
  void u32(uint32_t v) { for (int i = 0; i < 4; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i))); }
  void i32(int32_t v) { u32(static_cast<uint32_t>(v)); }
  void bytes(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out_.insert(out_.end(), b, b + n);
  }

 private:
  std::vector<uint8_t>& out_;
};

// Reads with bounds checks: a short buffer sets ok() to false and yields 0s.
class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool ok() const { return ok_; }
  bool atEnd() const { return pos_ == size_; }
  size_t remaining() const { return size_ - pos_; }
  uint8_t u8() { uint8_t v = 0; take(&v, 1); return v; }
  uint16_t u16() {
    uint8_t b[2] = {0, 0};
    take(b, 2);
    return static_cast<uint16_t>(b[0] | (b[1] << 8));
  }
  uint32_t u32() {
    uint8_t b[4] = {0, 0, 0, 0};
    take(b, 4);
    return uint32_t{b[0]} | (uint32_t{b[1]} << 8) | (uint32_t{b[2]} << 16) | (uint32_t{b[3]} << 24);
  }
  int32_t i32() { return static_cast<int32_t>(u32()); }
  void take(void* out, size_t n) {
    if (!ok_ || n > size_ - pos_) {
      ok_ = false;
      std::memset(out, 0, n);
      return;
    }
    std::memcpy(out, data_ + pos_, n);
    pos_ += n;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  bool ok_ = true;
};

// Payload limit per type; 0 for an unknown type.
size_t maxPayload(MsgType type) {
  switch (type) {
    case MsgType::kHello: return kHelloBytes;
    case MsgType::kRingHello: return kRingHelloBytes;
    case MsgType::kAddressTable: return 4 + size_t{kMaxRanks} * kWireAddressBytes;
    case MsgType::kError: return 8 + kMaxErrorTextBytes;
    case MsgType::kData: return kMaxSlotBytes;
  }
  return 0;
}

bool isFixedSize(MsgType type) { return type == MsgType::kHello || type == MsgType::kRingHello; }

void writeAddress(ByteWriter& w, const SockAddr& addr) {
  uint8_t raw[16] = {0};
  uint32_t scope = 0;
  if (addr.family() == AF_INET6) {
    std::memcpy(raw, &addr.v6().sin6_addr, 16);
    scope = addr.v6().sin6_scope_id;
    w.u8(6);
  } else {
    std::memcpy(raw, &addr.v4().sin_addr, 4);
    w.u8(4);
  }
  w.u16(addr.port());
  w.bytes(raw, 16);
  w.u32(scope);
}

Result<SockAddr> readAddress(ByteReader& r) {
  uint8_t family = r.u8();
  uint16_t port = r.u16();
  uint8_t raw[16];
  r.take(raw, 16);
  uint32_t scope = r.u32();
  if (!r.ok()) return makeError(Code::kInvalidArgument, "truncated address");
  if (port == 0) return makeError(Code::kInvalidArgument, "address with port 0");
  if (family == 4) {
    // Strict: an IPv4 address leaves the rest of the field zero, so a flipped
    // byte there is caught instead of silently ignored.
    for (size_t i = 4; i < 16; ++i) {
      if (raw[i] != 0) return makeError(Code::kInvalidArgument, "IPv4 address with nonzero padding byte %zu", i);
    }
    if (scope != 0) return makeError(Code::kInvalidArgument, "IPv4 address with IPv6 scope %u", scope);
    sockaddr_in in{};
    in.sin_family = AF_INET;
    in.sin_port = htons(port);
    std::memcpy(&in.sin_addr, raw, 4);
    return SockAddr::fromRaw(reinterpret_cast<sockaddr*>(&in), sizeof(in));
  }
  if (family == 6) {
    sockaddr_in6 in6{};
    in6.sin6_family = AF_INET6;
    in6.sin6_port = htons(port);
    in6.sin6_scope_id = scope;
    std::memcpy(&in6.sin6_addr, raw, 16);
    return SockAddr::fromRaw(reinterpret_cast<sockaddr*>(&in6), sizeof(in6));
  }
  return makeError(Code::kInvalidArgument, "address family tag %u (expected 4 or 6)", family);
}

Status malformed(const char* what, const char* why) {
  return makeError(Code::kInvalidArgument, "malformed %s message: %s", what, why);
}

}  // namespace

void encodeHeader(MsgType type, uint32_t length, uint8_t out[kFrameHeaderBytes]) {
  std::vector<uint8_t> buf;
  ByteWriter w(buf);
  w.u32(kFrameMagic);
  w.u16(kWireVersion);
  w.u16(static_cast<uint16_t>(type));
  w.u32(length);
  std::memcpy(out, buf.data(), kFrameHeaderBytes);
}

Result<FrameHeader> decodeHeader(const uint8_t in[kFrameHeaderBytes]) {
  ByteReader r(in, kFrameHeaderBytes);
  uint32_t magic = r.u32();
  uint16_t version = r.u16();
  uint16_t type = r.u16();
  uint32_t length = r.u32();
  if (magic != kFrameMagic) {
    return makeError(Code::kInvalidArgument, "bad frame magic 0x%08x (not a Loom bootstrap peer)", magic);
  }
  if (version != kWireVersion) {
    return makeError(Code::kInvalidArgument, "wire version %u, this build speaks %u (mixed Loom versions?)",
                     version, kWireVersion);
  }
  FrameHeader h{static_cast<MsgType>(type), length};
  size_t limit = maxPayload(h.type);
  if (limit == 0) return makeError(Code::kInvalidArgument, "unknown message type %u", type);
  if (length > limit || (isFixedSize(h.type) && length != limit)) {
    return makeError(Code::kInvalidArgument, "message type %u with length %u (limit %zu)", type, length, limit);
  }
  return h;
}

std::vector<uint8_t> encodeHello(const Hello& hello) {
  std::vector<uint8_t> out;
  ByteWriter w(out);
  w.bytes(hello.secret.data(), hello.secret.size());
  w.i32(hello.rank);
  w.i32(hello.nranks);
  writeAddress(w, hello.listenAddress);
  return out;
}

Result<Hello> decodeHello(const std::vector<uint8_t>& payload) {
  if (payload.size() != kHelloBytes) return malformed("hello", "wrong length");
  ByteReader r(payload.data(), payload.size());
  Hello h;
  r.take(h.secret.data(), h.secret.size());
  h.rank = r.i32();
  h.nranks = r.i32();
  Result<SockAddr> addr = readAddress(r);
  if (!addr.isOk()) return addr.status().withContext("malformed hello message: ");
  h.listenAddress = addr.value();
  return h;
}

std::vector<uint8_t> encodeRingHello(const RingHello& hello) {
  std::vector<uint8_t> out;
  ByteWriter w(out);
  w.bytes(hello.secret.data(), hello.secret.size());
  w.i32(hello.rank);
  w.i32(hello.nranks);
  return out;
}

Result<RingHello> decodeRingHello(const std::vector<uint8_t>& payload) {
  if (payload.size() != kRingHelloBytes) return malformed("ring hello", "wrong length");
  ByteReader r(payload.data(), payload.size());
  RingHello h;
  r.take(h.secret.data(), h.secret.size());
  h.rank = r.i32();
  h.nranks = r.i32();
  return h;
}

std::vector<uint8_t> encodeAddressTable(const std::vector<SockAddr>& table) {
  std::vector<uint8_t> out;
  ByteWriter w(out);
  w.u32(static_cast<uint32_t>(table.size()));
  for (const SockAddr& addr : table) writeAddress(w, addr);
  return out;
}

Result<std::vector<SockAddr>> decodeAddressTable(const std::vector<uint8_t>& payload,
                                                 int expectedCount) {
  ByteReader r(payload.data(), payload.size());
  uint32_t count = r.u32();
  if (!r.ok()) return malformed("address table", "truncated count");
  if (static_cast<int64_t>(count) != expectedCount) {
    return makeError(Code::kInvalidArgument, "malformed address table message: %u entries for %d ranks",
                     count, expectedCount);
  }
  if (r.remaining() != size_t{count} * kWireAddressBytes) return malformed("address table", "wrong length");
  std::vector<SockAddr> table;
  table.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    Result<SockAddr> addr = readAddress(r);
    if (!addr.isOk()) return addr.status().withContext(strprintf("address table entry %u: ", i));
    table.push_back(addr.value());
  }
  return table;
}

std::vector<uint8_t> encodeRemoteError(const RemoteError& error) {
  std::string text = error.text.substr(0, kMaxErrorTextBytes);
  std::vector<uint8_t> out;
  ByteWriter w(out);
  w.u32(static_cast<uint32_t>(error.code));
  w.u32(static_cast<uint32_t>(text.size()));
  w.bytes(text.data(), text.size());
  return out;
}

Result<RemoteError> decodeRemoteError(const std::vector<uint8_t>& payload) {
  ByteReader r(payload.data(), payload.size());
  uint32_t code = r.u32();
  uint32_t length = r.u32();
  if (!r.ok() || length > kMaxErrorTextBytes || length != r.remaining()) {
    return malformed("error", "bad text length");
  }
  RemoteError e;
  // Only the codes the root sends; anything else is reported as remote error.
  e.code = code == static_cast<uint32_t>(Code::kTimeout) ? Code::kTimeout : Code::kRemoteError;
  e.text.resize(length);
  r.take(e.text.data(), length);
  // The text ends up in logs and messages: no control characters from the wire.
  for (char& c : e.text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return e;
}

bool secretsEqual(const Secret& a, const Secret& b) {
  uint8_t diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<uint8_t>(a[i] ^ b[i]);
  return diff == 0;
}

Status sendFrame(int fd, MsgType type, const std::vector<uint8_t>& payload,
                 const WaitContext& wait, const std::string& what) {
  std::vector<uint8_t> frame(kFrameHeaderBytes);
  encodeHeader(type, static_cast<uint32_t>(payload.size()), frame.data());
  frame.insert(frame.end(), payload.begin(), payload.end());
  return sendAll(fd, frame.data(), frame.size(), wait, what);
}

Result<Frame> recvFrame(int fd, const WaitContext& wait, const std::string& what) {
  uint8_t header[kFrameHeaderBytes];
  LOOM_TRY(recvAll(fd, header, sizeof(header), wait, what));
  Result<FrameHeader> h = decodeHeader(header);
  if (!h.isOk()) return h.status().withContext("invalid frame in " + what + ": ");
  if (h.value().type == MsgType::kData) {
    return makeError(Code::kInvalidArgument, "invalid frame in %s: unexpected data message", what.c_str());
  }
  Frame frame;
  frame.type = h.value().type;
  frame.payload.resize(h.value().length);
  LOOM_TRY(recvAll(fd, frame.payload.data(), frame.payload.size(), wait, what));
  return frame;
}

}  // namespace loom::bootstrap
