// Tests of the perf harness itself: element conversions, the generated inputs
// and their checker (against a reference reduction computed here), the
// command-line parser, the table's columns and the memory-traffic bound.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "perf/harness/datatypes.h"
#include "perf/harness/memory_bound.h"
#include "perf/harness/nccl_json.h"
#include "perf/harness/perf_options.h"
#include "perf/harness/report.h"
#include "perf/harness/test_data.h"

namespace loom::perf {
namespace {

std::vector<loomDataType_t> allTypes() {
  std::vector<loomDataType_t> types;
  for (int t = 0; t < loomNumTypes; ++t) types.push_back(static_cast<loomDataType_t>(t));
  return types;
}

// --- half and bfloat16 -------------------------------------------------------

TEST(HalfTest, EveryNonNanPatternRoundTrips) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const bool isNan = (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0;
    const uint16_t back = floatToHalf(halfToFloat(static_cast<uint16_t>(h)));
    if (isNan) EXPECT_TRUE(std::isnan(halfToFloat(back))) << h;
    else EXPECT_EQ(back, h);
  }
}

TEST(HalfTest, KnownValues) {
  EXPECT_EQ(floatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(floatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00);        // rounds to infinity
  EXPECT_EQ(halfToFloat(floatToHalf(2049.0f)), 2048.0f);  // tie goes to even
  EXPECT_EQ(halfToFloat(floatToHalf(2051.0f)), 2052.0f);
  EXPECT_EQ(floatToHalf(0x1p-24f), 0x0001);         // smallest subnormal
  EXPECT_EQ(floatToHalf(0x1p-25f), 0x0000);         // tie between 0 and 2^-24 goes to even
  EXPECT_EQ(floatToHalf(0x3p-25f), 0x0002);
  EXPECT_EQ(floatToHalf(0x1.ffcp-15f), 0x0400);     // rounds up into the smallest normal
}

// Nearest-even, checked against the neighbours of the chosen value.
template <class ToBits, class ToFloat>
void expectNearest(float f, ToBits toBits, ToFloat toFloat) {
  const uint16_t bits = toBits(f);
  const double chosen = toFloat(bits);
  const double error = std::fabs(chosen - f);
  for (int delta : {-1, 1}) {
    const uint16_t neighbour = static_cast<uint16_t>(bits + delta);
    const double other = toFloat(neighbour);
    if (std::isnan(other) || std::isinf(other) || std::signbit(other) != std::signbit(chosen)) continue;
    const double otherError = std::fabs(other - f);
    EXPECT_LE(error, otherError) << f;
    if (error == otherError) {
      EXPECT_EQ(bits & 1, 0) << "tie not to even for " << f;
    }
  }
}

TEST(HalfTest, RoundsToNearestEven) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-65000.0f, 65000.0f);
  std::uniform_real_distribution<float> tiny(-1e-4f, 1e-4f);
  for (int i = 0; i < 20000; ++i) {
    expectNearest(dist(rng), floatToHalf, halfToFloat);
    expectNearest(tiny(rng), floatToHalf, halfToFloat);
  }
}

TEST(Bfloat16Test, RoundTripsAndRoundsToNearestEven) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const float f = bfloat16ToFloat(static_cast<uint16_t>(b));
    if (std::isnan(f)) EXPECT_TRUE(std::isnan(bfloat16ToFloat(floatToBfloat16(f))));
    else EXPECT_EQ(floatToBfloat16(f), b);
  }
  EXPECT_EQ(bfloat16ToFloat(floatToBfloat16(257.0f)), 256.0f);  // tie to even
  EXPECT_EQ(bfloat16ToFloat(floatToBfloat16(259.0f)), 260.0f);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-1e6f, 1e6f);
  for (int i = 0; i < 20000; ++i) expectNearest(dist(rng), floatToBfloat16, bfloat16ToFloat);
}

// --- inputs and checker --------------------------------------------------------

constexpr size_t kCount = 777;

