// The per-pair transport choice (src/comm/transport_policy.h): preference,
// LOOM_TRANSPORT, LOOM_*_DISABLE, symmetry, error messages; and, end to end,
// communicator creation that the policy rejects (forked ranks on two emulated
// hosts via LOOM_HOST_ID).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "src/comm/transport_policy.h"
#include "loom/loom.h"
#include "transports/shm/shm_transport.h"
#include "transports/tcp/tcp_transport.h"

namespace loom {
namespace {

using transport::PeerInfo;
using transport::TransportFactory;
namespace policy = transport_policy;

PeerInfo peer(int rank, uint64_t host, const char* name) {
  PeerInfo p;
  p.rank = rank;
  p.hostHash = host;
  std::snprintf(p.hostName, sizeof p.hostName, "%s", name);
  return p;
}

// Stand-ins with the physical rules the real backends have: shm needs one
// host, ib needs a device (here: a host hash with bit 8 set on both sides),
// ucx and tcp reach anyone.
bool sameHost(const PeerInfo& a, const PeerInfo& b, const Config&) { return a.hostHash == b.hostHash; }
bool bothHaveDevice(const PeerInfo& a, const PeerInfo& b, const Config&) {
  return (a.hostHash & 0x100) && (b.hostHash & 0x100);
}
bool anyone(const PeerInfo&, const PeerInfo&, const Config&) { return true; }
std::unique_ptr<transport::Transport> noCreate() { return nullptr; }

const TransportFactory kShm{"shm", &sameHost, &noCreate};
const TransportFactory kIb{"ib", &bothHaveDevice, &noCreate};
const TransportFactory kUcx{"ucx", &anyone, &noCreate};
const TransportFactory kTcp{"tcp", &anyone, &noCreate};

const std::vector<const TransportFactory*> kAll = {&kTcp, &kUcx, &kShm, &kIb};  // order is irrelevant
const std::vector<const TransportFactory*> kShmTcp = {&kTcp, &kShm};

std::string chosen(const PeerInfo& a, const PeerInfo& b, const Config& c,
                   const std::vector<const TransportFactory*>& backends) {
  auto r = policy::choose(a, b, c, backends);
  return r.isOk() ? policy::kPreference[r.value()] : "error: " + r.status().message();
}

Config withTransport(const char* t) {
  Config c;
  c.transport = t;
  return c;
}

Config withDisabled(std::vector<std::string> names) {
  Config c;
  c.disabledTransports = std::move(names);
  return c;
}

const PeerInfo kA0 = peer(0, 1, "hostA"), kA1 = peer(1, 1, "hostA"), kB2 = peer(2, 2, "hostB");
const PeerInfo kIbA = peer(0, 0x101, "ibA"), kIbB = peer(1, 0x102, "ibB");

TEST(TransportPolicy, DefaultPreference) {
  Config c;
  EXPECT_EQ(chosen(kA0, kA1, c, kAll), "shm");      // same host
  EXPECT_EQ(chosen(kIbA, kIbB, c, kAll), "ib");     // other host, both have a device
  EXPECT_EQ(chosen(kA0, kB2, c, kAll), "ucx");      // no device: ucx when built in
  EXPECT_EQ(chosen(kA0, kB2, c, kShmTcp), "tcp");   // else tcp
  EXPECT_EQ(chosen(kIbA, kB2, c, kAll), "ucx");     // a device on one side only is no device
  EXPECT_EQ(chosen(kA0, kA1, c, kShmTcp), "shm");
}

TEST(TransportPolicy, ForcedTransport) {
  EXPECT_EQ(chosen(kA0, kA1, withTransport("tcp"), kAll), "tcp");
  EXPECT_EQ(chosen(kA0, kB2, withTransport("tcp"), kAll), "tcp");
  EXPECT_EQ(chosen(kIbA, kIbB, withTransport("ucx"), kAll), "ucx");
  EXPECT_EQ(chosen(kA0, kA1, withTransport("shm"), kAll), "shm");
}

TEST(TransportPolicy, DisabledTransportsFallBack) {
  EXPECT_EQ(chosen(kA0, kA1, withDisabled({"shm"}), kAll), "ucx");  // network transports serve one host too
  EXPECT_EQ(chosen(kA0, kA1, withDisabled({"shm"}), kShmTcp), "tcp");
  EXPECT_EQ(chosen(kIbA, kIbB, withDisabled({"ib"}), kAll), "ucx");
  EXPECT_EQ(chosen(kIbA, kIbB, withDisabled({"ib", "ucx"}), kAll), "tcp");
  EXPECT_EQ(chosen(kA0, kB2, withDisabled({"tcp"}), kAll), "ucx");
}

TEST(TransportPolicy, ShmAcrossHostsIsRejectedNamingRanksHostsAndReasons) {
  auto r = policy::choose(kA0, kB2, withTransport("shm"), kShmTcp);
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), Code::kInvalidUsage);
  const std::string m = r.status().message();
  EXPECT_NE(m.find("rank 0 (host hostA)"), std::string::npos) << m;
  EXPECT_NE(m.find("rank 2 (host hostB)"), std::string::npos) << m;
  EXPECT_NE(m.find("shm: the ranks are on different hosts"), std::string::npos) << m;
  EXPECT_NE(m.find("tcp: LOOM_TRANSPORT=shm"), std::string::npos) << m;
  EXPECT_NE(m.find("ucx: LOOM_TRANSPORT=shm"), std::string::npos) << m;  // a setting is named before the build
}

