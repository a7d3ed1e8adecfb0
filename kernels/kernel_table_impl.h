// Builds a KernelTable from the generic loops. Included exactly once, by each
// instruction-set translation unit, after it defines LOOM_KERNELS_ISA_NS, so
// every template below is instantiated in that unit's namespace and with that
// unit's compiler flags.
#pragma once

#ifndef LOOM_KERNELS_ISA_NS
#error "define LOOM_KERNELS_ISA_NS before including kernel_table_impl.h"
#endif

#include <cstdint>
#include <type_traits>

#include "kernels/kernel_table.h"
#include "kernels/reduce_loops.h"
#include "kernels/reduce_ops.h"
#include "kernels/reduce_simd_x86.h"

namespace loom::kernels {
inline namespace LOOM_KERNELS_ISA_NS {

template <class T, template <class> class Op>
void reduceKernel(void* dst, const void* a, const void* b, size_t count) {
  runBinary<T>(dst, a, b, count, Op<T>{});
}

template <class T>
void divideKernel(int nranks, void* dst, const void* src, size_t count) {
  runUnary<T>(dst, src, count, DivideBy<T>(nranks));
}

template <class T>
void sumDivideKernel(int nranks, void* dst, const void* a, const void* b, size_t count) {
  runBinary<T>(dst, a, b, count, SumThenDivide<T>(nranks));
}

template <class T>
void fillKernelRow(detail::KernelTable& table, DataType type) {
  const int t = static_cast<int>(type);
  table.reduce[t][static_cast<int>(RedOp::kSum)] = &reduceKernel<T, SumOp>;
  table.reduce[t][static_cast<int>(RedOp::kProd)] = &reduceKernel<T, ProdOp>;
  table.reduce[t][static_cast<int>(RedOp::kMax)] = &reduceKernel<T, MaxOp>;
  table.reduce[t][static_cast<int>(RedOp::kMin)] = &reduceKernel<T, MinOp>;
  table.reduce[t][static_cast<int>(RedOp::kAvg)] = &reduceKernel<T, SumOp>;  // Avg reduces as Sum
  if constexpr (std::is_integral_v<T>) {  // floats keep null entries: reduce.cc rejects them first
    table.reduce[t][static_cast<int>(RedOp::kBand)] = &reduceKernel<T, BandOp>;
    table.reduce[t][static_cast<int>(RedOp::kBor)] = &reduceKernel<T, BorOp>;
    table.reduce[t][static_cast<int>(RedOp::kBxor)] = &reduceKernel<T, BxorOp>;
  }
  table.divide[t] = &divideKernel<T>;
  table.sumDivide[t] = &sumDivideKernel<T>;
}

inline detail::KernelTable buildKernelTable() {
  detail::KernelTable table{};
  fillKernelRow<int8_t>(table, DataType::kInt8);
  fillKernelRow<uint8_t>(table, DataType::kUint8);
  fillKernelRow<int32_t>(table, DataType::kInt32);
  fillKernelRow<uint32_t>(table, DataType::kUint32);
  fillKernelRow<int64_t>(table, DataType::kInt64);
  fillKernelRow<uint64_t>(table, DataType::kUint64);
  fillKernelRow<Half>(table, DataType::kFloat16);
  fillKernelRow<float>(table, DataType::kFloat32);
  fillKernelRow<double>(table, DataType::kFloat64);
  fillKernelRow<Bfloat16>(table, DataType::kBfloat16);
  return table;
}

}  // namespace LOOM_KERNELS_ISA_NS
}  // namespace loom::kernels
