// Writes the binary seed inputs of the fuzz targets with the real encoders,
// so the fuzzers start from valid messages and mutate them field by field.
// Usage: fuzz_seed_corpus <corpus dir>  (scripts/run_fuzz.sh --regen-seeds).
// The text targets' seeds (tuning file, config, options) are written by hand.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "algorithms/p2p_header.h"
#include "bootstrap/wire.h"
#include "transports/shm/shm_layout.h"

using namespace loom;
using namespace loom::bootstrap;

namespace {

std::string root;

void write(const std::string& target, const std::string& name, const std::vector<uint8_t>& bytes) {
  const std::string path = root + "/" + target + "/seed-" + name;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) {
    std::perror(path.c_str());
    std::exit(1);
  }
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

std::vector<uint8_t> frame(MsgType type, const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> out(kFrameHeaderBytes);
  encodeHeader(type, static_cast<uint32_t>(payload.size()), out.data());
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

Secret testSecret() {
  Secret s{};
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<uint8_t>(0xA0 + i);
  return s;
}

void wireSeeds() {
  const SockAddr v4 = SockAddr::fromNumeric("10.1.2.3", 29500).value();
  const SockAddr v6 = SockAddr::fromNumeric("fe80::1", 40000).value();
  const std::vector<uint8_t> hello = encodeHello({testSecret(), 1, 4, v4});
  const std::vector<uint8_t> ring = encodeRingHello({testSecret(), 2, 4});
  const std::vector<uint8_t> table = encodeAddressTable({v4, v6});
  const std::vector<uint8_t> error = encodeRemoteError({Code::kTimeout, "bootstrap: rank 3 of 4 never reached"});
  // The first byte of a decoder seed is the expected table size (mod 8).
  auto decoderSeed = [](uint8_t count, const std::vector<uint8_t>& payload) {
    std::vector<uint8_t> out{count};
    out.insert(out.end(), payload.begin(), payload.end());
    return out;
  };
  write("bootstrap_wire", "hello-frame", frame(MsgType::kHello, hello));
  write("bootstrap_wire", "ring-hello-frame", frame(MsgType::kRingHello, ring));
  write("bootstrap_wire", "table-frame", frame(MsgType::kAddressTable, table));
  write("bootstrap_wire", "error-frame", frame(MsgType::kError, error));
  std::vector<uint8_t> both = frame(MsgType::kHello, hello);
  std::vector<uint8_t> second = frame(MsgType::kAddressTable, table);
  both.insert(both.end(), second.begin(), second.end());
  write("bootstrap_wire", "two-frames", both);
  write("bootstrap_wire", "table-payload", decoderSeed(2, table));
  write("bootstrap_wire", "error-payload", decoderSeed(0, error));
}

void uniqueIdSeeds() {
  UniqueId id;
  id.rootHost = "127.0.0.1";
  id.rootPort = 29500;
  id.secret = testSecret();
  char bytes[kUniqueIdBytes];
  id.serialize(bytes);
  // Leading byte: 0 keeps the checksum as given, 1 lets the target fix it.
  for (uint8_t mode : {0, 1}) {
    std::vector<uint8_t> seed{mode};
    seed.insert(seed.end(), bytes, bytes + kUniqueIdBytes);
    write("unique_id", mode ? "v4-fixsum" : "v4", seed);
  }
  id.rootHost = "fe80::1%1";
  id.serialize(bytes);
  std::vector<uint8_t> seed{1};
  seed.insert(seed.end(), bytes, bytes + kUniqueIdBytes);
  write("unique_id", "v6-scope", seed);
  const std::string hex = secretToHex(testSecret());
  std::vector<uint8_t> secret{0};
  secret.insert(secret.end(), hex.begin(), hex.end());
  write("unique_id", "secret-hex", secret);
}

void shmSeeds() {
  using namespace loom::transport::shm;
  // nranks 4 (data[0] = 2), self 1, peer 0, slots 4 (data[3] = 2), chunk 256K (data[4] = 2).
  const uint32_t fifoCount = 3;
  const SegmentGeometry g = SegmentGeometry::compute(fifoCount, 4, 256 * 1024);
  std::vector<uint8_t> seed{2, 1, 0, 2, 2};
  const uint64_t fileScale = g.totalBytes >> 12;
  for (int i = 0; i < 3; ++i) seed.push_back(static_cast<uint8_t>(fileScale >> (8 * i)));
  const SegmentHeader h = makeSegmentHeader(g, 0, fifoCount);
  const auto* hp = reinterpret_cast<const uint8_t*>(&h);
  seed.insert(seed.end(), hp, hp + sizeof h);
  const int senders[] = {1, 2, 3};
  for (uint32_t i = 0; i < fifoCount; ++i) {
    FifoEntry e{senders[i], 0, g.headerBytes + i * g.fifoBytes};
    const auto* ep = reinterpret_cast<const uint8_t*>(&e);
    seed.insert(seed.end(), ep, ep + sizeof e);
  }
  write("shm_header", "nranks4-peer0", seed);
}

void p2pSeeds() {
  for (uint64_t bytes : {uint64_t{0}, uint64_t{100}, uint64_t{1} << 40}) {
    std::vector<uint8_t> seed(8);
    std::memcpy(seed.data(), &bytes, 8);
    std::byte header[algo::kP2PHeaderBytes];
    algo::encodeP2PHeader(bytes, header);
    const auto* hp = reinterpret_cast<const uint8_t*>(header);
    seed.insert(seed.end(), hp, hp + sizeof header);
    for (int i = 0; i < 8; ++i) seed.push_back(static_cast<uint8_t>(i));
    write("p2p_header", "size-" + std::to_string(bytes), seed);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus dir with one folder per target>\n", argv[0]);
    return 2;
  }
  root = argv[1];
  wireSeeds();
  uniqueIdSeeds();
  shmSeeds();
  p2pSeeds();
  return 0;
}
