// LOOM_SOCKET_IFNAME parsing (NCCL_SOCKET_IFNAME syntax) and the choice of
// the listen address among a fixed list of candidates.
#include <gtest/gtest.h>

#include "transports/tcp/interface_select.h"

namespace loom::transport::tcp {
namespace {

InterfaceAddress candidate(const std::string& ifname, const std::string& host) {
  auto addr = bootstrap::SockAddr::fromNumeric(host, 0);
  EXPECT_TRUE(addr.isOk()) << host;
  return {ifname, addr.value()};
}

TEST(IfnameFilter, PrefixListMatchesNamesStartingWithAnEntry) {
  IfnameFilter f = IfnameFilter::parse("eth,ib");
  EXPECT_TRUE(f.matches("eth0"));
  EXPECT_TRUE(f.matches("eth"));
  EXPECT_TRUE(f.matches("ib1"));
  EXPECT_FALSE(f.matches("lo"));
  EXPECT_FALSE(f.matches("veth0"));  // prefix, not substring
}

TEST(IfnameFilter, CaretExcludesTheListedPrefixes) {
  IfnameFilter f = IfnameFilter::parse("^docker,lo");
  EXPECT_FALSE(f.matches("docker0"));
  EXPECT_FALSE(f.matches("lo"));
  EXPECT_TRUE(f.matches("eth0"));
  EXPECT_TRUE(f.matches("veth1"));
}

TEST(IfnameFilter, EqualsMakesNamesExact) {
  IfnameFilter f = IfnameFilter::parse("=eth0");
  EXPECT_TRUE(f.matches("eth0"));
  EXPECT_FALSE(f.matches("eth01"));
  EXPECT_FALSE(f.matches("eth"));
  IfnameFilter notExact = IfnameFilter::parse("^=eth0");
  EXPECT_FALSE(notExact.matches("eth0"));
  EXPECT_TRUE(notExact.matches("eth01"));
}

TEST(IfnameFilter, EmptyEntriesAreIgnored) {
  IfnameFilter f = IfnameFilter::parse("eth,,ib,");
  EXPECT_TRUE(f.matches("eth2"));
  EXPECT_TRUE(f.matches("ib0"));
  EXPECT_FALSE(f.matches("lo"));
}

TEST(SelectListenAddress, DefaultSkipsLoopbackAndDocker) {
  std::vector<InterfaceAddress> c = {candidate("lo", "127.0.0.1"), candidate("docker0", "172.17.0.1"),
                                     candidate("eth0", "10.1.2.3")};
  auto chosen = selectListenAddress("", c);
  ASSERT_TRUE(chosen.isOk()) << chosen.status().message();
  EXPECT_EQ(chosen->ifname, "eth0");
  EXPECT_EQ(chosen->addr.host(), "10.1.2.3");
}

TEST(SelectListenAddress, DefaultFallsBackToLoopback) {
  std::vector<InterfaceAddress> c = {candidate("docker0", "172.17.0.1"), candidate("lo", "127.0.0.1")};
  auto chosen = selectListenAddress("", c);
  ASSERT_TRUE(chosen.isOk()) << chosen.status().message();
  EXPECT_EQ(chosen->ifname, "lo");
}

TEST(SelectListenAddress, SpecPicksFirstMatchingCandidateIncludingIPv6) {
  std::vector<InterfaceAddress> c = {candidate("eth0", "10.1.2.3"), candidate("ib0", "fd00::5"),
                                     candidate("lo", "::1")};
  auto ib = selectListenAddress("ib", c);
  ASSERT_TRUE(ib.isOk()) << ib.status().message();
  EXPECT_EQ(ib->addr.family(), AF_INET6);
  EXPECT_EQ(ib->addr.host(), "fd00::5");
  auto notEth = selectListenAddress("^eth", c);
  ASSERT_TRUE(notEth.isOk());
  EXPECT_EQ(notEth->ifname, "ib0");
  auto lo = selectListenAddress("=lo", c);
  ASSERT_TRUE(lo.isOk());
  EXPECT_EQ(lo->addr.host(), "::1");
}

TEST(SelectListenAddress, NoMatchNamesTheSpecAndTheCandidates) {
  std::vector<InterfaceAddress> c = {candidate("eth0", "10.1.2.3")};
  auto chosen = selectListenAddress("ib", c);
  ASSERT_FALSE(chosen.isOk());
  EXPECT_NE(chosen.status().message().find("LOOM_SOCKET_IFNAME=\"ib\""), std::string::npos)
      << chosen.status().message();
  EXPECT_NE(chosen.status().message().find("eth0 10.1.2.3"), std::string::npos) << chosen.status().message();
}

TEST(ListInterfaceAddresses, LoopbackIsListedIPv4First) {
  auto all = listInterfaceAddresses();
  bool sawLo = false, sawV6 = false;
  for (const auto& c : all) {
    if (c.addr.family() == AF_INET6) sawV6 = true;
    else EXPECT_FALSE(sawV6) << "IPv4 address " << c.addr.host() << " listed after an IPv6 one";
    if (c.ifname == "lo" && c.addr.host() == "127.0.0.1") sawLo = true;
    EXPECT_EQ(c.addr.port(), 0);
  }
  if (all.empty()) GTEST_SKIP() << "getifaddrs lists no interface that is up";
  EXPECT_TRUE(sawLo) << "no 127.0.0.1 on lo";
}

}  // namespace
}  // namespace loom::transport::tcp
