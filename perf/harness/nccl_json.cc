#include "perf/harness/nccl_json.h"

#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>
#include <vector>

#include "perf/harness/datatypes.h"

extern char** environ;

namespace loom::perf {
namespace {

// Writes nested objects and lists, putting the commas where they belong.
class JsonWriter {
 public:
  explicit JsonWriter(FILE* f) : f_(f) {}
  void beginObject() { open('{'); }
  void endObject() { close('}'); }
  void beginList() { open('['); }
  void endList() { close(']'); }
  void key(const char* name) {
    separate();
    std::fprintf(f_, "%s:", jsonString(name).c_str());
    afterKey_ = true;
  }
  void string(const std::string& text) { value(jsonString(text)); }
  void integer(long long v) { value(std::to_string(v)); }
  void number(double v) {
    char text[64];
    if (std::isnan(v)) std::snprintf(text, sizeof text, "\"nan\"");
    else std::snprintf(text, sizeof text, "%f", v);
    value(text);
  }
  // nccl-tests writes its flags as the strings "true" and "false".
  void flag(bool v) { string(v ? "true" : "false"); }
  void null() { value("null"); }

 private:
  void separate() {
    if (afterKey_) {
      afterKey_ = false;
      return;
    }
    if (!first_.empty()) {
      if (!first_.back()) std::fputc(',', f_);
      first_.back() = false;
    }
  }
  void value(const std::string& text) {
    separate();
    std::fputs(text.c_str(), f_);
  }
  void open(char c) {
    separate();
    std::fputc(c, f_);
    first_.push_back(true);
  }
  void close(char c) {
    first_.pop_back();
    std::fputc(c, f_);
  }

  FILE* f_;
  std::vector<bool> first_;  // per open container: nothing written in it yet
  bool afterKey_ = false;
};

void placement(JsonWriter& w, const char* name, const PlacementResult& r) {
  w.key(name);
  w.beginObject();
  w.key("time");
  w.number(r.timeUs);
  w.key("alg_bw");
  w.number(r.algBw);
  w.key("bus_bw");
  w.number(r.busBw);
  w.key("nwrong");
  if (r.wrong < 0) w.null();
  else w.number(static_cast<double>(r.wrong));
  w.endObject();
}

// RankInfo::where is "[bus id] name": nccl-tests splits it into these two.
void splitWhere(const char* where, std::string* hex, std::string* info) {
  const std::string text(where);
  const size_t close = text.find(']');
  if (text.empty() || text[0] != '[' || close == std::string::npos) {
    *info = text;
    return;
  }
  *hex = text.substr(1, close - 1);
  *info = text.substr(std::min(text.size(), close + 2));
}

void config(JsonWriter& w, const NcclJsonReport& r) {
  const PerfOptions& o = *r.options;
  w.key("config");
  w.beginObject();
  w.key("nthreads");
  w.integer(o.threads);
  w.key("ngpus");
  w.integer(o.gpus);
  w.key("minimum_bytes");
  w.integer(static_cast<long long>(o.minBytes));
  w.key("maximum_bytes");
  w.integer(static_cast<long long>(o.maxBytes));
  if (o.stepFactor > 1) {
    w.key("step_factor");
    w.integer(o.stepFactor);
  } else {
    w.key("step_bytes");
    w.integer(static_cast<long long>(o.stepBytes));
  }
  w.key("warmup_iters");
  w.integer(o.warmupIters);
  w.key("iterations");
  w.integer(o.iters);
  w.key("aggregated_iterations");
  w.integer(o.aggIters);
  w.key("validation");
  w.integer(o.check);
  w.key("graph");
  w.integer(o.graphLaunches);
  w.key("blocking_collectives");
  w.flag(o.blocking);
  w.key("per_iter_timing");
  w.flag(false);
  w.key("per_iter_skip");
  w.integer(0);
  w.key("parallel_init");
  w.flag(false);
  w.key("devices");
  w.beginList();
  for (const RankInfo& d : r.devices) {
    std::string hex, info;
    splitWhere(d.where, &hex, &info);
    w.beginObject();
    w.key("rank");
    w.integer(d.rank);
    w.key("group");
    w.integer(d.group);
    w.key("pid");
    w.integer(d.pid);
    w.key("hostname");
    w.string(d.host);
    w.key("device");
    w.integer(d.device);
    w.key("device_hex");
    w.string(hex);
    w.key("device_info");
    w.string(info);
    w.endObject();
  }
  w.endList();
  w.endObject();
}

}  // namespace

std::string redactedVariable(const std::string& entry) {
  const size_t equals = entry.find('=');
  std::string name = entry.substr(0, equals);
  for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const char* secret : {"SECRET", "TOKEN", "PASSWORD", "PASSWD", "CREDENTIAL", "KEY"})
    if (equals != std::string::npos && name.find(secret) != std::string::npos)
      return entry.substr(0, equals) + "=<redacted>";
  return entry;
}

