// The wire format: round trips and rejection of malformed input.
#include <gtest/gtest.h>

#include <cstring>

#include "bootstrap/wire.h"

namespace loom::bootstrap {
namespace {

SockAddr addr(const char* host, uint16_t port) {
  Result<SockAddr> a = SockAddr::fromNumeric(host, port);
  EXPECT_TRUE(a.isOk()) << host;
  return a.value();
}

// Writes a header by hand, so the test does not trust encodeHeader.
void rawHeader(uint8_t out[kFrameHeaderBytes], uint32_t magic, uint16_t version, uint16_t type, uint32_t length) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<uint8_t>(magic >> (8 * i));
  out[4] = static_cast<uint8_t>(version);
  out[5] = static_cast<uint8_t>(version >> 8);
  out[6] = static_cast<uint8_t>(type);
  out[7] = static_cast<uint8_t>(type >> 8);
  for (int i = 0; i < 4; ++i) out[8 + i] = static_cast<uint8_t>(length >> (8 * i));
}

TEST(Wire, HeaderIsLittleEndianAndRoundTrips) {
  uint8_t h[kFrameHeaderBytes];
  encodeHeader(MsgType::kAddressTable, 0x01020304u, h);
  const uint8_t expected[kFrameHeaderBytes] = {'L', 'O', 'O', 'M', 1, 0, 2, 0, 4, 3, 2, 1};
  // 0x01020304 exceeds the table limit, so only check the bytes here.
  EXPECT_EQ(std::memcmp(h, expected, sizeof(h)), 0);
  encodeHeader(MsgType::kData, 1000, h);
  Result<FrameHeader> d = decodeHeader(h);
  ASSERT_TRUE(d.isOk()) << d.status().message();
  EXPECT_EQ(d.value().type, MsgType::kData);
  EXPECT_EQ(d.value().length, 1000u);
}

TEST(Wire, HeaderRejectsBadMagicVersionTypeAndLength) {
  uint8_t h[kFrameHeaderBytes];
  struct Case {
    uint32_t magic;
    uint16_t version, type;
    uint32_t length;
    const char* expect;
  };
  const Case cases[] = {
      {0x54544548u, 1, 1, kHelloBytes, "magic"},
      {kFrameMagic, 2, 1, kHelloBytes, "version"},
      {kFrameMagic, 1, 99, 4, "unknown message type"},
      {kFrameMagic, 1, static_cast<uint16_t>(MsgType::kHello), kHelloBytes + 1, "length"},
      {kFrameMagic, 1, static_cast<uint16_t>(MsgType::kRingHello), 3, "length"},
      {kFrameMagic, 1, static_cast<uint16_t>(MsgType::kData), static_cast<uint32_t>(kMaxSlotBytes + 1), "length"},
      {kFrameMagic, 1, static_cast<uint16_t>(MsgType::kError), 1u << 30, "length"},
      {kFrameMagic, 1, static_cast<uint16_t>(MsgType::kAddressTable), 0xFFFFFFFFu, "length"},
  };
  for (const Case& c : cases) {
    rawHeader(h, c.magic, c.version, c.type, c.length);
    Result<FrameHeader> r = decodeHeader(h);
    ASSERT_FALSE(r.isOk()) << c.expect;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status().message();
  }
}

TEST(Wire, HelloRoundTripsBothFamilies) {
  for (const char* host : {"10.9.8.7", "::1"}) {
    Hello h;
    for (size_t i = 0; i < h.secret.size(); ++i) h.secret[i] = static_cast<uint8_t>(200 - i);
    h.rank = 5;
    h.nranks = 9;
    h.listenAddress = addr(host, 31337);
    std::vector<uint8_t> bytes = encodeHello(h);
    ASSERT_EQ(bytes.size(), kHelloBytes);
    Result<Hello> back = decodeHello(bytes);
    ASSERT_TRUE(back.isOk()) << back.status().message();
    EXPECT_EQ(back.value().secret, h.secret);
    EXPECT_EQ(back.value().rank, 5);
    EXPECT_EQ(back.value().nranks, 9);
    EXPECT_EQ(back.value().listenAddress.toString(), h.listenAddress.toString());
  }
}

TEST(Wire, HelloWithBadAddressRejected) {
  Hello h;
  h.listenAddress = addr("10.0.0.1", 7);
  std::vector<uint8_t> bytes = encodeHello(h);
  bytes[24] = 5;  // family tag
  EXPECT_FALSE(decodeHello(bytes).isOk());
  bytes[24] = 4;
  bytes[25] = bytes[26] = 0;  // port 0
  EXPECT_FALSE(decodeHello(bytes).isOk());
  bytes.pop_back();
  EXPECT_FALSE(decodeHello(bytes).isOk());
}

TEST(Wire, AddressTableChecksCountAndLength) {
  std::vector<SockAddr> table = {addr("127.0.0.1", 1000), addr("::1", 2000), addr("10.0.0.3", 3000)};
  std::vector<uint8_t> bytes = encodeAddressTable(table);
  EXPECT_EQ(bytes.size(), 4 + 3 * kWireAddressBytes);
  Result<std::vector<SockAddr>> back = decodeAddressTable(bytes, 3);
  ASSERT_TRUE(back.isOk()) << back.status().message();
  for (size_t i = 0; i < table.size(); ++i) EXPECT_EQ(back.value()[i].toString(), table[i].toString());

  Result<std::vector<SockAddr>> wrongCount = decodeAddressTable(bytes, 4);
  ASSERT_FALSE(wrongCount.isOk());
  EXPECT_NE(wrongCount.status().message().find("3 entries for 4 ranks"), std::string::npos);
  std::vector<uint8_t> shortBytes(bytes.begin(), bytes.end() - 1);
  EXPECT_FALSE(decodeAddressTable(shortBytes, 3).isOk());
  EXPECT_FALSE(decodeAddressTable({}, 0).isOk());
}

TEST(Wire, RemoteErrorRoundTripAndLimits) {
  Result<RemoteError> e = decodeRemoteError(encodeRemoteError({Code::kTimeout, "ranks 2,3 missing"}));
  ASSERT_TRUE(e.isOk());
  EXPECT_EQ(e.value().code, Code::kTimeout);
  EXPECT_EQ(e.value().text, "ranks 2,3 missing");
  // Codes other than timeout are reported as remote errors.
  std::vector<uint8_t> other = encodeRemoteError({Code::kInternalError, "x"});
  EXPECT_EQ(decodeRemoteError(other).value().code, Code::kRemoteError);
  std::vector<uint8_t> lying = encodeRemoteError({Code::kTimeout, "abc"});
  lying[4] = 200;  // text length beyond the payload
  EXPECT_FALSE(decodeRemoteError(lying).isOk());
}

TEST(Wire, SecretsCompare) {
  Secret a{};
  Secret b{};
  EXPECT_TRUE(secretsEqual(a, b));
  b[15] = 1;
  EXPECT_FALSE(secretsEqual(a, b));
}

}  // namespace
}  // namespace loom::bootstrap
