// On a machine without RDMA hardware (this one: the kernel has no
// InfiniBand), the libibverbs backend reports no device, the "ib" factory
// refuses every peer, and it says why in exactly one log line. Skipped, with
// the reason, where a device exists or Loom was built without libibverbs.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "transports/verbs/device_probe.h"
#include "transports/verbs/emulated_verbs.h"
#include "transports/verbs/verbs_transport.h"
#ifdef LOOM_HAVE_VERBS
#include "transports/verbs/ibv_provider.h"
#endif

namespace loom::transport::verbs {
namespace {

PeerInfo hostPeer(int rank, uint64_t host) {
  PeerInfo p;
  p.rank = rank;
  p.hostHash = host;
  std::snprintf(p.hostName, sizeof p.hostName, "host%llu", static_cast<unsigned long long>(host));
  return p;
}

// Log lines written through a Logger at `level` while `fn` runs.
template <class Fn>
std::string captureLog(LogLevel level, Fn&& fn) {
  std::FILE* sink = std::tmpfile();
  LogSettings settings;
  settings.level = level;
  settings.sink = sink;
  fn(Logger(settings, 0));
  std::fflush(sink);
  std::rewind(sink);
  std::string text;
  char buf[512];
  while (std::fgets(buf, sizeof buf, sink)) text += buf;
  std::fclose(sink);
  return text;
}

int countLines(const std::string& text) {
  int n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

TEST(VerbsRealDevice, LibibverbsFindsNoDeviceHere) {
#ifndef LOOM_HAVE_VERBS
  GTEST_SKIP() << "built without libibverbs (install libibverbs-dev): the real backend is not compiled";
#else
  auto provider = ibvProvider();
  const std::string why = provider->probe();
  if (why.empty()) GTEST_SKIP() << "this machine has an RDMA device with an active port; nothing to refuse";
  EXPECT_EQ(why.rfind("no RDMA device", 0), 0u) << why;
  std::printf("[ info ] libibverbs says: %s\n", why.c_str());
  auto device = provider->openDevice();
  ASSERT_FALSE(device.isOk());
  EXPECT_EQ(device.status().code(), Code::kSystemError);
  EXPECT_EQ(device.status().message(), why);
#endif
}

TEST(VerbsRealDevice, FactoryRefusesEveryPeerWithoutADevice) {
  const std::string why = defaultVerbsProvider()->probe();
  if (why.empty()) GTEST_SKIP() << "this machine has an RDMA device; the factory would accept other hosts";
  const TransportFactory& f = verbsTransportFactory();
  EXPECT_STREQ(f.name, "ib");
  Config config;
  EXPECT_FALSE(f.canConnect(hostPeer(0, 1), hostPeer(1, 2), config)) << "other host, no device";
  EXPECT_FALSE(f.canConnect(hostPeer(0, 1), hostPeer(1, 1), config)) << "same host";
  config.transport = "ib";
  EXPECT_FALSE(f.canConnect(hostPeer(0, 1), hostPeer(1, 1), config)) << "forced, still no device";
  // A one-rank communicator connects without touching the device.
  auto t = f.create();
  SetupContext ctx;
  ctx.config = &config;
  Status s = t->connect(ctx, {});
  EXPECT_TRUE(s.isOk()) << s.message();
  // Opening it for real peers fails with the reason, not a crash.
  auto t2 = f.create();
  std::vector<PeerInfo> peers = {hostPeer(0, 1), hostPeer(1, 2)};
  SetupContext two;
  two.nranks = 2;
  two.peers = &peers;
  two.config = &config;
  // No bootstrap: connect() must fail on its arguments before any exchange.
  EXPECT_FALSE(t2->connect(two, {1}).isOk());
}

TEST(VerbsRealDevice, NoDeviceIsLoggedOnceAtInfoOrWarnWhenForced) {
  // A probe of our own (the factory's is process-wide and may have logged already).
  std::string reason = defaultVerbsProvider()->probe();
  if (reason.empty()) GTEST_SKIP() << "this machine has an RDMA device: nothing to log";
  DeviceProbe probe(defaultVerbsProvider());
  Config config;
  std::string info = captureLog(LogLevel::kInfo, [&](const Logger& log) {
    for (int i = 0; i < 3; ++i) EXPECT_FALSE(probe.available(log, false));
  });
  EXPECT_EQ(countLines(info), 1) << info;
  EXPECT_NE(info.find("INFO"), std::string::npos) << info;
  EXPECT_NE(info.find("verbs: " + reason + "; skipping"), std::string::npos) << info;
  std::printf("[ info ] logged: %s", info.c_str());
  // At the default level (WARN) the unforced case is silent.
  DeviceProbe quiet(defaultVerbsProvider());
  EXPECT_EQ(captureLog(LogLevel::kWarn, [&](const Logger& log) { EXPECT_FALSE(quiet.available(log, false)); }), "");
  // Forcing LOOM_TRANSPORT=ib makes it a warning.
  std::string warn = captureLog(LogLevel::kWarn, [&](const Logger& log) {
    for (int i = 0; i < 2; ++i) EXPECT_FALSE(probe.available(log, true));
  });
  EXPECT_EQ(countLines(warn), 1) << warn;
  EXPECT_NE(warn.find("WARN"), std::string::npos) << warn;
  EXPECT_NE(warn.find("LOOM_TRANSPORT=ib"), std::string::npos) << warn;
}

TEST(VerbsRealDevice, FactoryRuleAcceptsOtherHostsWhenADeviceExists) {
  // The same rule with the emulated fabric's device (which always exists).
  auto fabric = emulated::Fabric::create();
  DeviceProbe probe(fabric->provider(0));
  Config config;
  EXPECT_TRUE(canConnectWith(probe, hostPeer(0, 1), hostPeer(1, 2), config));
  EXPECT_FALSE(canConnectWith(probe, hostPeer(0, 1), hostPeer(1, 1), config)) << "same host: shared memory";
  config.transport = "ib";
  EXPECT_TRUE(canConnectWith(probe, hostPeer(0, 1), hostPeer(1, 1), config)) << "forced";
  config.transport = "tcp";
  EXPECT_FALSE(canConnectWith(probe, hostPeer(0, 1), hostPeer(1, 2), config)) << "another transport forced";
}

}  // namespace
}  // namespace loom::transport::verbs
