#include "perf/harness/algo_table.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

namespace loom::perf {
namespace {

constexpr int kTimeWidth = 10;
constexpr int kRanWidth = 16;

// Fewer decimals as the time grows, so that 268 ms still fits the column.
std::string formatTime(double us, int width = kTimeWidth) {
  char text[64];
  const int digits = us >= 1e6 ? 0 : us >= 1e5 ? 1 : 2;
  std::snprintf(text, sizeof text, "%*.*f", width, digits, us);
  return text;
}

std::string padded(const std::string& s, int width) {
  char text[128];
  std::snprintf(text, sizeof text, "%*s", width, s.c_str());
  return text;
}

bool isAuto(const std::string& name) { return name == "auto"; }

}  // namespace

bool ranForced(const std::string& name, const std::string& ran) {
  if (isAuto(name)) return true;
  if (ran.empty()) return false;
  // "ring" must match the algorithm of "ring/LL"; "ring/ll" all of it.
  const bool withProto = name.find('/') != std::string::npos;
  size_t start = 0;
  while (start <= ran.size()) {
    const size_t bar = ran.find('|', start);
    std::string one = ran.substr(start, bar == std::string::npos ? std::string::npos : bar - start);
    if (withProto)
      for (char& c : one) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else
      one = one.substr(0, one.find('/'));
    if (one != name) return false;
    if (bar == std::string::npos) break;
    start = bar + 1;
  }
  return true;
}

double pairedMedianRatio(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> ratios;
  for (size_t r = 0; r < a.size() && r < b.size(); ++r)
    if (a[r] >= 0 && b[r] > 0) ratios.push_back(a[r] / b[r]);
  if (ratios.empty()) return -1;
  std::sort(ratios.begin(), ratios.end());
  const size_t half = ratios.size() / 2;
  return ratios.size() % 2 ? ratios[half] : (ratios[half - 1] + ratios[half]) / 2;
}

AlgoRowSummary summarizeAlgoRow(const std::vector<std::string>& names, const AlgoRow& row) {
  AlgoRowSummary s;
  for (size_t i = 0; i < names.size() && i < row.cells.size(); ++i) {
    const AlgoCell& c = row.cells[i];
    if (isAuto(names[i])) {
      s.autoIndex = static_cast<int>(i);
      continue;
    }
    if (c.medianUs < 0 || !ranForced(names[i], c.ran)) continue;
    if (s.best < 0 || c.medianUs < row.cells[static_cast<size_t>(s.best)].medianUs) s.best = static_cast<int>(i);
  }
  if (s.autoIndex >= 0) {
    const AlgoCell& autoCell = row.cells[static_cast<size_t>(s.autoIndex)];
    for (size_t i = 0; i < names.size() && i < row.cells.size(); ++i) {
      const AlgoCell& c = row.cells[i];
      if (isAuto(names[i]) || c.medianUs < 0 || !ranForced(names[i], c.ran)) continue;
      const double paired = pairedMedianRatio(autoCell.roundsUs, c.roundsUs);
      if (paired >= 0 && paired > s.pairedAutoOverBest) {
        s.pairedAutoOverBest = paired;
        s.pairedAgainst = static_cast<int>(i);
      }
    }
  }
  if (s.best >= 0 && s.autoIndex >= 0) {
    const double autoUs = row.cells[static_cast<size_t>(s.autoIndex)].medianUs;
    const double bestUs = row.cells[static_cast<size_t>(s.best)].medianUs;
    if (autoUs >= 0 && bestUs > 0) s.autoOverBest = autoUs / bestUs;
  }
  return s;
}

void printAlgoTable(FILE* out, const std::vector<std::string>& names, const std::vector<AlgoRow>& rows) {
  bool hasAuto = false, hasForced = false;
  for (const auto& n : names) (isAuto(n) ? hasAuto : hasForced) = true;

  std::string head = "#" + padded("size(B)", 11);
  for (const auto& n : names)
    if (!isAuto(n)) head += " " + padded(n, kTimeWidth);
  if (hasAuto) head += " " + padded("auto", kTimeWidth) + " " + padded("auto ran", kRanWidth);
  if (hasForced) head += " " + padded("best", kTimeWidth) + " " + padded("best is", kRanWidth);
  if (hasAuto && hasForced) head += " " + padded("auto/best", kTimeWidth) + " " + padded("paired", kTimeWidth);
  std::fprintf(out, "%s\n", head.c_str());

  double worst = -1, worstPaired = -1;
  const AlgoRow* worstPairedRow = nullptr;
  AlgoRowSummary worstPairedSummary;
  int compared = 0, sameChoice = 0;  // sizes with auto and a best; of them, where auto ran what best ran
  const AlgoRow* worstRow = nullptr;
  AlgoRowSummary worstSummary;
  std::map<std::string, std::set<std::string>> fellBackTo;  // forced name -> what ran instead
  std::map<std::string, std::vector<size_t>> fellBackAt;
  for (const AlgoRow& row : rows) {
    const AlgoRowSummary s = summarizeAlgoRow(names, row);
    std::string line = padded(std::to_string(row.bytes), 12);
    for (size_t i = 0; i < names.size(); ++i) {
      if (isAuto(names[i])) continue;
      const AlgoCell& c = row.cells[i];
      if (c.medianUs >= 0 && ranForced(names[i], c.ran)) {
        line += " " + formatTime(c.medianUs);
      } else {
        line += " " + padded("n/a", kTimeWidth);
        fellBackTo[names[i]].insert(c.ran.empty() ? "nothing" : c.ran);
        fellBackAt[names[i]].push_back(row.bytes);
      }
    }
    const AlgoCell* autoCell = s.autoIndex >= 0 ? &row.cells[static_cast<size_t>(s.autoIndex)] : nullptr;
    const AlgoCell* bestCell = s.best >= 0 ? &row.cells[static_cast<size_t>(s.best)] : nullptr;
    if (hasAuto) {
      const bool measured = autoCell && autoCell->medianUs >= 0;
      line += " " + (measured ? formatTime(autoCell->medianUs) : padded("-", kTimeWidth));
      line += " " + padded(measured && !autoCell->ran.empty() ? autoCell->ran : "-", kRanWidth);
    }
    if (hasForced) {
      line += " " + (bestCell ? formatTime(bestCell->medianUs) : padded("-", kTimeWidth));
      line += " " + padded(bestCell ? bestCell->ran : "-", kRanWidth);
    }
    if (hasAuto && hasForced) {
      char ratio[32] = "-";
      if (s.autoOverBest >= 0) std::snprintf(ratio, sizeof ratio, "%.3f", s.autoOverBest);
      line += " " + padded(ratio, kTimeWidth);
      char paired[32] = "-";
      if (s.pairedAutoOverBest >= 0) std::snprintf(paired, sizeof paired, "%.3f", s.pairedAutoOverBest);
      line += " " + padded(paired, kTimeWidth);
      if (s.pairedAutoOverBest > worstPaired) {
        worstPaired = s.pairedAutoOverBest;
        worstPairedRow = &row;
        worstPairedSummary = s;
      }
      if (s.autoOverBest >= 0) {
        ++compared;
        sameChoice += autoCell->ran == bestCell->ran;
      }
      if (s.autoOverBest > worst) {
        worst = s.autoOverBest;
        worstRow = &row;
        worstSummary = s;
      }
    }
    std::fprintf(out, "%s\n", line.c_str());
  }

  if (hasAuto && hasForced) {
    if (worstRow)
      std::fprintf(out, "# worst auto/best: %.3f at %zu B (auto ran %s, best %s ran %s)\n", worst, worstRow->bytes,
                   worstRow->cells[static_cast<size_t>(worstSummary.autoIndex)].ran.c_str(),
                   names[static_cast<size_t>(worstSummary.best)].c_str(),
                   worstRow->cells[static_cast<size_t>(worstSummary.best)].ran.c_str());
    else
      std::fprintf(out, "# worst auto/best: - (no size has both auto and a forced algorithm that ran)\n");
    if (worstPairedRow)
      std::fprintf(out, "# worst paired: %.3f at %zu B (auto ran %s, against %s)\n", worstPaired,
                   worstPairedRow->bytes,
                   worstPairedRow->cells[static_cast<size_t>(worstPairedSummary.autoIndex)].ran.c_str(),
                   names[static_cast<size_t>(worstPairedSummary.pairedAgainst)].c_str());
    std::fprintf(out,
                 "# paired: the largest, over the forced algorithms, of the median over rounds of auto's time over"
                 " that algorithm's in the same round\n");
    // Where auto ran exactly what the best forced communicator ran, auto/best
    // measures noise, not the tuner.
    std::fprintf(out, "# auto ran the best's algorithm/protocol at %d of %d sizes\n", sameChoice, compared);
  }
  for (const auto& [name, sizes] : fellBackAt) {
    std::string list, ran;
    for (size_t b : sizes) list += (list.empty() ? "" : ", ") + std::to_string(b);
    for (const auto& r : fellBackTo[name]) ran += (ran.empty() ? "" : ", ") + r;
    std::fprintf(out, "# n/a: %s did not run at %s B (Loom ran %s: it does not apply there)\n", name.c_str(),
                 list.c_str(), ran.c_str());
  }
  std::fprintf(out, "# what ran:\n");
  for (const AlgoRow& row : rows) {
    std::string line = "#" + padded(std::to_string(row.bytes), 11) + ":";
    for (size_t i = 0; i < names.size(); ++i)
      line += " " + names[i] + "=" + (row.cells[i].ran.empty() ? "-" : row.cells[i].ran);
    std::fprintf(out, "%s\n", line.c_str());
  }
}

}  // namespace loom::perf
