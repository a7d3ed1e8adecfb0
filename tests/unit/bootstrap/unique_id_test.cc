// UniqueId serialization and job secrets.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <random>

#include "bootstrap/bootstrap.h"

namespace loom::bootstrap {
namespace {

Secret countingSecret() {
  Secret s{};
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<uint8_t>(0x10 * i + 0x0F - i);
  return s;
}

// Hex written independently of the library (snprintf).
std::string referenceHex(const uint8_t* p, size_t n) {
  std::string out;
  char buf[3];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof(buf), "%02x", p[i]);
    out += buf;
  }
  return out;
}

TEST(UniqueId, RoundTripIpv4AndIpv6) {
  for (const char* host : {"10.1.2.3", "127.0.0.1", "::1", "fd00:1234::abcd"}) {
    UniqueId id;
    id.rootHost = host;
    id.rootPort = 29500;
    id.secret = countingSecret();
    char raw[kUniqueIdBytes];
    std::memset(raw, 0x55, sizeof(raw));
    id.serialize(raw);
    Result<UniqueId> back = UniqueId::parse(raw);
    ASSERT_TRUE(back.isOk()) << host << ": " << back.status().message();
    EXPECT_EQ(back.value().rootHost, host);
    EXPECT_EQ(back.value().rootPort, 29500);
    EXPECT_EQ(back.value().secret, id.secret);
  }
}

TEST(UniqueId, JobTagIsFirstEightSecretBytesInHex) {
  UniqueId id;
  id.secret = countingSecret();
  EXPECT_EQ(id.jobTag(), referenceHex(id.secret.data(), 8));
  EXPECT_EQ(id.jobTag().size(), 16u);
}

TEST(UniqueId, GarbageIsInvalidArgument) {
  char zeros[kUniqueIdBytes] = {0};
  Result<UniqueId> r = UniqueId::parse(zeros);
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("unique id"), std::string::npos);

  std::mt19937 rng(12345);
  for (int trial = 0; trial < 100; ++trial) {
    char junk[kUniqueIdBytes];
    for (char& c : junk) c = static_cast<char>(rng());
    Result<UniqueId> j = UniqueId::parse(junk);
    ASSERT_FALSE(j.isOk());
    EXPECT_EQ(j.status().code(), Code::kInvalidArgument);
  }
}

TEST(UniqueId, EveryFlippedBitIsDetected) {
  UniqueId id;
  id.rootHost = "192.168.7.9";
  id.rootPort = 4242;
  id.secret = countingSecret();
  char raw[kUniqueIdBytes];
  id.serialize(raw);
  for (size_t byte = 0; byte < kUniqueIdBytes; ++byte) {
    for (int bit = 0; bit < 8; bit += 3) {
      char copy[kUniqueIdBytes];
      std::memcpy(copy, raw, sizeof(copy));
      copy[byte] = static_cast<char>(copy[byte] ^ (1 << bit));
      Result<UniqueId> r = UniqueId::parse(copy);
      EXPECT_FALSE(r.isOk()) << "flip of byte " << byte << " bit " << bit << " went unnoticed";
      if (!r.isOk()) {
        EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
      }
    }
  }
}

TEST(UniqueId, NonNumericHostOrPortZeroRejected) {
  char raw[kUniqueIdBytes];
  UniqueId bad;
  bad.rootHost = "example.com";  // a name would need DNS: never accepted
  bad.rootPort = 80;
  bad.serialize(raw);
  Result<UniqueId> r = UniqueId::parse(raw);
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("example.com"), std::string::npos) << r.status().message();

  bad.rootHost = "10.0.0.1";
  bad.rootPort = 0;
  bad.serialize(raw);
  r = UniqueId::parse(raw);
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("port"), std::string::npos) << r.status().message();
}

TEST(Secret, HexRoundTripAcceptsBothCases) {
  Result<Secret> s = parseSecret("00112233445566778899AaBbCcDdEeFf");
  ASSERT_TRUE(s.isOk()) << s.status().message();
  for (size_t i = 0; i < 16; ++i) EXPECT_EQ(s.value()[i], static_cast<uint8_t>(0x11 * i));
  EXPECT_EQ(secretToHex(s.value()), "00112233445566778899aabbccddeeff");
  Secret c = countingSecret();
  EXPECT_EQ(secretToHex(c), referenceHex(c.data(), c.size()));
  Result<Secret> back = parseSecret(secretToHex(c));
  ASSERT_TRUE(back.isOk());
  EXPECT_EQ(back.value(), c);
}

TEST(Secret, MalformedHexNamesTheProblem) {
  struct Case {
    std::string text;
    std::string expect;
  };
  const Case cases[] = {
      {"", "got 0 characters"},
      {std::string(31, 'a'), "got 31 characters"},
      {std::string(33, 'a'), "got 33 characters"},
      {"00112g33445566778899aabbccddeeff", "'g' at position 5"},
      {"0011223344556677889 aabbccddeeff", "' ' at position 19"},
  };
  for (const Case& c : cases) {
    Result<Secret> r = parseSecret(c.text);
    ASSERT_FALSE(r.isOk()) << c.text;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status().message();
  }
}

TEST(Secret, RandomSecretsDiffer) {
  Secret a = randomSecret();
  Secret b = randomSecret();
  EXPECT_NE(a, b);
  EXPECT_NE(a, Secret{});
}

}  // namespace
}  // namespace loom::bootstrap