struct Case {
  loomDataType_t type;
  loomRedOp_t op;
  int nranks;
};

std::vector<Case> allCases() {
  std::vector<Case> cases;
  for (loomDataType_t type : allTypes())
    for (int op = 0; op < loomBand; ++op)  // the ops the perf tools offer (bitwise ones are not)
      for (int n : {1, 2, 3, 4, 7, 8, 16, 64}) cases.push_back({type, static_cast<loomRedOp_t>(op), n});
  return cases;
}

std::vector<std::vector<char>> rankInputs(const DataSpec& spec, size_t first) {
  std::vector<std::vector<char>> inputs(spec.nranks, std::vector<char>(kCount * typeSize(spec.type)));
  for (int r = 0; r < spec.nranks; ++r) fillInputs(spec, r, first, inputs[r].data(), kCount);
  return inputs;
}

// The reduction computed in double from the stored inputs (the values are small
// integers, so the double arithmetic is exact), then stored in the type.
std::vector<char> referenceResult(const DataSpec& spec, const std::vector<std::vector<char>>& inputs) {
  std::vector<char> out(kCount * typeSize(spec.type));
  for (size_t i = 0; i < kCount; ++i) {
    double acc = loadElement(spec.type, inputs[0].data(), i);
    for (int r = 1; r < spec.nranks; ++r) {
      const double v = loadElement(spec.type, inputs[r].data(), i);
      if (spec.op == loomProd) acc *= v;
      else if (spec.op == loomMax) acc = std::max(acc, v);
      else if (spec.op == loomMin) acc = std::min(acc, v);
      else acc += v;
    }
    if (spec.op == loomAvg) acc = isFloatType(spec.type) ? acc / spec.nranks : std::trunc(acc / spec.nranks);
    storeElement(spec.type, out.data(), i, acc);
  }
  return out;
}

// The reduction as a kernel would do it: in the element type, one rank at a
// time, in the given order (rounding after every step).
std::vector<char> reduceInType(const DataSpec& spec, const std::vector<std::vector<char>>& inputs, bool reverse) {
  std::vector<char> acc = inputs[reverse ? spec.nranks - 1 : 0];
  for (int k = 1; k < spec.nranks; ++k) {
    const auto& in = inputs[reverse ? spec.nranks - 1 - k : k];
    for (size_t i = 0; i < kCount; ++i) {
      const double a = loadElement(spec.type, acc.data(), i), b = loadElement(spec.type, in.data(), i);
      const double r = spec.op == loomProd ? a * b : spec.op == loomMax ? std::max(a, b)
                       : spec.op == loomMin ? std::min(a, b) : a + b;
      storeElement(spec.type, acc.data(), i, r);
    }
  }
  return acc;
}

TEST(TestDataTest, CheckerAcceptsTheReferenceAndRejectsEveryCorruption) {
  for (const Case& c : allCases()) {
    SCOPED_TRACE(std::string(typeName(c.type)) + " " + opName(c.op) + " n=" + std::to_string(c.nranks));
    const DataSpec spec{c.type, c.op, c.nranks, 1234};
    const size_t first = 100;
    const auto inputs = rankInputs(spec, first);
    std::vector<char> result = referenceResult(spec, inputs);
    ASSERT_EQ(countWrongReduced(spec, first, result.data(), kCount), 0);
    // Off by one unit (integers) or by 4 ulp (floats: beyond avg's tolerance).
    for (size_t i : {size_t{0}, kCount / 2, kCount - 1}) {
      std::vector<char> bad = result;
      const double v = loadElement(c.type, bad.data(), i);
      const double step = isFloatType(c.type) ? 4 * unitInLastPlace(c.type, std::fabs(v)) : 1.0;
      storeElement(c.type, bad.data(), i, v > 0 ? v - step : v + step);
      EXPECT_EQ(countWrongReduced(spec, first, bad.data(), kCount), 1) << "index " << i;
    }
    // A shifted window of indices is wrong almost everywhere.
    EXPECT_GT(countWrongReduced(spec, first + 1, result.data(), kCount), 0);
    std::vector<char> poison(result.size());
    fillPoison(c.type, poison.data(), kCount);
    EXPECT_EQ(countWrongReduced(spec, first, poison.data(), kCount), static_cast<int64_t>(kCount));
  }
}

