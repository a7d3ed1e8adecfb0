// The bootstrap's wire format: fixed little-endian framing, independent of
// the host's byte order and struct layout.
//
//   frame   = magic u32 "LOOM" | version u16 | type u16 | length u32 | payload
//   address = family u8 (4|6) | port u16 | 16 address bytes | IPv6 scope u32
//   Hello       (rank -> root)  secret[16] | rank i32 | nranks i32 | address
//   AddressTable(root -> rank)  count u32 | count * address
//   Error       (root -> rank)  code u32 | text (length-prefixed u32)
//   RingHello   (rank -> next)  secret[16] | rank i32 | nranks i32
//   Data        (allGather)     the slot bytes
//
// Everything read from the wire is checked before use: magic and version,
// known type, a per-type payload length limit (checked from the header,
// before any payload is read or allocated), and every rank, count and address
// inside (an IPv4 address must leave the rest of its field and the scope
// zero, so no byte of a decoded message goes unchecked; error texts lose
// their control characters). A violation is an error Status saying what was
// wrong; callers log it (LOOM_WARN) and drop the connection. tests/fuzz
// feeds arbitrary bytes to every decoder and to recvFrame.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/sock_addr.h"
#include "common/status.h"
#include "common/wait.h"

namespace loom::bootstrap {

constexpr uint32_t kFrameMagic = 0x4D4F4F4Cu;  // "LOOM" as little-endian bytes
constexpr uint16_t kWireVersion = 1;
constexpr size_t kFrameHeaderBytes = 12;
constexpr size_t kWireAddressBytes = 23;
constexpr size_t kHelloBytes = 16 + 4 + 4 + kWireAddressBytes;
constexpr size_t kRingHelloBytes = 16 + 4 + 4;
constexpr int kMaxRanks = 32768;
constexpr size_t kMaxErrorTextBytes = 4096;
// The largest allGather slot accepted: bootstrap exchanges are small setup
// records; anything larger is a bug or a corrupt stream.
constexpr size_t kMaxSlotBytes = size_t{64} << 20;

enum class MsgType : uint16_t {
  kHello = 1,
  kAddressTable = 2,
  kError = 3,
  kRingHello = 4,
  kData = 5,
};

struct FrameHeader {
  MsgType type = MsgType::kHello;
  uint32_t length = 0;
};

struct Hello {
  Secret secret{};
  int32_t rank = 0;
  int32_t nranks = 0;
  SockAddr listenAddress;
};

struct RingHello {
  Secret secret{};
  int32_t rank = 0;
  int32_t nranks = 0;
};

// What the root tells a rank instead of the table: the code (kTimeout for
// missing ranks, kRemoteError for a rejected hello) and a full message.
struct RemoteError {
  Code code = Code::kRemoteError;
  std::string text;
};

void encodeHeader(MsgType type, uint32_t length, uint8_t out[kFrameHeaderBytes]);
// Checks magic, version, type and the type's payload length limit.
Result<FrameHeader> decodeHeader(const uint8_t in[kFrameHeaderBytes]);

std::vector<uint8_t> encodeHello(const Hello& hello);
Result<Hello> decodeHello(const std::vector<uint8_t>& payload);
std::vector<uint8_t> encodeRingHello(const RingHello& hello);
Result<RingHello> decodeRingHello(const std::vector<uint8_t>& payload);
std::vector<uint8_t> encodeAddressTable(const std::vector<SockAddr>& table);
// Fails unless the table has exactly `expectedCount` valid addresses.
Result<std::vector<SockAddr>> decodeAddressTable(const std::vector<uint8_t>& payload,
                                                 int expectedCount);
std::vector<uint8_t> encodeRemoteError(const RemoteError& error);
Result<RemoteError> decodeRemoteError(const std::vector<uint8_t>& payload);

// Compares secrets in time independent of where they differ.
bool secretsEqual(const Secret& a, const Secret& b);

struct Frame {
  MsgType type = MsgType::kHello;
  std::vector<uint8_t> payload;
};

// Sends one control frame (header and payload).
Status sendFrame(int fd, MsgType type, const std::vector<uint8_t>& payload,
                 const WaitContext& wait, const std::string& what);
// Receives one control frame (anything but kData); malformed headers fail
// before the payload is read.
Result<Frame> recvFrame(int fd, const WaitContext& wait, const std::string& what);

}  // namespace loom::bootstrap
