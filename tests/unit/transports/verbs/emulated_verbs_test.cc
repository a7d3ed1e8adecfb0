// The emulated verbs fabric behaves like RC verbs where the transport
// depends on it: the QP state machine, RDMA write with immediate, key and
// range checks, RNR, CQ capacity, flushes and the completion channel.
#include <gtest/gtest.h>
#include <poll.h>

#include <cstring>
#include <vector>

#include "transports/verbs/emulated_verbs.h"

namespace loom::transport::verbs {
namespace {

using emulated::Fabric;

// One device with its PD and CQ (a "host").
struct Host {
  std::unique_ptr<Device> device;
  std::unique_ptr<ProtectionDomain> pd;
  std::unique_ptr<CompletionQueue> cq;
  std::vector<char> memory = std::vector<char>(8192, 0);
  MemoryRegion mr;
};

Host openHost(Fabric& fabric, int index, int cqCapacity = 64, uint32_t access = kAccessLocalWrite | kAccessRemoteWrite) {
  Host h;
  h.device = std::move(fabric.provider(index)->openDevice()).value();
  h.pd = std::move(h.device->allocPd()).value();
  h.cq = std::move(h.device->createCq(cqCapacity)).value();
  h.mr = std::move(h.pd->registerMemory(h.memory.data(), h.memory.size(), access)).value();
  return h;
}

std::unique_ptr<QueuePair> makeQp(Host& h) {
  return std::move(h.pd->createRcQp(*h.cq, *h.cq, {8, 8})).value();
}

RemoteQp remoteOf(const Host& h, const QueuePair& qp, uint32_t psn) {
  RemoteQp r;
  r.qpn = qp.qpn();
  r.psn = psn;
  r.lid = h.device->port().lid;
  return r;
}

// a <-> b connected, a sending from PSN 100, b from PSN 200.
void connectPair(Host& a, QueuePair& qa, Host& b, QueuePair& qb) {
  ASSERT_TRUE(qa.toInit(1, kAccessRemoteWrite | kAccessLocalWrite).isOk());
  ASSERT_TRUE(qb.toInit(1, kAccessRemoteWrite | kAccessLocalWrite).isOk());
  ASSERT_TRUE(qa.toRtr(a.device->port(), remoteOf(b, qb, 200)).isOk());
  ASSERT_TRUE(qb.toRtr(b.device->port(), remoteOf(a, qa, 100)).isOk());
  ASSERT_TRUE(qa.toRts(100).isOk());
  ASSERT_TRUE(qb.toRts(200).isOk());
}

RdmaWrite writeOf(Host& from, Host& to, size_t offset, uint32_t length, uint32_t imm, bool withImm = true) {
  RdmaWrite w;
  w.wrId = 77;
  w.localAddr = from.memory.data();
  w.length = length;
  w.lkey = from.mr.lkey;
  w.remoteAddr = reinterpret_cast<uint64_t>(to.memory.data()) + offset;
  w.rkey = to.mr.rkey;
  w.withImm = withImm;
  w.imm = imm;
  return w;
}

std::vector<WorkCompletion> drain(CompletionQueue& cq) {
  std::vector<WorkCompletion> out(64);
  auto n = cq.poll(out.data(), 64);
  EXPECT_TRUE(n.isOk()) << n.status().message();
  out.resize(n.isOk() ? static_cast<size_t>(n.value()) : 0);
  return out;
}

TEST(EmulatedVerbs, QueuePairStateMachine) {
  auto fabric = Fabric::create();
  Host a = openHost(*fabric, 0), b = openHost(*fabric, 1);
  auto qa = makeQp(a), qb = makeQp(b);
  EXPECT_EQ(qa->state(), QpState::kReset);
  EXPECT_FALSE(qa->postWrite(writeOf(a, b, 0, 8, 1)).isOk()) << "post in RESET";
  EXPECT_FALSE(qa->postRecv(1).isOk()) << "receive in RESET";
  EXPECT_FALSE(qa->toRtr(a.device->port(), remoteOf(b, *qb, 0)).isOk()) << "RESET -> RTR skips INIT";
  EXPECT_FALSE(qa->toRts(0).isOk());
  ASSERT_TRUE(qa->toInit(1, kAccessRemoteWrite).isOk());
  EXPECT_FALSE(qa->toInit(1, kAccessRemoteWrite).isOk()) << "INIT twice";
  EXPECT_FALSE(qa->postWrite(writeOf(a, b, 0, 8, 1)).isOk()) << "post in INIT";
  EXPECT_TRUE(qa->postRecv(1).isOk()) << "receives may be posted from INIT";
  ASSERT_TRUE(qa->toRtr(a.device->port(), remoteOf(b, *qb, 0)).isOk());
  EXPECT_EQ(qa->state(), QpState::kRtr);
  EXPECT_FALSE(qa->postWrite(writeOf(a, b, 0, 8, 1)).isOk()) << "post in RTR";
  ASSERT_TRUE(qa->toRts(0).isOk());
  EXPECT_EQ(qa->state(), QpState::kRts);
  ASSERT_TRUE(qa->toError().isOk());
  EXPECT_EQ(qa->state(), QpState::kError);
  auto wcs = drain(*a.cq);
  ASSERT_EQ(wcs.size(), 1u) << "the posted receive is flushed";
  EXPECT_EQ(wcs[0].status, WcStatus::kWrFlushError);
  // Posting to a QP in error completes with a flush instead of failing.
  EXPECT_TRUE(qa->postWrite(writeOf(a, b, 0, 8, 1)).isOk());
  wcs = drain(*a.cq);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kWrFlushError);
}

TEST(EmulatedVerbs, WriteWithImmediateCopiesAndCompletesBothSides) {
  auto fabric = Fabric::create();
  Host a = openHost(*fabric, 0), b = openHost(*fabric, 1);
  auto qa = makeQp(a), qb = makeQp(b);
  connectPair(a, *qa, b, *qb);
  ASSERT_TRUE(qb->postRecv(5).isOk());
  for (int i = 0; i < 100; ++i) a.memory[static_cast<size_t>(i)] = static_cast<char>(i * 3);
  ASSERT_TRUE(qa->postWrite(writeOf(a, b, 4096, 100, 0xabcdef)).isOk());
  for (int i = 0; i < 100; ++i) ASSERT_EQ(b.memory[4096 + static_cast<size_t>(i)], static_cast<char>(i * 3));
  auto sent = drain(*a.cq);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].status, WcStatus::kSuccess);
  EXPECT_EQ(sent[0].opcode, WcOpcode::kRdmaWrite);
  EXPECT_EQ(sent[0].wrId, 77u);
  auto got = drain(*b.cq);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].opcode, WcOpcode::kRecvRdmaWithImm);
  EXPECT_EQ(got[0].wrId, 5u);
  EXPECT_EQ(got[0].imm, 0xabcdefu);
  EXPECT_EQ(got[0].byteLen, 100u);
  EXPECT_EQ(got[0].qpNum, qb->qpn());
  // A plain write (no immediate) needs no receive and raises no completion there.
  ASSERT_TRUE(qa->postWrite(writeOf(a, b, 0, 0, 0, false)).isOk());
  EXPECT_EQ(drain(*b.cq).size(), 0u);
  EXPECT_EQ(drain(*a.cq).size(), 1u);
}

