#include "src/comm/transport_policy.h"

#include <algorithm>
#include <cstring>

#include "common/format.h"

namespace loom::transport_policy {
namespace {

const transport::TransportFactory* builtIn(int slot, const std::vector<const transport::TransportFactory*>& backends) {
  for (const auto* f : backends)
    if (f && slotOf(f->name) == slot) return f;
  return nullptr;
}

bool disabled(const Config& config, const char* name) {
  return std::find(config.disabledTransports.begin(), config.disabledTransports.end(), name) !=
         config.disabledTransports.end();
}

std::string upper(const char* name) {
  std::string s = name;
  for (auto& c : s) c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
  return s;
}

std::string describe(const transport::PeerInfo& p) { return strprintf("rank %d (host %s)", p.rank, p.hostName); }

// One side's reason in words; `config` is that side's settings when known
// (the caller's own), else null and the setting is described, not quoted.
std::string reasonOf(Verdict v, int slot, const transport::PeerInfo& side, const transport::PeerInfo& other,
                     const Config* config, bool isBuiltIn) {
  const char* name = kPreference[slot];
  switch (v) {
    case Verdict::kWilling:
      return "";
    case Verdict::kUnreachable:
      if (!isBuiltIn) return "not built into this Loom";
      if (slot == slotOf("shm")) return "the ranks are on different hosts";
      return strprintf("%s cannot reach rank %d (no device or no route)", describe(side).c_str(), other.rank);
    case Verdict::kDisabled:
      return strprintf("LOOM_%s_DISABLE=1 on rank %d", upper(name).c_str(), side.rank);
    case Verdict::kNotChosen:
      if (config && !config->transport.empty())
        return strprintf("LOOM_TRANSPORT=%s on rank %d", config->transport.c_str(), side.rank);
      return strprintf("LOOM_TRANSPORT names another transport on rank %d", side.rank);
  }
  return "";
}

}  // namespace

int slotOf(const char* name) {
  for (int s = 0; s < kNumSlots; ++s)
    if (name && std::strcmp(name, kPreference[s]) == 0) return s;
  return -1;
}

Verdicts localVerdicts(const transport::PeerInfo& self, const transport::PeerInfo& peer, const Config& config,
                       const std::vector<const transport::TransportFactory*>& backends) {
  Verdicts out = 0;
  for (int slot = 0; slot < kNumSlots; ++slot) {
    const char* name = kPreference[slot];
    const auto* factory = builtIn(slot, backends);
    Verdict v = Verdict::kWilling;
    // The settings come first: they are what the user can change.
    if (!config.transport.empty() && config.transport != name) v = Verdict::kNotChosen;
    else if (disabled(config, name)) v = Verdict::kDisabled;
    else if (!factory || !factory->canConnect(self, peer, config)) v = Verdict::kUnreachable;
    out = static_cast<Verdicts>(out | (static_cast<unsigned>(v) << (2 * slot)));
  }
  return out;
}

int choosePair(Verdicts aOnB, Verdicts bOnA) {
  for (int slot = 0; slot < kNumSlots; ++slot)
    if (verdictOf(aOnB, slot) == Verdict::kWilling && verdictOf(bOnA, slot) == Verdict::kWilling) return slot;
  return -1;
}

Status explainRejection(const transport::PeerInfo& a, Verdicts aOnB, const Config* aConfig,
                        const transport::PeerInfo& b, Verdicts bOnA, const Config* bConfig,
                        const std::vector<const transport::TransportFactory*>& backends) {
  bool bySetting = false;
  std::string reasons;
  for (int slot = 0; slot < kNumSlots; ++slot) {
    const Verdict va = verdictOf(aOnB, slot), vb = verdictOf(bOnA, slot);
    const bool isBuiltIn = builtIn(slot, backends) != nullptr;
    const Config* known = aConfig ? aConfig : bConfig;
    std::string why;
    if (va == vb && va == Verdict::kNotChosen && known && !known->transport.empty() &&
        (!aConfig || !bConfig || aConfig->transport == bConfig->transport))
      why = strprintf("LOOM_TRANSPORT=%s", known->transport.c_str());
    else if (va == vb && va == Verdict::kDisabled)
      why = strprintf("LOOM_%s_DISABLE=1", upper(kPreference[slot]).c_str());
    else if (va == vb && va == Verdict::kUnreachable && (!isBuiltIn || slot == slotOf("shm")))
      why = reasonOf(va, slot, a, b, aConfig, isBuiltIn);
    else {
      std::string ra = reasonOf(va, slot, a, b, aConfig, isBuiltIn);
      std::string rb = reasonOf(vb, slot, b, a, bConfig, isBuiltIn);
      why = ra.empty() ? rb : rb.empty() ? ra : ra + " and " + rb;
    }
    bySetting = bySetting || va == Verdict::kDisabled || va == Verdict::kNotChosen || vb == Verdict::kDisabled ||
                vb == Verdict::kNotChosen;
    reasons += strprintf("%s%s: %s", reasons.empty() ? "" : "; ", kPreference[slot], why.c_str());
  }
  return makeError(bySetting ? Code::kInvalidUsage : Code::kSystemError,
                   "no transport can connect %s with %s: %s", describe(a).c_str(), describe(b).c_str(),
                   reasons.c_str());
}

Result<int> choose(const transport::PeerInfo& a, const transport::PeerInfo& b, const Config& config,
                   const std::vector<const transport::TransportFactory*>& backends) {
  const Verdicts aOnB = localVerdicts(a, b, config, backends);
  const Verdicts bOnA = localVerdicts(b, a, config, backends);
  const int slot = choosePair(aOnB, bOnA);
  if (slot >= 0) return slot;
  return explainRejection(a, aOnB, &config, b, bOnA, &config, backends);
}

}  // namespace loom::transport_policy