TEST(TransportPolicy, EverythingDisabledIsRejected) {
  auto r = policy::choose(kA0, kA1, withDisabled({"shm", "ib", "ucx", "tcp"}), kAll);
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), Code::kInvalidUsage);
  EXPECT_NE(r.status().message().find("tcp: LOOM_TCP_DISABLE=1"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("shm: LOOM_SHM_DISABLE=1"), std::string::npos) << r.status().message();
}

TEST(TransportPolicy, UnreachableIsASystemError) {
  // Only shm built in and the peer on another host: nothing a setting could change.
  const std::vector<const TransportFactory*> shmOnly = {&kShm};
  auto r = policy::choose(kA0, kB2, Config{}, shmOnly);
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), Code::kSystemError);
  EXPECT_NE(r.status().message().find("tcp: not built into this Loom"), std::string::npos) << r.status().message();
  // A forced backend that cannot reach: ib without a device.
  auto ib = policy::choose(kA0, kB2, withTransport("ib"), kAll);
  ASSERT_FALSE(ib.isOk());
  EXPECT_NE(ib.status().message().find("ib: rank 0 (host hostA) cannot reach rank 2"), std::string::npos)
      << ib.status().message();
}

TEST(TransportPolicy, VerdictsEncodeEachReason) {
  Config c = withTransport("tcp");
  c.disabledTransports = {"tcp"};
  auto v = policy::localVerdicts(kA0, kA1, c, kShmTcp);
  EXPECT_EQ(policy::verdictOf(v, policy::slotOf("shm")), policy::Verdict::kNotChosen);
  EXPECT_EQ(policy::verdictOf(v, policy::slotOf("ib")), policy::Verdict::kNotChosen);
  EXPECT_EQ(policy::verdictOf(v, policy::slotOf("tcp")), policy::Verdict::kDisabled);
  auto plain = policy::localVerdicts(kA0, kB2, Config{}, kShmTcp);
  EXPECT_EQ(policy::verdictOf(plain, policy::slotOf("shm")), policy::Verdict::kUnreachable);
  EXPECT_EQ(policy::verdictOf(plain, policy::slotOf("ucx")), policy::Verdict::kUnreachable);
  EXPECT_EQ(policy::verdictOf(plain, policy::slotOf("tcp")), policy::Verdict::kWilling);
  EXPECT_EQ(policy::slotOf("nope"), -1);
}