TEST(TestDataTest, EveryReductionOrderIsExact) {
  for (const Case& c : allCases()) {
    if (c.op == loomAvg) continue;  // avg's division rounds; the checker allows ulps for it
    SCOPED_TRACE(std::string(typeName(c.type)) + " " + opName(c.op) + " n=" + std::to_string(c.nranks));
    const DataSpec spec{c.type, c.op, c.nranks, 99};
    const auto inputs = rankInputs(spec, 0);
    EXPECT_EQ(countWrongReduced(spec, 0, reduceInType(spec, inputs, false).data(), kCount), 0);
    EXPECT_EQ(countWrongReduced(spec, 0, reduceInType(spec, inputs, true).data(), kCount), 0);
  }
}

TEST(TestDataTest, InputsVaryAndCopiesAreChecked) {
  for (loomDataType_t type : allTypes()) {
    const DataSpec spec{type, loomNumOps, 4, 5};
    std::vector<char> rank2(kCount * typeSize(type));
    fillInputs(spec, 2, 0, rank2.data(), kCount);
    EXPECT_EQ(countWrongCopied(spec, 2, 0, rank2.data(), kCount), 0) << typeName(type);
    EXPECT_GT(countWrongCopied(spec, 1, 0, rank2.data(), kCount), static_cast<int64_t>(kCount / 2)) << typeName(type);
    int distinct = 0;
    for (size_t i = 1; i < kCount; ++i) distinct += loadElement(type, rank2.data(), i) != loadElement(type, rank2.data(), 0);
    EXPECT_GT(distinct, static_cast<int>(kCount / 2)) << typeName(type);
  }
}

// The tolerance is two ulps from the exact quotient: the correctly rounded
// value (within half an ulp) plus one ulp passes, plus three ulps does not.
TEST(TestDataTest, FloatAvgAllowsTwoUlps) {
  const DataSpec spec{loomFloat32, loomAvg, 3, 8};
  const auto inputs = rankInputs(spec, 0);
  std::vector<char> result = referenceResult(spec, inputs);
  float* values = reinterpret_cast<float*>(result.data());
  size_t i = 0;
  while (std::fabs(values[i]) < 1) ++i;  // an element whose ulp is not tiny
  const float rounded = values[i];
  values[i] = std::nextafter(rounded, 1e9f);
  EXPECT_EQ(countWrongReduced(spec, 0, result.data(), kCount), 0);
  values[i] = std::nextafter(std::nextafter(std::nextafter(rounded, 1e9f), 1e9f), 1e9f);
  EXPECT_EQ(countWrongReduced(spec, 0, result.data(), kCount), 1);
}

// --- options -------------------------------------------------------------------

ParseOutcome parse(std::vector<std::string> args, PerfOptions* o) {
  args.insert(args.begin(), "tool");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return parseOptions(static_cast<int>(args.size()), argv.data(), o, /*quiet=*/true);
}