std::string jsonString(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u >= 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", u);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string localTimeNow() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char text[64];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &local);
  return text;
}

FILE* createNcclJson(const std::string& path, FILE* log) {
  std::string name = path;
  for (int attempt = 0;; ++attempt) {
    const int fd = open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      FILE* f = fdopen(fd, "w");
      if (!f) {
        close(fd);
        break;
      }
      std::fprintf(log, "# Writing JSON output to %s\n", name.c_str());
      return f;
    }
    if (errno != EEXIST || attempt > 100000) break;
    name = path + "." + std::to_string(attempt);
  }
  std::fprintf(log, "# skipping json output; %s not accessible\n", name.c_str());
  return nullptr;
}

bool writeNcclJson(FILE* f, const NcclJsonReport& r) {
  const PerfOptions& o = *r.options;
  JsonWriter w(f);
  w.beginObject();
  w.key("version");
  w.integer(kNcclJsonVersion);
  w.key("start_time");
  w.string(r.startTime);
  w.key("args");
  w.beginList();
  for (const std::string& arg : o.commandLine) w.string(arg);
  w.endList();
  w.key("env");
  w.beginList();
  for (char** e = environ; e && *e; ++e) w.string(redactedVariable(*e));
  w.endList();
  w.key("nccl_version");
  w.integer(r.libraryVersion);
  config(w, r);
  w.key("results");
  w.beginList();
  for (const ResultRow& row : r.rows) {
    char root[16];
    std::snprintf(root, sizeof root, "%6d", row.root);  // nccl-tests: the printed column, as a string
    w.beginObject();
    w.key("size");
    w.integer(static_cast<long long>(row.bytes));
    w.key("count");
    w.integer(static_cast<long long>(row.count));
    w.key("type");
    w.string(typeName(row.type));
    w.key("redop");
    w.string(row.redop);
    w.key("root");
    w.string(root);
    placement(w, "out_of_place", row.outOfPlace);
    placement(w, "in_place", row.inPlace);
    w.key("actual_iterations");
    w.integer(o.iters);
    w.key("experiment_name");
    w.string("");
    w.endObject();
  }
  w.endList();
  w.key("out_of_bounds");
  w.beginObject();
  w.key("count");
  w.integer(r.summary.outOfBounds);
  w.key("okay");
  w.flag(r.summary.outOfBounds == 0);
  w.endObject();
  w.key("average_bus_bandwidth");
  w.beginObject();
  w.key("bandwidth");
  w.number(r.summary.avgBusBw);
  w.key("okay");
  if (r.summary.minBusBw < 0) w.string("unchecked");
  else w.flag(r.summary.avgBusBw >= 0.9 * r.summary.minBusBw);
  w.endObject();
  w.key("errors");
  w.beginList();
  w.endList();
  w.key("end_time");
  w.string(localTimeNow());
  w.endObject();
  std::fputc('\n', f);
  const bool ok = !std::ferror(f);
  if (std::fclose(f) != 0 || !ok) {
    std::fprintf(stderr, "%s: cannot finish the -J file: %s\n", r.summary.toolName.c_str(), std::strerror(errno));
    return false;
  }
  return true;
}

}  // namespace loom::perf
