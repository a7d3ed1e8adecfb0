#include "perf/harness/report.h"

#include <cerrno>
#include <cmath>
#include <cstring>

#include "perf/harness/datatypes.h"

namespace loom::perf {
namespace {

void printPlacement(FILE* out, const PlacementResult& r) {
  std::fprintf(out, "  %7s  %6s  %6s", fitNumber(r.timeUs, 7).c_str(), fitNumber(r.algBw, 6).c_str(),
               fitNumber(r.busBw, 6).c_str());
  if (r.wrong < 0) std::fprintf(out, "  %6s", "N/A");
  else std::fprintf(out, "  %6g", static_cast<double>(r.wrong));
}

void printShare(FILE* out, double share) {
  if (share < 0) std::fprintf(out, "  %6s", "-");
  else std::fprintf(out, "  %6.1f", share * 100.0);
}

// nccl-tests' memory amounts: 1024-based units, fewer decimals as the number grows.
std::string memoryAmount(int64_t bytes) {
  double amount = static_cast<double>(bytes);
  const char* unit = "B";
  const char* units[] = {"KB", "MB", "GB"};
  for (int i = 2; i >= 0; --i) {
    const double scale = static_cast<double>(1ull << (10 * (i + 1)));
    if (std::fabs(amount) >= scale) {
      amount /= scale;
      unit = units[i];
      break;
    }
  }
  const int decimals = std::fabs(amount) < 10.0 ? 2 : std::fabs(amount) < 100.0 ? 1 : 0;
  char text[64];
  std::snprintf(text, sizeof text, "%.*f %s", decimals, amount, unit);
  return text;
}

void jsonPlacement(FILE* f, const char* name, const PlacementResult& r) {
  std::fprintf(f, "\"%s\": {\"time_us\": %.3f, \"algbw_gbps\": %.4f, \"busbw_gbps\": %.4f, \"wrong\": %lld, ",
               name, r.timeUs, r.algBw, r.busBw, static_cast<long long>(r.wrong));
  if (r.memShare < 0) std::fprintf(f, "\"mem_bound_share\": null, ");
  else std::fprintf(f, "\"mem_bound_share\": %.4f, ", r.memShare);
  std::fprintf(f, "\"algorithm\": \"%s\"}", r.algorithm.c_str());
}

const char* combineName(TimeCombine c) {
  switch (c) {
    case TimeCombine::kRank0: return "rank0";
    case TimeCombine::kMin: return "min";
    case TimeCombine::kMax: return "max";
    default: return "average";
  }
}

}  // namespace

void printHeader(FILE* out, const PerfOptions& o, const char* toolName, HeaderVersions versions) {
  std::fprintf(out, "# nccl-tests version %s nccl-headers=%d nccl-library=%d\n", kNcclTestsFormatVersion,
               versions.headers, versions.library);
  std::fprintf(out, "# Collective test starting: %s\n", toolName);
  std::fprintf(out, "# nThread %d nGpus %d minBytes %zu maxBytes %zu step: ", o.threads, o.gpus, o.minBytes,
               o.maxBytes);
  if (o.stepFactor > 1) std::fprintf(out, "%ld(factor)", o.stepFactor);
  else std::fprintf(out, "%zu(bytes)", o.stepBytes);
  std::fprintf(out, " warmup iters: %d iters: %d agg iters: %d validation: %d graph: %d unalign: 0\n",
               o.warmupIters, o.iters, o.aggIters, o.check, o.graphLaunches);
  // Loom's -z waits after each call and never adds a barrier: nccl-tests' -z 2 line.
  if (o.blocking) std::fprintf(out, "# Blocking Enabled: wait after each inner iteration (-m), no barrier \n");
  std::fprintf(out, "#\n");
}

void printDevices(FILE* out, const std::vector<RankInfo>& ranks) {
  std::fprintf(out, "# Using devices\n");
  for (const RankInfo& r : ranks)
    std::fprintf(out, "#  Rank %2d Group %2d Pid %6d on %10s device %2d %.*s\n", r.rank, r.group, r.pid, r.host,
                 r.device, static_cast<int>(sizeof r.where), r.where);
}

void printMemoryBound(FILE* out, const StreamBandwidth& stream, double trafficFactor, int nranks) {
  std::fprintf(out, "# Stream bandwidth: %.2f GB/s (%d ranks each copying %zu MiB x %d at once, (read + written)"
               " bytes / time, best of %d)\n", stream.bytesPerSecond / 1e9, nranks, stream.bufferBytes >> 20,
               stream.copies, stream.trials);
  std::fprintf(out, "# %%mem: memory-traffic bound time / time, bound = %g x size / stream bandwidth"
               " (one-copy traffic for %d ranks), sizes >= %zu MiB\n", trafficFactor, nranks,
               kMemoryBoundMinBytes >> 20);
}

void printTableHeader(FILE* out, ExtraColumns extra) {
  std::fprintf(out, "#\n");
  // The titles over the two groups of four columns, after the 52 of size..root.
  std::fprintf(out, "#%51s%23s%31s%10s\n", "", "out-of-place", "in-place", "");
  std::fprintf(out, "#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s", "size", "count", "type",
               "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
  if (extra.memoryBound) std::fprintf(out, "  %6s  %6s", "%mem", "%mem");
  if (extra.copy) std::fprintf(out, "  %7s  %7s  %6s", "copy", "copybw", "%copy");
  if (extra.algorithm) std::fprintf(out, "  algorithm");
  // nccl-tests ends its title lines with a space (where -S puts the timestamp title).
  std::fprintf(out, extra.any() ? "\n" : " \n");
  std::fprintf(out, "#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s", "(B)", "(elements)", "",
               "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  if (extra.memoryBound) std::fprintf(out, "  %6s  %6s", "(oop)", "(ip)");
  if (extra.copy) std::fprintf(out, "  %7s  %7s  %6s", "(us)", "(GB/s)", "(oop)");
  std::fprintf(out, extra.any() ? "\n" : " \n");
}

std::string fitNumber(double value, int width) {
  char text[64];
  for (int decimals = 2; decimals >= 0; --decimals) {
    const int length = std::snprintf(text, sizeof text, "%*.*f", width, decimals, value);
    if (length <= width) return text;
  }
  std::snprintf(text, sizeof text, "%*.*e", width, width >= 7 ? 1 : 0, value);
  return text;
}

std::string algorithmColumn(const ResultRow& row) {
  const std::string& oop = row.outOfPlace.algorithm;
  const std::string& ip = row.inPlace.algorithm;
  return oop == ip ? oop : oop + "|" + ip;
}

double copyShare(const ResultRow& row) {
  if (row.copy.timeUs < 0 || row.copy.bw <= 0) return -1;
  return row.outOfPlace.algBw / row.copy.bw;
}

void printRow(FILE* out, const ResultRow& row, ExtraColumns extra) {
  std::fprintf(out, "%12zu  %12zu  %8s  %6s  %6d", row.bytes, row.count, typeName(row.type), row.redop, row.root);
  printPlacement(out, row.outOfPlace);
  printPlacement(out, row.inPlace);
  if (extra.memoryBound) {
    printShare(out, row.outOfPlace.memShare);
    printShare(out, row.inPlace.memShare);
  }
  if (extra.copy) {
    if (row.copy.timeUs < 0) std::fprintf(out, "  %7s  %7s", "-", "-");
    else std::fprintf(out, "  %7s  %7.2f", fitNumber(row.copy.timeUs, 7).c_str(), row.copy.bw);
    printShare(out, copyShare(row));
  }
  if (extra.algorithm) std::fprintf(out, "  %s", algorithmColumn(row).c_str());
  std::fprintf(out, "\n");
  std::fflush(out);
}

void printFooter(FILE* out, const RunSummary& s) {
  std::fprintf(out, "# %-20s : %lld %s\n", "Out of bounds values", static_cast<long long>(s.outOfBounds),
               s.outOfBounds ? "FAILED" : "OK");
  const char* verdict = s.minBusBw < 0 ? "" : s.avgBusBw < 0.9 * s.minBusBw ? "FAILED" : "OK";
  std::fprintf(out, "# %-20s : %g %s\n", "Avg bus bandwidth", s.avgBusBw, verdict);
  std::fprintf(out, "#\n");
  std::fprintf(out, "# Collective test concluded: %s\n", s.toolName.c_str());
  std::fflush(out);
}

void printMemoryUsage(FILE* out, int64_t initialization, int64_t userAllocated, int64_t collective) {
  std::fprintf(out, "# %-20s : Initialization %s | User-Allocated %s | Collective %s | Total  %s\n",
               "GPU memory usage", memoryAmount(initialization).c_str(), memoryAmount(userAllocated).c_str(),
               memoryAmount(collective).c_str(), memoryAmount(initialization + userAllocated + collective).c_str());
}

void printEnd(FILE* out) {
  std::fprintf(out, "#\n\n");
  std::fflush(out);
}

bool writeJson(const std::string& path, const PerfOptions& o, const std::vector<ResultRow>& rows,
               const RunSummary& s) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "%s: cannot write %s: %s\n", s.toolName.c_str(), path.c_str(), std::strerror(errno));
    return false;
  }
  std::fprintf(f, "{\n  \"tool\": \"%s\", \"library\": \"%s\", \"nranks\": %d, \"nthreads\": %d,"
               " \"stream_bw_gbps\": %.4f,\n", s.toolName.c_str(), s.library.c_str(), s.nranks, o.threads, s.streamBw);
  std::fprintf(f, "  \"iters\": %d, \"warmup_iters\": %d, \"agg_iters\": %d, \"blocking\": %d, \"check\": %d,"
               " \"time_across_ranks\": \"%s\", \"ngpus\": %d, \"graph_launches\": %d,\n  \"results\": [",
               o.iters, o.warmupIters, o.aggIters, o.blocking ? 1 : 0, o.check, combineName(o.combine), o.gpus,
               o.graphLaunches);
  for (size_t i = 0; i < rows.size(); ++i) {
    const ResultRow& r = rows[i];
    std::fprintf(f, "%s\n    {\"size\": %zu, \"count\": %zu, \"type\": \"%s\", \"redop\": \"%s\", \"root\": %d, ",
                 i ? "," : "", r.bytes, r.count, typeName(r.type), r.redop, r.root);
    jsonPlacement(f, "out_of_place", r.outOfPlace);
    std::fprintf(f, ", ");
    jsonPlacement(f, "in_place", r.inPlace);
    if (r.copy.timeUs >= 0) std::fprintf(f, ", \"copy_us\": %.3f, \"copy_gbps\": %.4f", r.copy.timeUs, r.copy.bw);
    std::fprintf(f, "}");
  }
  std::fprintf(f, "\n  ],\n  \"out_of_bounds\": %lld, \"wrong\": %lld, \"avg_busbw_gbps\": %.4f\n}\n",
               static_cast<long long>(s.outOfBounds), static_cast<long long>(s.wrong), s.avgBusBw);
  const bool ok = std::fclose(f) == 0;
  if (!ok) std::fprintf(stderr, "%s: cannot finish %s: %s\n", s.toolName.c_str(), path.c_str(), std::strerror(errno));
  return ok;
}

}  // namespace loom::perf