TEST(OptionsTest, ParsesEveryFlag) {
  PerfOptions o;
  ASSERT_EQ(parse({"-t", "3", "-b", "8", "-e", "64M", "-f", "4", "-n", "7", "-w", "0", "-m", "2", "-c", "0", "-o",
                   "all", "-d", "bfloat16", "-r", "2", "-z", "1", "-a", "3", "-T", "2.5", "-J", "x.json", "-i", "1K"},
                  &o),
            ParseOutcome::kRun);
  EXPECT_EQ(o.threads, 3);
  EXPECT_EQ(o.minBytes, 8u);
  EXPECT_EQ(o.maxBytes, 64u << 20);
  EXPECT_EQ(o.stepFactor, 4);
  EXPECT_EQ(o.stepBytes, 1024u);
  EXPECT_EQ(o.iters, 7);
  EXPECT_EQ(o.warmupIters, 0);
  EXPECT_EQ(o.aggIters, 2);
  EXPECT_EQ(o.check, 0);
  EXPECT_EQ(o.ops.size(), 5u);
  EXPECT_EQ(o.types, std::vector<loomDataType_t>{loomBfloat16});
  EXPECT_EQ(o.root, 2);
  EXPECT_TRUE(o.blocking);
  EXPECT_EQ(o.combine, TimeCombine::kMax);
  EXPECT_EQ(o.timeoutSeconds, 2.5);
  EXPECT_EQ(o.jsonPath, "x.json");
  EXPECT_EQ(o.memoryBound, 0);  // Loom's extras are off unless asked for
  EXPECT_FALSE(o.memoryReport);
  EXPECT_FALSE(o.algoColumn);
  // nccl-tests' meanings: -c counts checked calls, -M asks for the memory
  // report, -z 2 is accepted (blocking without a barrier, as Loom's 1 is).
  PerfOptions nccl;
  ASSERT_EQ(parse({"-c", "5", "-M", "1", "-z", "2", "--memory", "1"}, &nccl), ParseOutcome::kRun);
  EXPECT_EQ(nccl.check, 5);
  EXPECT_TRUE(nccl.memoryReport);
  EXPECT_TRUE(nccl.blocking);
  EXPECT_EQ(nccl.memoryBound, 0);
  // nccl-tests' flags for features Loom lacks: accepted when off, refused otherwise.
  PerfOptions off;
  EXPECT_EQ(parse({"-N", "1", "-p", "0", "-S", "0", "--unalign", "0", "-I", "0"}, &off), ParseOutcome::kRun);
  for (const char* on : {"-N", "-p", "-S", "-u", "-I", "-R"}) EXPECT_EQ(parse({on, "2"}, &off), ParseOutcome::kError) << on;
  PerfOptions loom;
  ASSERT_EQ(parse({"--mem-bound", "1", "--algo-column", "--loom-json", "l.json"}, &loom), ParseOutcome::kRun);
  EXPECT_EQ(loom.memoryBound, 1);
  EXPECT_TRUE(loom.algoColumn);
  EXPECT_EQ(loom.loomJsonPath, "l.json");
  EXPECT_FALSE(loom.memoryReport);
  EXPECT_EQ(loom.commandLine, (std::vector<std::string>{"tool", "--mem-bound", "1", "--algo-column", "--loom-json",
                                                          "l.json"}));
  PerfOptions all;
  ASSERT_EQ(parse({"--datatype", "all", "--op", "min", "--nthreads", "2"}, &all), ParseOutcome::kRun);
  EXPECT_EQ(all.types.size(), static_cast<size_t>(loomNumTypes));
  EXPECT_EQ(all.ops, std::vector<loomRedOp_t>{loomMin});
  EXPECT_EQ(all.threads, 2);
}

TEST(OptionsTest, RejectsBadFlags) {
  const std::vector<std::vector<std::string>> bad = {
      {"-x"},          {"-b", "12Q"},     {"-b", "-5"},       {"-e", ""},          {"-d", "fp8"},
      {"-o", "xor"},   {"-t", "0"},       {"-n", "0"},        {"-c", "-1"},         {"-a", "4"},
      {"-z", "yes"},   {"-g", "0"},       {"-T", "0"},        {"-b", "1M", "-e", "1K"},
      {"-f", "1", "-i", "0", "-b", "8", "-e", "16"},          {"-b", "0", "-f", "2", "-e", "8"},
      {"stray"},       {"-n"},            {"--nosuch"},       {"-r", "x"},         {"-M", "2"},
      {"-M", "on"},    {"-z", "3"},       {"--mem-bound", "2"}, {"--loom-json", ""}};
  for (const auto& args : bad) {
    PerfOptions o;
    EXPECT_EQ(parse(args, &o), ParseOutcome::kError) << args[0];
  }
  PerfOptions o;
  EXPECT_EQ(parse({"-h"}, &o), ParseOutcome::kHelp);
  EXPECT_EQ(parse({"-b", "8", "--version"}, &o), ParseOutcome::kHelp);  // prints it; the tool exits 0
  EXPECT_EQ(parse({"--version=1"}, &o), ParseOutcome::kError);
}