// Both ends (and any third rank) get the same answer from the two verdicts,
// even when the two ranks' settings differ: every combination of settings
// below, over every pair of three hosts, in both orders.
TEST(TransportPolicy, ChoiceIsSymmetricWhateverEachSideSets) {
  std::vector<Config> configs = {Config{}, withTransport("tcp"), withTransport("shm"), withTransport("ucx"),
                                 withDisabled({"shm"}), withDisabled({"ucx"}), withDisabled({"tcp", "ucx"})};
  const PeerInfo ranks[] = {kA0, kA1, kB2, kIbA, kIbB};
  int compared = 0;
  for (const auto& ca : configs)
    for (const auto& cb : configs)
      for (const auto& a : ranks)
        for (const auto& b : ranks) {
          if (a.rank == b.rank && a.hostHash == b.hostHash) continue;
          const auto aOnB = policy::localVerdicts(a, b, ca, kAll), bOnA = policy::localVerdicts(b, a, cb, kAll);
          const int seenByA = policy::choosePair(aOnB, bOnA), seenByB = policy::choosePair(bOnA, aOnB);
          ASSERT_EQ(seenByA, seenByB);
          if (seenByA >= 0) {  // the chosen one is acceptable to both sides
            EXPECT_EQ(policy::verdictOf(aOnB, seenByA), policy::Verdict::kWilling);
            EXPECT_EQ(policy::verdictOf(bOnA, seenByA), policy::Verdict::kWilling);
          }
          ++compared;
        }
  EXPECT_EQ(compared, 7 * 7 * 20);  // settings x settings x ordered pairs of distinct ranks
  // Different settings on the two sides meet on what both accept: one side
  // forces tcp, the other would prefer shm on the shared host.
  auto fromA = policy::localVerdicts(kA0, kA1, withTransport("tcp"), kAll);
  auto fromB = policy::localVerdicts(kA1, kA0, Config{}, kAll);
  EXPECT_STREQ(policy::kPreference[policy::choosePair(fromA, fromB)], "tcp");
  // ...and when they cannot meet, the message says which rank set what.
  auto shmSide = policy::localVerdicts(kA1, kA0, withTransport("shm"), kAll);
  ASSERT_EQ(policy::choosePair(fromA, shmSide), -1);
  Config forcedTcp = withTransport("tcp");
  Status why = policy::explainRejection(kA0, fromA, &forcedTcp, kA1, shmSide, nullptr, kAll);
  EXPECT_NE(why.message().find("shm: LOOM_TRANSPORT=tcp on rank 0"), std::string::npos) << why.message();
  EXPECT_NE(why.message().find("tcp: LOOM_TRANSPORT names another transport on rank 1"), std::string::npos)
      << why.message();
}

// The real backends answer only "can I reach this peer".
TEST(TransportPolicy, RealFactoriesAnswerReachabilityOnly) {
  const auto& shm = transport::shmTransportFactory();
  const auto& tcp = transport::tcpTransportFactory();
  Config forcedShm = withTransport("shm");
  EXPECT_TRUE(shm.canConnect(kA0, kA1, Config{}));
  EXPECT_FALSE(shm.canConnect(kA0, kB2, Config{}));
  EXPECT_TRUE(tcp.canConnect(kA0, kA1, forcedShm));  // LOOM_TRANSPORT is the policy's, not tcp's
  EXPECT_TRUE(tcp.canConnect(kA0, kB2, Config{}));
  const std::vector<const TransportFactory*> real = {&tcp, &shm};
  EXPECT_EQ(chosen(kA0, kA1, Config{}, real), "shm");
  EXPECT_EQ(chosen(kA0, kB2, Config{}, real), "tcp");
  EXPECT_EQ(chosen(kA0, kA1, withTransport("tcp"), real), "tcp");
}

// End to end: two forked ranks on two emulated hosts (LOOM_HOST_ID) with a
// setting that leaves no transport; both fail loomCommInitRank with the code
// and a message naming both ranks and hosts.
struct RankOutcome {
  int result = -1;
  std::string message;
};

