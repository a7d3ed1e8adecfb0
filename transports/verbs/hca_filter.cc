#include "transports/verbs/hca_filter.h"

#include <cstdlib>

namespace loom::transport::verbs {

Result<HcaFilter> HcaFilter::parse(const std::string& spec) {
  HcaFilter f;
  f.spec_ = spec;
  size_t at = 0;
  if (at < spec.size() && spec[at] == '^') f.exclude_ = true, ++at;
  if (at < spec.size() && spec[at] == '=') f.exact_ = true, ++at;
  while (at < spec.size()) {
    size_t end = spec.find(',', at);
    if (end == std::string::npos) end = spec.size();
    const std::string item = spec.substr(at, end - at);
    at = end + 1;
    if (item.empty()) continue;
    Entry e;
    const size_t colon = item.find(':');
    e.name = item.substr(0, colon);
    if (colon != std::string::npos) {
      const std::string port = item.substr(colon + 1);
      char* stop = nullptr;
      const long p = std::strtol(port.c_str(), &stop, 10);
      if (port.empty() || *stop != '\0' || p < 1 || p > 255)
        return makeError(Code::kInvalidArgument, "LOOM_IB_HCA='%s': '%s' has no port number in 1..255 after ':'",
                         spec.c_str(), item.c_str());
      e.port = static_cast<int>(p);
    }
    if (e.name.empty())
      return makeError(Code::kInvalidArgument, "LOOM_IB_HCA='%s': '%s' names no device", spec.c_str(), item.c_str());
    f.entries_.push_back(std::move(e));
  }
  return f;
}

bool HcaFilter::allows(const std::string& device, uint8_t port) const {
  if (entries_.empty()) return true;
  bool listed = false;
  for (const Entry& e : entries_) {
    const bool nameMatches = exact_ ? device == e.name : device.compare(0, e.name.size(), e.name) == 0;
    if (nameMatches && (e.port < 0 || e.port == port)) listed = true;
  }
  return exclude_ ? !listed : listed;
}

}  // namespace loom::transport::verbs