TEST(OptionsTest, SizesAndSweep) {
  size_t bytes = 0;
  ASSERT_TRUE(parseSize("3K", &bytes));
  EXPECT_EQ(bytes, 3072u);
  ASSERT_TRUE(parseSize("2g", &bytes));
  EXPECT_EQ(bytes, 2ull << 30);
  EXPECT_FALSE(parseSize("1.5M", &bytes));
  EXPECT_FALSE(parseSize("M", &bytes));
  PerfOptions o;
  o.minBytes = 8;
  o.maxBytes = 64u << 20;
  o.stepFactor = 4;
  const auto sizes = sweepSizes(o);
  ASSERT_EQ(sizes.size(), 12u);  // 8 B .. 32 MiB: 64 MiB is not 8 x a power of 4
  EXPECT_EQ(sizes.back(), 32u << 20);
  o.stepFactor = 1;
  o.minBytes = 100;
  o.maxBytes = 350;
  o.stepBytes = 100;
  EXPECT_EQ(sweepSizes(o), (std::vector<size_t>{100, 200, 300}));
  o.minBytes = o.maxBytes = 5;
  o.stepBytes = 0;
  EXPECT_EQ(sweepSizes(o), std::vector<size_t>{5});
}

// --- the table ------------------------------------------------------------------

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// What a print function wrote, split into lines.
template <class Print>
std::vector<std::string> printedLines(Print print) {
  char* text = nullptr;
  size_t size = 0;
  FILE* out = open_memstream(&text, &size);
  print(out);
  std::fclose(out);
  std::vector<std::string> lines;
  std::istringstream in(std::string(text, size));
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::free(text);
  return lines;
}

ResultRow sampleRow() {
  ResultRow row;
  row.bytes = 64u << 20;
  row.count = 16u << 20;
  row.redop = "sum";
  row.outOfPlace = {12345.0, 5.44, 8.16, 0, 0.615, "ring/Simple"};
  row.inPlace = {23456.0, 2.86, 4.29, -1, -1, "ring/Simple"};
  return row;
}

// nccl-tests' 13 columns, alone by default; the shares, the copy and the
// algorithm only when asked for, after them.
TEST(ReportTest, RowKeepsNcclTestsColumnsThenSharesThenAlgorithm) {
  const ResultRow row = sampleRow();
  const auto plain = words(printedLines([&](FILE* f) { printRow(f, row); }).at(0));
  ASSERT_EQ(plain.size(), 13u);
  EXPECT_EQ(plain[0], "67108864");
  EXPECT_EQ(plain[5], "12345.0");  // two decimals do not fit in 7 characters
  EXPECT_EQ(plain[7], "8.16");
  EXPECT_EQ(plain[8], "0");
  EXPECT_EQ(plain[12], "N/A");

  const auto bound = words(printedLines([&](FILE* f) { printRow(f, row, ExtraColumns{true, false, true}); }).at(0));
  ASSERT_EQ(bound.size(), 16u);
  EXPECT_EQ(bound[13], "61.5");  // percent, one decimal
  EXPECT_EQ(bound[14], "-");     // not reported
  EXPECT_EQ(bound[15], "ring/Simple");

  ResultRow mixed = row;
  mixed.inPlace.algorithm = "tree/LL";
  EXPECT_EQ(algorithmColumn(mixed), "ring/Simple|tree/LL");
  EXPECT_EQ(words(printedLines([&](FILE* f) { printRow(f, mixed, ExtraColumns{false, false, true}); }).at(0)).back(),
            "ring/Simple|tree/LL");
}

