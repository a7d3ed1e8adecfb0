#include "shim/nccl/nccl_env.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "common/config.h"
#include "common/format.h"
#include "common/log.h"

extern char** environ;

namespace loom::nccl_shim {
namespace {

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}
std::string upper(std::string text) {
  for (char& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return text;
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  size_t begin = 0;
  while (true) {
    const size_t end = text.find(separator, begin);
    parts.push_back(text.substr(begin, end == std::string::npos ? std::string::npos : end - begin));
    if (end == std::string::npos) return parts;
    begin = end + 1;
  }
}

std::string joined(const std::vector<std::string>& parts, char separator) {
  std::string out;
  for (const std::string& part : parts) {
    if (!out.empty()) out += separator;
    out += part;
  }
  return out;
}

bool parseLong(const std::string& text, long* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (*end != '\0') return false;
  *out = value;
  return true;
}

// NCCL_BUFFSIZE: bytes, with an optional K/M/G suffix as Loom's sizes take.
bool parseBytes(const std::string& text, unsigned long long* out) {
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return false;
  char* end = nullptr;
  unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  unsigned long long scale = 1;
  if (*end == 'K' || *end == 'k') scale = 1ull << 10, ++end;
  else if (*end == 'M' || *end == 'm') scale = 1ull << 20, ++end;
  else if (*end == 'G' || *end == 'g') scale = 1ull << 30, ++end;
  if (*end != '\0' || value > ~0ull / scale) return false;
  *out = value * scale;
  return true;
}

// NCCL_ALGO and NCCL_PROTO: "A,B", "^A", or per collective "allreduce:A,B;broadcast:^C".
// `names` maps NCCL's lower-case names to Loom's; `meaningless` lists
// NCCL's names Loom has nothing for (warned as such, not as typos).
std::string translateNameList(const char* variable, const std::string& value,
                              const std::map<std::string, std::string>& names,
                              const std::vector<std::string>& meaningless, std::vector<std::string>* warnings) {
  std::vector<std::string> segments;
  for (const std::string& segment : split(value, ';')) {
    if (segment.empty()) continue;
    std::string collective;
    std::string list = segment;
    if (const size_t colon = segment.find(':'); colon != std::string::npos) {
      collective = lower(segment.substr(0, colon)) + ":";
      list = segment.substr(colon + 1);
    }
    const bool exclude = !list.empty() && list[0] == '^';
    if (exclude) list.erase(0, 1);
    std::vector<std::string> kept;
    for (const std::string& item : split(list, ',')) {
      const std::string key = lower(item);
      if (auto it = names.find(key); it != names.end()) kept.push_back(it->second);
      else if (std::find(meaningless.begin(), meaningless.end(), key) != meaningless.end())
        warnings->push_back(strprintf("%s: %s has no Loom meaning, ignored", variable, item.c_str()));
      else warnings->push_back(strprintf("%s: %s is not a name NCCL knows, ignored", variable, item.c_str()));
    }
    // Excluding only what Loom lacks excludes nothing; asking only for it
    // leaves Loom's choice as it is.
    if (kept.empty()) continue;
    segments.push_back(collective + (exclude ? "^" : "") + joined(kept, ','));
  }
  return joined(segments, ';');
}

std::string translateSubsystems(const std::string& value, std::vector<std::string>* warnings) {
  static const std::map<std::string, std::string> names = {
      {"INIT", "INIT"},   {"BOOTSTRAP", "BOOTSTRAP"}, {"COLL", "COLL"},     {"ENV", "ENV"},
      {"ALL", "ALL"},     {"P2P", "TRANSPORT"},       {"SHM", "TRANSPORT"}, {"NET", "TRANSPORT"},
      {"GRAPH", "ALGO"},  {"TUNING", "TUNER"},        {"PROXY", "PROGRESS"}};
  std::string list = value;
  const bool exclude = !list.empty() && list[0] == '^';
  if (exclude) list.erase(0, 1);
  std::vector<std::string> kept;
  for (const std::string& item : split(list, ',')) {
    auto it = names.find(upper(item));
    if (it == names.end()) {
      warnings->push_back(strprintf("NCCL_DEBUG_SUBSYS: %s has no Loom meaning, ignored", item.c_str()));
      continue;
    }
    if (std::find(kept.begin(), kept.end(), it->second) == kept.end()) kept.push_back(it->second);
  }
  if (kept.empty()) return "";
  return (exclude ? "^" : "") + joined(kept, ',');
}

using Translator = void (*)(const std::string& value, int shmSlots, Translation* out);

void warnValue(Translation* out, const char* variable, const std::string& value, const char* expected) {
  out->warnings.push_back(strprintf("%s=%s: %s, ignored", variable, value.c_str(), expected));
}

void onOff(const char* variable, const char* loom, const std::string& value, Translation* out) {
  long number = 0;
  if (!parseLong(value, &number)) return warnValue(out, variable, value, "expected an integer (0: off)");
  out->assignments.push_back({loom, number != 0 ? "1" : "0"});
}

const std::vector<std::pair<const char*, Translator>>& translators() {
  static const std::vector<std::pair<const char*, Translator>> table = {
      {"NCCL_DEBUG",
       [](const std::string& value, int, Translation* out) {
         const std::string level = upper(value);
         if (level == "NONE" || level == "VERSION" || level == "WARN" || level == "INFO" || level == "TRACE")
           out->assignments.push_back({"LOOM_DEBUG", level});
         else warnValue(out, "NCCL_DEBUG", value, "Loom has NONE, VERSION, WARN, INFO and TRACE");
       }},
      {"NCCL_DEBUG_SUBSYS",
       [](const std::string& value, int, Translation* out) {
         const std::string mapped = translateSubsystems(value, &out->warnings);
         if (!mapped.empty()) out->assignments.push_back({"LOOM_DEBUG_SUBSYS", mapped});
       }},
      {"NCCL_DEBUG_FILE",
       [](const std::string& value, int, Translation* out) { out->assignments.push_back({"LOOM_DEBUG_FILE", value}); }},
      {"NCCL_ALGO",
       [](const std::string& value, int, Translation* out) {
         const std::string mapped =
             translateNameList("NCCL_ALGO", value, {{"ring", "ring"}, {"tree", "tree"}},
                               {"nvls", "nvlstree", "collnet", "collnetdirect", "collnetchain", "pat"}, &out->warnings);
         if (!mapped.empty()) out->assignments.push_back({"LOOM_ALGO", mapped});
       }},
      {"NCCL_PROTO",
       [](const std::string& value, int, Translation* out) {
         const std::string mapped = translateNameList("NCCL_PROTO", value, {{"simple", "simple"}, {"ll", "ll"}},
                                                      {"ll128"}, &out->warnings);
         if (!mapped.empty()) out->assignments.push_back({"LOOM_PROTO", mapped});
       }},
      {"NCCL_SOCKET_IFNAME",
       [](const std::string& value, int, Translation* out) {
         out->assignments.push_back({"LOOM_SOCKET_IFNAME", value});
       }},
      {"NCCL_IB_HCA",
       [](const std::string& value, int, Translation* out) {
         out->assignments.push_back({"LOOM_IB_HCA", value});
       }},
      {"NCCL_IB_DISABLE",
       [](const std::string& value, int, Translation* out) { onOff("NCCL_IB_DISABLE", "LOOM_IB_DISABLE", value, out); }},
      {"NCCL_SHM_DISABLE",
       [](const std::string& value, int, Translation* out) {
         onOff("NCCL_SHM_DISABLE", "LOOM_SHM_DISABLE", value, out);
       }},
      {"NCCL_P2P_DISABLE",
       [](const std::string& value, int, Translation* out) {
         long number = 0;
         if (!parseLong(value, &number)) return warnValue(out, "NCCL_P2P_DISABLE", value, "expected an integer");
         if (number == 0) return;  // NCCL's default: Loom's defaults stand
         out->assignments.push_back({"LOOM_CUDA_ENGINE", "0"});
         out->assignments.push_back({"LOOM_CUDA_P2P", "0"});
       }},
      {"NCCL_NET_GDR_LEVEL",
       [](const std::string& value, int, Translation* out) {
         const std::string level = upper(value);
         long number = -1;
         const bool numeric = parseLong(value, &number);
         if (level == "LOC" || (numeric && number == 0)) out->assignments.push_back({"LOOM_NET_GDR", "0"});
         else if (level == "PIX" || level == "PXB" || level == "PHB" || level == "SYS" || (numeric && number >= 1 && number <= 5))
           out->assignments.push_back({"LOOM_NET_GDR", "1"});
         else warnValue(out, "NCCL_NET_GDR_LEVEL", value, "expected LOC, PIX, PXB, PHB, SYS or 0..5");
       }},
      {"NCCL_BUFFSIZE",
       [](const std::string& value, int shmSlots, Translation* out) {
         unsigned long long bytes = 0;
         if (!parseBytes(value, &bytes)) return warnValue(out, "NCCL_BUFFSIZE", value, "expected a size in bytes");
         const unsigned long long chunk = bytes / static_cast<unsigned long long>(std::max(shmSlots, 1)) / 64 * 64;
         if (chunk < 4096 || chunk > (64ull << 20))
           return out->warnings.push_back(strprintf(
               "NCCL_BUFFSIZE=%s: %llu bytes per chunk (over %d slots) is outside Loom's 4K..64M, ignored",
               value.c_str(), chunk, shmSlots));
         out->assignments.push_back({"LOOM_CHUNK_SIZE", std::to_string(chunk)});
       }},
      {"NCCL_NET",
       [](const std::string& value, int, Translation* out) {
         const std::string net = lower(value);
         if (net == "socket") {
           out->assignments.push_back({"LOOM_IB_DISABLE", "1"});
           out->assignments.push_back({"LOOM_UCX_DISABLE", "1"});
         } else if (net == "ib") {
           out->assignments.push_back({"LOOM_TCP_DISABLE", "1"});
           out->assignments.push_back({"LOOM_UCX_DISABLE", "1"});
         } else {
           warnValue(out, "NCCL_NET", value, "Loom has Socket and IB (no network plugins)");
         }
       }},
  };
  return table;
}

// The NCCL_* names of the process environment.
std::vector<std::pair<std::string, std::string>> ncclEnvironment() {
  std::vector<std::pair<std::string, std::string>> found;
  for (char** entry = environ; entry && *entry; ++entry) {
    if (std::strncmp(*entry, "NCCL_", 5) != 0) continue;
    const char* equals = std::strchr(*entry, '=');
    if (!equals) continue;
    found.push_back({std::string(static_cast<const char*>(*entry), equals), std::string(equals + 1)});
  }
  return found;
}

}  // namespace

bool isMappedNcclVariable(const std::string& name) {
  for (const auto& [known, translator] : translators())
    if (name == known) return true;
  return false;
}

Translation translateNcclSetting(const std::string& name, const std::string& value, int shmSlots) {
  Translation out;
  for (const auto& [known, translator] : translators()) {
    if (name == known) {
      translator(value, shmSlots, &out);
      return out;
    }
  }
  out.warnings.push_back(strprintf("%s has no Loom meaning, ignored", name.c_str()));
  return out;
}

AppliedSettings applyNcclSettings() {
  constexpr SettingSource kSources[] = {SettingSource::kEnvironment, SettingSource::kUserFile,
                                        SettingSource::kSystemFile};
  AppliedSettings applied;
  int shmSlots = 4;  // Config's default; NCCL_BUFFSIZE divides by the depth Loom will use
  if (const char* v = readKnob("LOOM_SHM_SLOTS"); v && std::atoi(v) >= 2) shmSlots = std::atoi(v);

  // Each LOOM_* target: the NCCL setting that asks for it from the highest
  // source (table order breaks ties, e.g. NCCL_IB_DISABLE before NCCL_NET).
  struct Candidate {
    SettingSource source;
    std::string value;
    std::string because;
  };
  std::map<std::string, Candidate> wanted;
  std::vector<std::string> targetsInOrder;
  for (const auto& [name, translator] : translators()) {
    for (SettingSource source : kSources) {
      const char* value = readKnobFrom(name, source);
      if (!value) continue;
      // Only the highest source of an NCCL variable counts, as in NCCL.
      const Translation t = translateNcclSetting(name, value, shmSlots);
      for (const std::string& w : t.warnings)
        applied.warnings.push_back(w + strprintf(" (%s)", settingSourceName(source)));
      for (const auto& [target, mapped] : t.assignments) {
        auto it = wanted.find(target);
        if (it != wanted.end() && static_cast<int>(it->second.source) <= static_cast<int>(source)) continue;
        if (it == wanted.end()) targetsInOrder.push_back(target);
        wanted[target] = {source, mapped, strprintf("%s=%s, %s", name, value, settingSourceName(source))};
      }
      break;
    }
  }
  for (const std::string& target : targetsInOrder) {
    const Candidate& candidate = wanted[target];
    bool overridden = false;
    for (SettingSource source : kSources) {
      if (static_cast<int>(source) > static_cast<int>(candidate.source)) break;
      if (const char* own = readKnobFrom(target.c_str(), source)) {
        applied.notes.push_back(strprintf("%s=%s (%s) wins over %s=%s (from %s)", target.c_str(), own,
                                          settingSourceName(source), target.c_str(), candidate.value.c_str(),
                                          candidate.because.c_str()));
        overridden = true;
        break;
      }
    }
    if (overridden) continue;
    setenv(target.c_str(), candidate.value.c_str(), 0);
    applied.set.push_back(
        strprintf("%s=%s (from %s)", target.c_str(), candidate.value.c_str(), candidate.because.c_str()));
  }

  // NCCL variables Loom has no meaning for: said once, never silently dropped.
  std::vector<std::string> unknown;
  for (const auto& [name, value] : ncclEnvironment())
    if (!isMappedNcclVariable(name) && name != "NCCL_CONF_FILE")
      unknown.push_back(strprintf("%s=%s (environment)", name.c_str(), value.c_str()));
  for (const std::string& name : namesInSettingsFiles())
    if (name.rfind("NCCL_", 0) == 0 && !isMappedNcclVariable(name))
      unknown.push_back(name + " (settings file)");
  for (const std::string& u : unknown) applied.warnings.push_back(u + " has no Loom meaning, ignored");
  return applied;
}

void applyNcclSettingsOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    const AppliedSettings applied = applyNcclSettings();
    // After the assignments: NCCL_DEBUG may have just set LOOM_DEBUG.
    const Logger& log = Logger::process();
    for (const std::string& w : applied.warnings) LOOM_WARN(log, kSubsysEnv, "NCCL shim: %s", w.c_str());
    for (const std::string& s : applied.set) LOOM_INFO(log, kSubsysEnv, "NCCL shim: set %s", s.c_str());
    for (const std::string& n : applied.notes) LOOM_INFO(log, kSubsysEnv, "NCCL shim: %s", n.c_str());
  });
}

}  // namespace loom::nccl_shim
