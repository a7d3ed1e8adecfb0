#include "src/tuner/tuning_table.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/format.h"

namespace loom::tuner {
namespace {

using algo::CollType;

constexpr CollType kAllColls[] = {CollType::kAllReduce, CollType::kBroadcast, CollType::kReduce,
                                  CollType::kReduceScatter, CollType::kAllGather};

std::vector<std::string> splitBlanks(const std::string& line) {
  std::vector<std::string> fields;
  std::istringstream in(line);
  std::string f;
  while (in >> f) fields.push_back(f);
  return fields;
}

bool parseNumber(const std::string& text, double* out) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (errno != 0 || end == text.c_str() || *end != '\0' || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

// Parses the four key fields; `exact` forbids `*`. The error says which field.
Status parseKey(const std::vector<std::string>& f, size_t at, bool exact, TuningKey* key) {
  auto wild = [&](size_t i) { return f[at + i] == "*"; };
  if (exact)
    for (size_t i = 0; i < 4; ++i)
      if (wild(i)) return makeError(Code::kInvalidArgument, "a point needs an exact key, not '*' in field %zu", at + i + 1);
  if (!wild(0)) {
    key->coll = parseCollName(f[at]);
    if (key->coll < 0)
      return makeError(Code::kInvalidArgument,
                       "unknown collective '%s' (expected allreduce, broadcast, reduce, reducescatter, allgather or *)",
                       f[at].c_str());
  }
  if (!wild(1)) {
    // Names are printed back by toText() and in log lines: printable only
    // (a NUL would cut the name short there).
    for (unsigned char c : f[at + 1])
      if (c < 0x21 || c == 0x7f)
        return makeError(Code::kInvalidArgument, "algorithm name in field %zu has a non-printable byte 0x%02x",
                         at + 2, c);
    key->algo = lowerCase(f[at + 1]);
  }
  if (!wild(2)) {
    key->proto = parseProtoName(f[at + 2]);
    if (key->proto < 0)
      return makeError(Code::kInvalidArgument, "unknown protocol '%s' (expected simple, ll or *)", f[at + 2].c_str());
  }
  if (!wild(3)) {
    double n = 0;
    if (!parseNumber(f[at + 3], &n) || n < 1 || n != std::floor(n) || n > 1 << 20)
      return makeError(Code::kInvalidArgument, "nranks '%s' is not a positive integer or *", f[at + 3].c_str());
    key->nranks = static_cast<int>(n);
  }
  return Status::ok();
}

Status parseEntry(const std::vector<std::string>& f, TuningEntry* e) {
  if (f.size() != 6 && f.size() != 7)
    return makeError(Code::kInvalidArgument,
                     "expected '<collective> <algorithm> <protocol> <nranks> <alpha_us> <bandwidth_GBps> "
                     "[<reduce_GBps>]', got %zu fields",
                     f.size());
  LOOM_TRY(parseKey(f, 0, false, &e->key));
  if (!parseNumber(f[4], &e->alphaMicros) || e->alphaMicros < 0)
    return makeError(Code::kInvalidArgument, "alpha_us '%s' is not a number >= 0", f[4].c_str());
  if (!parseNumber(f[5], &e->bandwidthGBps) || e->bandwidthGBps <= 0)
    return makeError(Code::kInvalidArgument, "bandwidth_GBps '%s' is not a number > 0", f[5].c_str());
  if (f.size() == 7 && (!parseNumber(f[6], &e->reduceGBps) || e->reduceGBps <= 0))
    return makeError(Code::kInvalidArgument, "reduce_GBps '%s' is not a number > 0", f[6].c_str());
  return Status::ok();
}

Status parsePoint(const std::vector<std::string>& f, TuningPoint* p) {
  if (f.size() != 7)
    return makeError(Code::kInvalidArgument,
                     "expected 'point <collective> <algorithm> <protocol> <nranks> <bytes> <time_us>', got %zu fields",
                     f.size());
  LOOM_TRY(parseKey(f, 1, true, &p->key));
  if (!parseNumber(f[5], &p->bytes) || p->bytes < 0)
    return makeError(Code::kInvalidArgument, "bytes '%s' is not a number >= 0", f[5].c_str());
  if (!parseNumber(f[6], &p->micros) || p->micros <= 0)
    return makeError(Code::kInvalidArgument, "time_us '%s' is not a number > 0", f[6].c_str());
  return Status::ok();
}

std::string keyText(const TuningKey& k) {
  return strprintf("%s %s %s %s", k.coll < 0 ? "*" : collKeyName(static_cast<CollType>(k.coll)),
                   k.algo.empty() ? "*" : k.algo.c_str(),
                   k.proto < 0 ? "*" : lowerCase(transport::protocolName(static_cast<transport::Protocol>(k.proto))).c_str(),
                   k.nranks <= 0 ? "*" : std::to_string(k.nranks).c_str());
}

}  // namespace

std::string lowerCase(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

const char* collKeyName(CollType type) {
  switch (type) {
    case CollType::kAllReduce: return "allreduce";
    case CollType::kBroadcast: return "broadcast";
    case CollType::kReduce: return "reduce";
    case CollType::kReduceScatter: return "reducescatter";
    case CollType::kAllGather: return "allgather";
  }
  return "?";
}

int parseCollName(const std::string& name) {
  std::string n;
  for (char c : lowerCase(name))
    if (c != '_' && c != '-') n += c;
  for (CollType t : kAllColls)
    if (n == collKeyName(t)) return static_cast<int>(t);
  return -1;
}

int parseProtoName(const std::string& name) {
  const std::string n = lowerCase(name);
  for (int p = 0; p < transport::kNumProtocols; ++p)
    if (n == lowerCase(transport::protocolName(static_cast<transport::Protocol>(p)))) return p;
  return -1;
}

bool TuningKey::matches(CollType c, const std::string& a, transport::Protocol p, int n) const {
  return (coll < 0 || coll == static_cast<int>(c)) && (algo.empty() || algo == a) &&
         (proto < 0 || proto == static_cast<int>(p)) && (nranks <= 0 || nranks == n);
}

Result<TuningTable> TuningTable::parse(const std::string& text, const std::string& source) {
  TuningTable table;
  std::istringstream in(text);
  std::string line;
  for (int lineNo = 1; std::getline(in, line); ++lineNo) {
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    const auto fields = splitBlanks(line);
    if (fields.empty()) continue;
    Status s;
    if (lowerCase(fields[0]) == "point") {
      TuningPoint p;
      s = parsePoint(fields, &p);
      if (s.isOk()) table.points_.push_back(std::move(p));
    } else {
      TuningEntry e;
      s = parseEntry(fields, &e);
      if (s.isOk()) table.entries_.push_back(std::move(e));
    }
    if (!s.isOk()) return makeError(Code::kInvalidArgument, "%s:%d: %s", source.c_str(), lineNo, s.message().c_str());
  }
  return table;
}

Result<TuningTable> TuningTable::readFile(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return makeError(Code::kInvalidArgument, "cannot open tuning file '%s' (LOOM_TUNING_FILE): %s", path.c_str(),
                     std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  return parse(text.str(), path);
}

const TuningTable& TuningTable::builtin() {
  static const TuningTable table = [] {
    auto parsed = parse(kBuiltinTuningText, "built-in tuning defaults");
    // The text is ours and covered by a unit test; an error here is a bug.
    if (!parsed.isOk()) std::abort();
    return std::move(parsed).value();
  }();
  return table;
}

void TuningTable::append(const TuningTable& later) {
  entries_.insert(entries_.end(), later.entries_.begin(), later.entries_.end());
  points_.insert(points_.end(), later.points_.begin(), later.points_.end());
}

std::string TuningTable::toText() const {
  std::string out;
  for (const auto& e : entries_) {
    out += keyText(e.key) + strprintf(" %.17g %.17g", e.alphaMicros, e.bandwidthGBps);
    if (e.reduceGBps > 0) out += strprintf(" %.17g", e.reduceGBps);
    out += '\n';
  }
  for (const auto& p : points_) out += "point " + keyText(p.key) + strprintf(" %.17g %.17g\n", p.bytes, p.micros);
  return out;
}

CostParams TuningTable::params(CollType coll, const std::string& algo, transport::Protocol proto, int nranks) const {
  const TuningEntry* best = nullptr;
  const TuningEntry* bestReduce = nullptr;
  for (const auto& e : entries_) {
    if (!e.key.matches(coll, algo, proto, nranks)) continue;
    if (!best || e.key.specificity() >= best->key.specificity()) best = &e;
    if (e.reduceGBps > 0 && (!bestReduce || e.key.specificity() >= bestReduce->key.specificity())) bestReduce = &e;
  }
  CostParams p;
  // GB/s = 1e3 bytes per microsecond.
  if (best) p.alphaMicros = best->alphaMicros, p.betaMicrosPerByte = 1e-3 / best->bandwidthGBps;
  if (bestReduce) p.gammaMicrosPerByte = 1e-3 / bestReduce->reduceGBps;
  return p;
}

std::vector<std::pair<double, double>> TuningTable::points(CollType coll, const std::string& algo,
                                                           transport::Protocol proto, int nranks) const {
  std::vector<std::pair<double, double>> out;
  for (const auto& p : points_)
    if (p.key.coll == static_cast<int>(coll) && p.key.algo == algo && p.key.proto == static_cast<int>(proto) &&
        p.key.nranks == nranks) {
      // A later point of the same size replaces an earlier one.
      auto same = std::find_if(out.begin(), out.end(), [&](const auto& q) { return q.first == p.bytes; });
      if (same != out.end()) same->second = p.micros;
      else out.emplace_back(p.bytes, p.micros);
    }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace loom::tuner
