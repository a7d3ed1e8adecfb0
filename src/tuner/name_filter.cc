#include "src/tuner/name_filter.h"

#include <algorithm>

#include "common/format.h"
#include "src/tuner/tuning_table.h"

namespace loom::tuner {
namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t pos = 0;
  while (true) {
    const size_t at = s.find(sep, pos);
    parts.push_back(trim(s.substr(pos, at == std::string::npos ? std::string::npos : at - pos)));
    if (at == std::string::npos) return parts;
    pos = at + 1;
  }
}

}  // namespace

NameFilter NameFilter::parse(const std::string& spec, const char* knob, const char* what, const KnownFn& known,
                             std::vector<std::string>* warnings) {
  NameFilter filter;
  auto warn = [&](const std::string& w) {
    if (warnings) warnings->push_back(strprintf("%s=%s: %s", knob, spec.c_str(), w.c_str()));
  };
  for (const std::string& segment : split(spec, ';')) {
    if (segment.empty()) continue;
    int coll = -1;
    std::string list = segment;
    if (const auto colon = segment.find(':'); colon != std::string::npos) {
      const std::string collName = trim(segment.substr(0, colon));
      coll = parseCollName(collName);
      if (coll < 0) {
        warn(strprintf("unknown collective '%s' ignored", collName.c_str()));
        continue;
      }
      list = trim(segment.substr(colon + 1));
    }
    Rule rule;
    if (!list.empty() && list[0] == '^') rule.exclude = true, list = trim(list.substr(1));
    for (const std::string& raw : split(list, ',')) {
      if (raw.empty()) continue;
      const std::string name = lowerCase(raw);
      if (!known(coll, name)) {
        warn(strprintf("unknown %s '%s'%s ignored", what, raw.c_str(),
                       coll < 0 ? "" : strprintf(" for %s", collKeyName(static_cast<algo::CollType>(coll))).c_str()));
        continue;
      }
      if (std::find(rule.names.begin(), rule.names.end(), name) == rule.names.end()) rule.names.push_back(name);
    }
    // A list left empty by unknown names (or written empty) filters nothing.
    rule.set = !rule.names.empty();
    if (coll >= 0) {
      filter.perColl_[coll] = rule;
      continue;
    }
    filter.all_ = rule;
    for (int c = 0; c < algo::kNumCollTypes; ++c) {
      filter.allCovers_[c] = rule.exclude;  // an exclusion list always applies
      for (const auto& name : rule.names) filter.allCovers_[c] = filter.allCovers_[c] || known(c, name);
    }
  }
  return filter;
}

const NameFilter::Rule& NameFilter::ruleFor(algo::CollType coll) const {
  static const Rule kNone;
  const Rule& own = perColl_[static_cast<int>(coll)];
  if (own.set) return own;
  return allCovers_[static_cast<int>(coll)] ? all_ : kNone;
}

bool NameFilter::allows(algo::CollType coll, const std::string& name) const {
  const Rule& rule = ruleFor(coll);
  if (!rule.set) return true;
  const bool listed = std::find(rule.names.begin(), rule.names.end(), name) != rule.names.end();
  return rule.exclude ? !listed : listed;
}

bool NameFilter::names(algo::CollType coll, const std::string& name) const {
  const Rule& rule = ruleFor(coll);
  return rule.set && !rule.exclude && std::find(rule.names.begin(), rule.names.end(), name) != rule.names.end();
}

}  // namespace loom::tuner