TEST(EmulatedVerbs, BadRemoteKeyRangeOrRightsIsARemoteAccessError) {
  auto fabric = Fabric::create();
  struct Case {
    const char* name;
    uint32_t rkeyDelta;
    size_t offset;
    uint32_t access;
  };
  for (const Case& c : {Case{"bad rkey", 1000, 0, kAccessLocalWrite | kAccessRemoteWrite},
                        Case{"out of range", 0, 8192 - 10, kAccessLocalWrite | kAccessRemoteWrite},
                        Case{"no remote write right", 0, 0, kAccessLocalWrite}}) {
    Host a = openHost(*fabric, 0), b = openHost(*fabric, 1, 64, c.access);
    auto qa = makeQp(a), qb = makeQp(b);
    connectPair(a, *qa, b, *qb);
    ASSERT_TRUE(qb->postRecv(1).isOk());
    ASSERT_TRUE(qb->postRecv(2).isOk());
    RdmaWrite w = writeOf(a, b, c.offset, 64, 9);
    w.rkey += c.rkeyDelta;
    ASSERT_TRUE(qa->postWrite(w).isOk());
    auto sent = drain(*a.cq);
    ASSERT_EQ(sent.size(), 1u) << c.name;
    EXPECT_EQ(sent[0].status, WcStatus::kRemoteAccessError) << c.name;
    EXPECT_EQ(qa->state(), QpState::kError) << c.name;
    EXPECT_EQ(qb->state(), QpState::kError) << c.name;
    auto flushed = drain(*b.cq);
    ASSERT_EQ(flushed.size(), 2u) << c.name;
    for (const auto& wc : flushed) EXPECT_EQ(wc.status, WcStatus::kWrFlushError) << c.name;
    EXPECT_EQ(b.memory[c.offset], 0) << c.name << ": nothing may be written";
  }
}

TEST(EmulatedVerbs, BadLocalKeyIsALocalProtectionError) {
  auto fabric = Fabric::create();
  Host a = openHost(*fabric, 0), b = openHost(*fabric, 1);
  auto qa = makeQp(a), qb = makeQp(b);
  connectPair(a, *qa, b, *qb);
  ASSERT_TRUE(qb->postRecv(1).isOk());
  RdmaWrite w = writeOf(a, b, 0, 64, 9);
  w.lkey = b.mr.lkey;  // another PD's key
  ASSERT_TRUE(qa->postWrite(w).isOk());
  auto sent = drain(*a.cq);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].status, WcStatus::kLocalProtectionError);
}