// nccl-tests' row layout: fixed widths, right-aligned, two spaces apart.
TEST(ReportTest, RowHasNcclTestsWidths) {
  ResultRow row;
  row.bytes = 8;
  row.count = 2;
  row.redop = "sum";
  row.root = -1;
  row.outOfPlace = {9.5, 0.0, 0.0, 0, -1, "-"};
  row.inPlace = {123456.0, 1234.5, 99999.0, 1234567, -1, "-"};
  EXPECT_EQ(printedLines([&](FILE* f) { printRow(f, row); }).at(0),
            "           8             2     float     sum      -1     9.50    0.00    0.00       0   123456"
            "  1234.5   99999  1.23457e+06");
}

TEST(ReportTest, NumbersFitTheirColumn) {
  EXPECT_EQ(fitNumber(1.0, 7), "   1.00");
  EXPECT_EQ(fitNumber(1234.567, 7), "1234.57");
  EXPECT_EQ(fitNumber(12345.67, 7), "12345.7");
  EXPECT_EQ(fitNumber(1234567.0, 7), "1234567");
  EXPECT_EQ(fitNumber(123456789.0, 7), "1.2e+08");
  EXPECT_EQ(fitNumber(999.994, 6), "999.99");
  EXPECT_EQ(fitNumber(12345.0, 6), " 12345");
  EXPECT_EQ(fitNumber(1234567.0, 6), " 1e+06");
}

// Each title line has one title per column of a row (after its "#").
TEST(ReportTest, HeaderTitlesEveryColumn) {
  for (bool bound : {false, true})
    for (bool copy : {false, true})
      for (bool algorithm : {false, true}) {
        const ExtraColumns extra{bound, copy, algorithm};
        ResultRow sample = sampleRow();
        if (copy) sample.copy = {3.5, 1.25};
        const auto header = printedLines([&](FILE* f) { printTableHeader(f, extra); });
        ASSERT_EQ(header.size(), 4u);
        EXPECT_EQ(header[0], "#");
        const auto titles = words(header[2]);
        const auto units = words(header[3]);
        const auto row = words(printedLines([&](FILE* f) { printRow(f, sample, extra); }).at(0));
        ASSERT_EQ(titles.front(), "#");
        EXPECT_EQ(titles.size() - 1, row.size()) << "bound " << bound << " copy " << copy;
        EXPECT_EQ(titles.back() == "algorithm", algorithm);
        EXPECT_EQ(header[2].find("%mem") != std::string::npos, bound);
        EXPECT_EQ(header[2].find("%copy") != std::string::npos, copy);
        EXPECT_EQ(header[3].find("(oop)") != std::string::npos, bound || copy);
        // nccl-tests ends its title lines with a space; so does the plain table.
        EXPECT_EQ(header[2].back() == ' ', !extra.any());
        EXPECT_FALSE(units.empty());
      }
}

TEST(ReportTest, FooterAndMemoryLineAreNcclTests) {
  RunSummary s;
  s.toolName = "all_reduce_perf";
  s.avgBusBw = 1.5;
  EXPECT_EQ(printedLines([&](FILE* f) { printFooter(f, s); }),
            (std::vector<std::string>{"# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 1.5 ", "#",
                                      "# Collective test concluded: all_reduce_perf"}));
  s.outOfBounds = 3;
  s.minBusBw = 2.0;  // NCCL_TESTS_MIN_BW: 1.5 < 90% of 2
  const auto failed = printedLines([&](FILE* f) { printFooter(f, s); });
  EXPECT_EQ(failed.at(0), "# Out of bounds values : 3 FAILED");
  EXPECT_EQ(failed.at(1), "# Avg bus bandwidth    : 1.5 FAILED");
  s.minBusBw = 1.6;
  EXPECT_EQ(printedLines([&](FILE* f) { printFooter(f, s); }).at(1), "# Avg bus bandwidth    : 1.5 OK");
  EXPECT_EQ(printedLines([&](FILE* f) { printMemoryUsage(f, 5 << 20, 2048, 0); }).at(0),
            "# GPU memory usage     : Initialization 5.00 MB | User-Allocated 2.00 KB | Collective 0.00 B"
            " | Total  5.00 MB");
  EXPECT_EQ(printedLines([&](FILE* f) { printMemoryUsage(f, 150ll << 30, 20ll << 20, 512); }).at(0),
            "# GPU memory usage     : Initialization 150 GB | User-Allocated 20.0 MB | Collective 512 B"
            " | Total  150 GB");
}

