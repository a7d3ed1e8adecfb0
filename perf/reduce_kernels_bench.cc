// Compares the reduction kernels' instruction sets on a few (type, op) pairs
// at an L1-, L2- and memory-sized buffer. Bytes/s counts the memory traffic
// of one call: two source buffers read plus one destination written (3 x the
// buffer size), so it compares directly with memcpy bandwidth (2 x size).
// Before timing, every case checks its result against the portable kernel.
//
//   reduce_kernels_bench [--benchmark_filter=...]   (Google Benchmark flags)
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/reduce.h"

namespace {

using loom::DataType;
using loom::RedOp;
using loom::kernels::Isa;

// Finite, normal inputs (subnormals would measure the CPU's slow path).
void fillInputs(DataType type, std::vector<unsigned char>& buf, int seed) {
  const size_t count = buf.size() / loom::dataTypeSize(type);
  for (size_t i = 0; i < count; ++i) {
    const uint32_t k = static_cast<uint32_t>((i * 2654435761u + seed) % 97);
    switch (type) {
      case DataType::kFloat32: {
        const float v = 1.0f + static_cast<float>(k) / 64.0f;
        std::memcpy(&buf[i * 4], &v, 4);
        break;
      }
      case DataType::kFloat16: {
        const uint16_t bits = static_cast<uint16_t>(0x3C00 + k * 5);  // [1, 2)
        std::memcpy(&buf[i * 2], &bits, 2);
        break;
      }
      case DataType::kBfloat16: {
        const uint16_t bits = static_cast<uint16_t>(0x3F80 + k);  // [1, 2)
        std::memcpy(&buf[i * 2], &bits, 2);
        break;
      }
      default:
        for (size_t b = 0; b < loom::dataTypeSize(type); ++b)
          buf[i * loom::dataTypeSize(type) + b] = static_cast<unsigned char>(k + b * 31);
    }
  }
}

void runCase(benchmark::State& state, Isa isa, DataType type, RedOp op) {
  if (!loom::kernels::isaSupported(isa)) {
    state.SkipWithError("instruction set not supported on this CPU/build");
    return;
  }
  const size_t bytes = static_cast<size_t>(state.range(0));
  const size_t count = bytes / loom::dataTypeSize(type);
  std::vector<unsigned char> a(bytes), b(bytes), dst(bytes), expected(bytes);
  fillInputs(type, a, 1);
  fillInputs(type, b, 2);
  loom::kernels::reduceWithIsa(Isa::kPortable, type, op, expected.data(), a.data(), b.data(), count);
  loom::kernels::reduceWithIsa(isa, type, op, dst.data(), a.data(), b.data(), count);
  if (std::memcmp(dst.data(), expected.data(), bytes) != 0) {
    state.SkipWithError("result differs from the portable kernel");
    return;
  }
  for (auto _ : state) {
    loom::kernels::reduceWithIsa(isa, type, op, dst.data(), a.data(), b.data(), count);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(3 * bytes));
}

struct BenchCase {
  DataType type;
  RedOp op;
};

void registerAll() {
  const BenchCase cases[] = {{DataType::kFloat32, RedOp::kSum},
                             {DataType::kBfloat16, RedOp::kSum},
                             {DataType::kFloat16, RedOp::kSum},
                             {DataType::kInt8, RedOp::kMax}};
  for (const BenchCase& c : cases) {
    for (Isa isa : {Isa::kPortable, Isa::kAvx2, Isa::kAvx512}) {
      const std::string name = std::string("reduce/") + loom::dataTypeName(c.type) + "_" +
                               loom::redOpName(c.op) + "/" + loom::kernels::isaName(isa);
      benchmark::RegisterBenchmark(name.c_str(), runCase, isa, c.type, c.op)
          ->Arg(4 << 10)
          ->Arg(256 << 10)
          ->Arg(16 << 20);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  registerAll();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
