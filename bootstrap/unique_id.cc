// UniqueId (de)serialization and job secrets.
//
// The 128-byte layout (little-endian):
//   0   magic u32 "LMID"       4  version u16          6  root port u16
//   8   secret[16]            24  host length u8      25  host text (<= 63)
//   ... zero padding ...     124  FNV-1a checksum u32 of bytes [0, 124)
// The magic and checksum make a random or truncated id fail with
// InvalidArgument instead of sending a rank to a garbage address.
#include <sys/random.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

#include "bootstrap/bootstrap.h"
#include "bootstrap/sock_addr.h"
#include "common/format.h"

namespace loom::bootstrap {
namespace {

constexpr uint32_t kIdMagic = 0x44494D4Cu;  // "LMID"
constexpr uint16_t kIdVersion = 1;
constexpr size_t kHostOffset = 25;
constexpr size_t kChecksumOffset = kUniqueIdBytes - 4;
// Enough for any numeric IPv6 address with a scope (46 + '%' + IFNAMSIZ).
constexpr size_t kMaxHostLength = 63;
static_assert(kHostOffset + kMaxHostLength <= kChecksumOffset);

uint32_t fnv1a(const uint8_t* data, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; ++i) {
    h ^= data[i];
    h *= 16777619u;
  }
  return h;
}

void put16(uint8_t* p, uint16_t v) { p[0] = uint8_t(v); p[1] = uint8_t(v >> 8); }
void put32(uint8_t* p, uint32_t v) { for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (8 * i)); }
uint16_t get16(const uint8_t* p) { return uint16_t(p[0] | (p[1] << 8)); }
uint32_t get32(const uint8_t* p) {
  return uint32_t{p[0]} | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
}

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string toHex(const uint8_t* data, size_t n) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out += kDigits[data[i] >> 4];
    out += kDigits[data[i] & 15];
  }
  return out;
}

}  // namespace

void UniqueId::serialize(char out[kUniqueIdBytes]) const {
  uint8_t buf[kUniqueIdBytes] = {0};
  put32(buf, kIdMagic);
  put16(buf + 4, kIdVersion);
  put16(buf + 6, rootPort);
  std::memcpy(buf + 8, secret.data(), secret.size());
  // An over-long host cannot be a numeric address; it is cut and parse()
  // then rejects the id rather than this function failing silently later.
  size_t hostLength = rootHost.size() < kMaxHostLength ? rootHost.size() : kMaxHostLength;
  buf[24] = static_cast<uint8_t>(hostLength);
  std::memcpy(buf + kHostOffset, rootHost.data(), hostLength);
  put32(buf + kChecksumOffset, fnv1a(buf, kChecksumOffset));
  std::memcpy(out, buf, kUniqueIdBytes);
}

Result<UniqueId> UniqueId::parse(const char in[kUniqueIdBytes]) {
  uint8_t buf[kUniqueIdBytes];
  std::memcpy(buf, in, kUniqueIdBytes);
  if (get32(buf) != kIdMagic) {
    return makeError(Code::kInvalidArgument,
                     "unique id: bad magic (not created by loomGetUniqueId, or corrupted in transit)");
  }
  if (get16(buf + 4) != kIdVersion) {
    return makeError(Code::kInvalidArgument, "unique id: version %u, this build reads %u",
                     get16(buf + 4), kIdVersion);
  }
  if (get32(buf + kChecksumOffset) != fnv1a(buf, kChecksumOffset)) {
    return makeError(Code::kInvalidArgument, "unique id: checksum mismatch (corrupted in transit)");
  }
  size_t hostLength = buf[24];
  if (hostLength == 0 || hostLength > kMaxHostLength) {
    return makeError(Code::kInvalidArgument, "unique id: root host length %zu out of range [1, %zu]",
                     hostLength, kMaxHostLength);
  }
  for (size_t i = kHostOffset + hostLength; i < kChecksumOffset; ++i) {
    if (buf[i] != 0) return makeError(Code::kInvalidArgument, "unique id: nonzero padding byte %zu", i);
  }
  UniqueId id;
  id.rootPort = get16(buf + 6);
  std::memcpy(id.secret.data(), buf + 8, id.secret.size());
  id.rootHost.assign(reinterpret_cast<const char*>(buf + kHostOffset), hostLength);
  if (id.rootPort == 0) return makeError(Code::kInvalidArgument, "unique id: root port 0");
  Result<SockAddr> addr = SockAddr::fromNumeric(id.rootHost, id.rootPort);
  if (!addr.isOk()) return addr.status().withContext("unique id: root host: ");
  return id;
}

std::string UniqueId::jobTag() const { return toHex(secret.data(), 8); }

Secret randomSecret() {
  Secret s{};
  size_t filled = 0;
  while (filled < s.size()) {
    ssize_t n = getrandom(s.data() + filled, s.size() - filled, 0);
    if (n > 0) {
      filled += static_cast<size_t>(n);
    } else if (n < 0 && errno != EINTR) {
      break;
    }
  }
  if (filled < s.size()) {
    // getrandom unavailable (very old kernel or seccomp): random_device reads
    // the same kernel pool through /dev/urandom.
    std::random_device device;
    for (size_t i = filled; i < s.size(); ++i) s[i] = static_cast<uint8_t>(device());
  }
  return s;
}

Result<Secret> parseSecret(const std::string& hex) {
  Secret s{};
  if (hex.size() != 2 * s.size()) {
    return makeError(Code::kInvalidArgument, "job secret: expected %zu hex digits, got %zu characters",
                     2 * s.size(), hex.size());
  }
  for (size_t i = 0; i < s.size(); ++i) {
    int hi = hexValue(hex[2 * i]);
    int lo = hexValue(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      size_t bad = hi < 0 ? 2 * i : 2 * i + 1;
      return makeError(Code::kInvalidArgument, "job secret: '%c' at position %zu is not a hex digit",
                       hex[bad], bad);
    }
    s[i] = static_cast<uint8_t>((hi << 4) | lo);
  }
  return s;
}

std::string secretToHex(const Secret& s) { return toHex(s.data(), s.size()); }

}  // namespace loom::bootstrap