// Rank 0 makes the unique id after the fork and pipes it to rank 1, so this
// process runs no bootstrap root thread while it forks (a child would copy
// whatever lock that thread held at that instant).
std::vector<RankOutcome> initTwoHostRanks(const std::vector<std::pair<const char*, const char*>>& env) {
  std::vector<RankOutcome> out(2);
  int idPipe[2];
  if (pipe(idPipe) != 0) return out;
  std::vector<pid_t> pids;
  std::vector<int> readEnds;
  for (int rank = 0; rank < 2; ++rank) {
    int fds[2];
    if (pipe(fds) != 0) return out;
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      for (int fd : readEnds) close(fd);
      loomUniqueId id;
      if (rank == 0) {
        close(idPipe[0]);
        if (loomGetUniqueId(&id) != loomSuccess || write(idPipe[1], &id, sizeof id) != static_cast<ssize_t>(sizeof id))
          _exit(4);
        close(idPipe[1]);
      } else {
        close(idPipe[1]);
        if (read(idPipe[0], &id, sizeof id) != static_cast<ssize_t>(sizeof id)) _exit(5);
        close(idPipe[0]);
      }
      setenv("LOOM_HOST_ID", rank == 0 ? "policy-host-a" : "policy-host-b", 1);
      setenv("LOOM_TIMEOUT", "20", 1);
      for (const auto& [k, v] : env) setenv(k, v, 1);
      loomComm_t comm = nullptr;
      const loomResult_t r = loomCommInitRank(&comm, 2, id, rank);
      std::string msg = std::to_string(static_cast<int>(r)) + "\n" + (r == loomSuccess ? "" : loomGetLastError(nullptr));
      if (write(fds[1], msg.data(), msg.size()) < 0) _exit(3);
      if (comm) loomCommDestroy(comm);
      _exit(0);
    }
    close(fds[1]);
    pids.push_back(pid);
    readEnds.push_back(fds[0]);
  }
  close(idPipe[0]);
  close(idPipe[1]);
  for (int rank = 0; rank < 2; ++rank) {
    std::string text;
    char buf[512];
    ssize_t n;
    while ((n = read(readEnds[static_cast<size_t>(rank)], buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
    close(readEnds[static_cast<size_t>(rank)]);
    int status = 0;
    waitpid(pids[static_cast<size_t>(rank)], &status, 0);
    const auto nl = text.find('\n');
    if (nl != std::string::npos) {
      out[static_cast<size_t>(rank)].result = std::atoi(text.substr(0, nl).c_str());
      out[static_cast<size_t>(rank)].message = text.substr(nl + 1);
    }
  }
  return out;
}

TEST(TransportPolicyComm, ShmOnlyAcrossHostsFailsOnBothRanks) {
  auto out = initTwoHostRanks({{"LOOM_TRANSPORT", "shm"}});
  for (int rank = 0; rank < 2; ++rank) {
    const auto& o = out[static_cast<size_t>(rank)];
    EXPECT_EQ(o.result, loomInvalidUsage) << "rank " << rank << ": " << o.message;
    EXPECT_NE(o.message.find("rank 0 (host policy-host-a)"), std::string::npos) << o.message;
    EXPECT_NE(o.message.find("rank 1 (host policy-host-b)"), std::string::npos) << o.message;
    EXPECT_NE(o.message.find("shm: the ranks are on different hosts"), std::string::npos) << o.message;
  }
}

TEST(TransportPolicyComm, EverythingDisabledFailsOnBothRanks) {
  auto out = initTwoHostRanks({{"LOOM_SHM_DISABLE", "1"}, {"LOOM_IB_DISABLE", "1"}, {"LOOM_UCX_DISABLE", "1"},
                               {"LOOM_TCP_DISABLE", "1"}});
  for (int rank = 0; rank < 2; ++rank) {
    const auto& o = out[static_cast<size_t>(rank)];
    EXPECT_EQ(o.result, loomInvalidUsage) << "rank " << rank << ": " << o.message;
    EXPECT_NE(o.message.find("tcp: LOOM_TCP_DISABLE=1"), std::string::npos) << o.message;
  }
}

TEST(TransportPolicyComm, TwoHostsWithoutOverridesConnect) {
  auto out = initTwoHostRanks({{"LOOM_SOCKET_IFNAME", "lo"}});
  for (int rank = 0; rank < 2; ++rank)
    EXPECT_EQ(out[static_cast<size_t>(rank)].result, loomSuccess) << out[static_cast<size_t>(rank)].message;
}

}  // namespace
}  // namespace loom