TEST(EmulatedVerbs, WriteWithImmediateWithoutReceiveIsAnRnrError) {
  auto fabric = Fabric::create();
  Host a = openHost(*fabric, 0), b = openHost(*fabric, 1);
  auto qa = makeQp(a), qb = makeQp(b);
  connectPair(a, *qa, b, *qb);
  ASSERT_TRUE(qa->postWrite(writeOf(a, b, 0, 8, 1)).isOk());
  auto sent = drain(*a.cq);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].status, WcStatus::kRnrRetryExceeded);
  EXPECT_EQ(fabric->rnrErrors(), 1u);
  EXPECT_EQ(qa->state(), QpState::kError);
}

TEST(EmulatedVerbs, DeadPeerOrWrongPsnIsARetryError) {
  auto fabric = Fabric::create();
  {
    Host a = openHost(*fabric, 0), b = openHost(*fabric, 1);
    auto qa = makeQp(a), qb = makeQp(b);
    connectPair(a, *qa, b, *qb);
    fabric->killDevice(1);
    EXPECT_EQ(qb->state(), QpState::kError);
    ASSERT_TRUE(qa->postWrite(writeOf(a, b, 0, 0, 0, false)).isOk());
    auto sent = drain(*a.cq);
    ASSERT_EQ(sent.size(), 1u);
    EXPECT_EQ(sent[0].status, WcStatus::kRetryExceeded);
  }
  {
    Host a = openHost(*fabric, 2), b = openHost(*fabric, 3);
    auto qa = makeQp(a), qb = makeQp(b);
    ASSERT_TRUE(qa->toInit(1, kAccessRemoteWrite).isOk());
    ASSERT_TRUE(qb->toInit(1, kAccessRemoteWrite).isOk());
    ASSERT_TRUE(qa->toRtr(a.device->port(), remoteOf(b, *qb, 200)).isOk());
    ASSERT_TRUE(qb->toRtr(b.device->port(), remoteOf(a, *qa, 100)).isOk());
    ASSERT_TRUE(qa->toRts(101).isOk());  // not the PSN b expects
    ASSERT_TRUE(qa->postWrite(writeOf(a, b, 0, 0, 0, false)).isOk());
    auto sent = drain(*a.cq);
    ASSERT_EQ(sent.size(), 1u);
    EXPECT_EQ(sent[0].status, WcStatus::kRetryExceeded);
  }
}

TEST(EmulatedVerbs, CompletionQueueOverrunFailsEveryLaterPoll) {
  auto fabric = Fabric::create();
  Host a = openHost(*fabric, 0, /*cqCapacity=*/2), b = openHost(*fabric, 1);
  auto qa = makeQp(a), qb = makeQp(b);
  connectPair(a, *qa, b, *qb);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(qa->postWrite(writeOf(a, b, 0, 0, 0, false)).isOk());
  WorkCompletion wc[4];
  auto n = a.cq->poll(wc, 4);
  ASSERT_FALSE(n.isOk());
  EXPECT_NE(n.status().message().find("overrun"), std::string::npos) << n.status().message();
}

TEST(EmulatedVerbs, ArmedCompletionChannelBecomesReadable) {
  auto fabric = Fabric::create();
  Host a = openHost(*fabric, 0), b = openHost(*fabric, 1);
  auto qa = makeQp(a), qb = makeQp(b);
  connectPair(a, *qa, b, *qb);
  auto readable = [&](CompletionQueue& cq) {
    struct pollfd p{cq.eventFd(), POLLIN, 0};
    return ::poll(&p, 1, 0) == 1;
  };
  ASSERT_TRUE(qb->postRecv(1).isOk());
  ASSERT_TRUE(qa->postWrite(writeOf(a, b, 0, 8, 1)).isOk());
  EXPECT_FALSE(readable(*b.cq)) << "not armed: no event";
  drain(*b.cq);
  ASSERT_TRUE(b.cq->armNotify().isOk());
  ASSERT_TRUE(qb->postRecv(2).isOk());
  ASSERT_TRUE(qa->postWrite(writeOf(a, b, 0, 8, 2)).isOk());
  EXPECT_TRUE(readable(*b.cq));
  b.cq->drainEvents();
  EXPECT_FALSE(readable(*b.cq));
  EXPECT_EQ(drain(*b.cq).size(), 1u);
}

TEST(EmulatedVerbs, NoDeviceProviderSaysWhy) {
  auto p = emulated::noDeviceProvider("no RDMA device (test)");
  EXPECT_EQ(p->probe(), "no RDMA device (test)");
  auto d = p->openDevice();
  ASSERT_FALSE(d.isOk());
  EXPECT_EQ(d.status().code(), Code::kSystemError);
}

}  // namespace
}  // namespace loom::transport::verbs