TEST(ReportTest, HeaderIsNcclTests) {
  PerfOptions o;
  o.threads = 2;
  o.minBytes = 8;
  o.maxBytes = 1024;
  o.stepFactor = 2;
  o.check = 3;
  const auto lines = printedLines([&](FILE* f) { printHeader(f, o, "all_reduce_perf", HeaderVersions{100, 101}); });
  EXPECT_EQ(lines, (std::vector<std::string>{
                       std::string("# nccl-tests version ") + kNcclTestsFormatVersion + " nccl-headers=100 nccl-library=101",
                       "# Collective test starting: all_reduce_perf",
                       "# nThread 2 nGpus 1 minBytes 8 maxBytes 1024 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1"
                       " validation: 3 graph: 0 unalign: 0",
                       "#"}));
  o.blocking = true;
  EXPECT_EQ(printedLines([&](FILE* f) { printHeader(f, o, "x", {}); }).at(3),
            "# Blocking Enabled: wait after each inner iteration (-m), no barrier ");
}

TEST(NcclJsonTest, StringsStayValidJson) {
  EXPECT_EQ(jsonString("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(jsonString("x\ny\tz\x01\xc3"), "\"x\\ny\\tz\\u0001\\u00c3\"");
}

TEST(NcclJsonTest, SecretsAreNotRecorded) {
  EXPECT_EQ(redactedVariable("LOOM_JOB_SECRET=abc"), "LOOM_JOB_SECRET=<redacted>");
  EXPECT_EQ(redactedVariable("hf_token=x=y"), "hf_token=<redacted>");
  EXPECT_EQ(redactedVariable("AWS_SECRET_ACCESS_KEY="), "AWS_SECRET_ACCESS_KEY=<redacted>");
  EXPECT_EQ(redactedVariable("PATH=/usr/bin"), "PATH=/usr/bin");
  EXPECT_EQ(redactedVariable("NCCL_DEBUG=INFO"), "NCCL_DEBUG=INFO");
  EXPECT_EQ(redactedVariable("ODD"), "ODD");
}

// Like nccl-tests, -J never overwrites: an existing name gets .0, .1, ...
TEST(NcclJsonTest, NeverOverwritesAFile) {
  char dir[] = "/tmp/loom_nccl_json_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/r.json";
  std::vector<std::string> said;
  for (int i = 0; i < 3; ++i) {
    const auto lines = printedLines([&](FILE* log) {
      FILE* f = createNcclJson(path, log);
      ASSERT_NE(f, nullptr);
      std::fclose(f);
    });
    said.push_back(lines.at(0));
  }
  EXPECT_EQ(said, (std::vector<std::string>{"# Writing JSON output to " + path, "# Writing JSON output to " + path + ".0",
                                            "# Writing JSON output to " + path + ".1"}));
  const auto refused = printedLines([&](FILE* log) { EXPECT_EQ(createNcclJson("/nonexistent/dir/r.json", log), nullptr); });
  EXPECT_EQ(refused.at(0), "# skipping json output; /nonexistent/dir/r.json not accessible");
  for (const char* name : {"/r.json", "/r.json.0", "/r.json.1"}) std::remove((std::string(dir) + name).c_str());
  rmdir(dir);
}

// --- the memory-traffic bound ------------------------------------------------

// Counted directly: each rank reads its input (n x S), writes its output
// (n x S), and reads the n-1 reduced slices of the others ((n-1) x S).
TEST(MemoryBoundTest, AllReduceTrafficIsOneCopy) {
  for (int n : {1, 2, 3, 4, 8}) {
    const double reads = n + (n - 1), writes = n;
    EXPECT_EQ(allReduceMemTrafficFactor(n), reads + writes) << n;
  }
}

TEST(MemoryBoundTest, ShareIsBoundTimeOverMeasuredTime) {
  const size_t bytes = 64u << 20;
  const double stream = 10e9;
  const double boundSeconds = 11.0 * bytes / stream;
  EXPECT_DOUBLE_EQ(memoryBoundShare(11.0, bytes, 2 * boundSeconds, stream), 0.5);
  EXPECT_DOUBLE_EQ(memoryBoundShare(11.0, bytes, boundSeconds, stream), 1.0);
  EXPECT_DOUBLE_EQ(memoryBoundShare(5.0, kMemoryBoundMinBytes, 5.0 * kMemoryBoundMinBytes / stream / 0.8, stream), 0.8);
  EXPECT_LT(memoryBoundShare(11.0, kMemoryBoundMinBytes - 1, 1.0, stream), 0);  // latency, not traffic
  EXPECT_LT(memoryBoundShare(11.0, bytes, 0.0, stream), 0);
  EXPECT_LT(memoryBoundShare(11.0, bytes, 1.0, 0.0), 0);
}

TEST(MemoryBoundTest, StreamBufferStaysPastCachesAndWithinAGigabyte) {
  for (int n : {1, 2, 4, 8}) EXPECT_EQ(streamBufferBytes(n), 64u << 20) << n;
  EXPECT_EQ(streamBufferBytes(16), 32u << 20);
  EXPECT_EQ(streamBufferBytes(64), 16u << 20);
  EXPECT_EQ(streamBufferBytes(1000), 16u << 20);
}

// An executor whose ranks all report the same slowest time: the bandwidth is
// then exactly ranks x copies x 2 x buffer / that time.
class FixedTimeExecutor final : public RankExecutor {
 public:
  FixedTimeExecutor(int nranks, double slowest) : nranks_(nranks), slowest_(slowest) {}
  int rank() const override { return 0; }
  int nranks() const override { return nranks_; }
  void launch(const CollArgs&) override {}
  void groupStart() override {}
  void groupEnd() override {}
  void synchronize() override {}
  void barrier() override { ++barriers; }
  double allReduceDouble(double value, loomRedOp_t op) override {
    EXPECT_EQ(op, loomMax);  // a trial lasts as long as its slowest rank
    EXPECT_GT(value, 0);
    return slowest_ > 0 ? slowest_ : value;
  }
  int64_t allReduceSum(int64_t value) override { return value; }
  std::vector<RankInfo> allGatherInfo(const RankInfo& mine) override { return {mine}; }
  int barriers = 0;

 private:
  int nranks_;
  double slowest_;
};

TEST(MemoryBoundTest, StreamBandwidthCountsReadsAndWritesOfEveryRank) {
  FixedTimeExecutor executor(3, 0.25);
  const StreamBandwidth s = measureStreamBandwidth(executor, 1u << 20, 2, 3);
  EXPECT_EQ(executor.barriers, 3);  // every trial starts together
  EXPECT_EQ(s.bufferBytes, 1u << 20);
  EXPECT_EQ(s.copies, 2);
  EXPECT_EQ(s.trials, 3);
  EXPECT_DOUBLE_EQ(s.bytesPerSecond, 3 * 2 * 2.0 * (1u << 20) / 0.25);
}

TEST(MemoryBoundTest, StreamBandwidthOfThisHostIsPlausible) {
  FixedTimeExecutor executor(1, 0);  // one rank, its own time
  const StreamBandwidth s = measureStreamBandwidth(executor, 16u << 20, 2, 2);
  // Any host copies faster than 100 MB/s and slower than 10 TB/s.
  EXPECT_GT(s.bytesPerSecond, 1e8);
  EXPECT_LT(s.bytesPerSecond, 1e13);
}

}  // namespace
}  // namespace loom::perf
