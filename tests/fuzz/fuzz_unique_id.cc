// loomUniqueId's 128 bytes (UniqueId::parse) and LOOM_JOB_SECRET (parseSecret).
//
// Random bytes rarely pass the id's checksum, so when the first input byte is
// odd the target recomputes it (FNV-1a over bytes [0, 124), as the id format
// documents) to reach the field checks behind it. Property: an id that parses
// serializes back to the same 128 bytes.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "bootstrap/bootstrap.h"
#include "tests/fuzz/fuzz_check.h"

using namespace loom;
using namespace loom::bootstrap;

namespace {

void putChecksum(uint8_t* id) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < kUniqueIdBytes - 4; ++i) h = (h ^ id[i]) * 16777619u;
  for (int i = 0; i < 4; ++i) id[kUniqueIdBytes - 4 + i] = static_cast<uint8_t>(h >> (8 * i));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool fixChecksum = data[0] & 1;
  uint8_t id[kUniqueIdBytes] = {0};
  std::memcpy(id, data + 1, std::min(size - 1, kUniqueIdBytes));
  if (fixChecksum) putChecksum(id);
  Result<UniqueId> parsed = UniqueId::parse(reinterpret_cast<const char*>(id));
  if (parsed.isOk()) {
    char again[kUniqueIdBytes];
    parsed.value().serialize(again);
    FUZZ_CHECK(std::memcmp(again, id, kUniqueIdBytes) == 0);
    FUZZ_CHECK(parsed.value().rootPort != 0 && !parsed.value().rootHost.empty());
  }
  std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  if (Result<Secret> s = parseSecret(text); s.isOk()) {
    // Hex digits are case-insensitive; the canonical form is lower case.
    std::string lower = text;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    FUZZ_CHECK(secretToHex(s.value()) == lower);
  }
  return 0;
}
