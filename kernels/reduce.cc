// The dispatcher: validates arguments, picks the kernel table once per
// process, and forwards to the (type, op) entry.
//
// reduce.h returns void, so bad arguments cannot become a Status here: they
// are reported as a WARN on the KERNEL subsystem and the call writes nothing.
// The communicator validates user input before it gets this far; these checks
// keep an internal mistake from turning into a wild write or a crash.
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/config.h"
#include "common/log.h"
#include "kernels/isa_select.h"
#include "kernels/kernel_table.h"
#include "kernels/reduce.h"

namespace loom::kernels {
namespace {

const detail::KernelTable* tableFor(Isa isa) {
  if (!isaSupported(isa)) return nullptr;
  switch (isa) {
    case Isa::kPortable: return &detail::portableKernelTable();
    case Isa::kAvx2: return detail::avx2KernelTable();
    case Isa::kAvx512: return detail::avx512KernelTable();
  }
  return nullptr;
}

struct ActiveIsa {
  Isa isa;
  const detail::KernelTable* table;
};

// Decided on first use; LOOM_KERNEL_ISA is read exactly once.
const ActiveIsa& active() {
  static const ActiveIsa choice = [] {
    std::string warning;
    const Isa isa = detail::capIsa(detail::bestSupportedIsa(), readKnob("LOOM_KERNEL_ISA"), &warning);
    const Logger& log = Logger::process();
    if (!warning.empty()) LOOM_WARN(log, kSubsysKernel, "%s", warning.c_str());
    LOOM_INFO(log, kSubsysKernel, "reduction kernels use %s", isaName(isa));
    return ActiveIsa{isa, tableFor(isa)};
  }();
  return choice;
}

// The checks are inline and their reports out of line: every reduction
// call passes through them, and an 8-byte all-reduce notices a call.
[[gnu::cold, gnu::noinline]] bool reportTypeOrOp(const char* caller, DataType type, RedOp op) {
  if (!isValidDataType(static_cast<int>(type)))
    LOOM_WARN(Logger::process(), kSubsysKernel, "%s: invalid datatype %d; nothing written", caller,
              static_cast<int>(type));
  else if (!isValidRedOp(static_cast<int>(op)))
    LOOM_WARN(Logger::process(), kSubsysKernel, "%s: invalid reduction op %d; nothing written", caller,
              static_cast<int>(op));
  else
    LOOM_WARN(Logger::process(), kSubsysKernel, "%s: %s takes integer types, not %s; nothing written", caller,
              redOpName(op), dataTypeName(type));
  return false;
}

[[gnu::cold, gnu::noinline]] bool reportNullBuffer(const char* caller, const void* dst, const void* a, size_t count) {
  LOOM_WARN(Logger::process(), kSubsysKernel, "%s: %s is null with count %zu; nothing written", caller,
            dst == nullptr ? "dst" : (a == nullptr ? "a" : "b"), count);
  return false;
}

[[gnu::cold, gnu::noinline]] bool reportRanks(const char* caller, int nranks) {
  LOOM_WARN(Logger::process(), kSubsysKernel, "%s: nranks %d must be >= 1 for avg; nothing written", caller,
            nranks);
  return false;
}

inline bool validTypeAndOp(const char* caller, DataType type, RedOp op) {
  if (isValidDataType(static_cast<int>(type)) && isValidRedOp(static_cast<int>(op)) && opTakesType(op, type))
      [[likely]]
    return true;
  return reportTypeOrOp(caller, type, op);
}

inline bool validBuffers(const char* caller, const void* dst, const void* a, const void* b, size_t count) {
  if (count == 0 || (dst != nullptr && a != nullptr && b != nullptr)) [[likely]]
    return true;
  return reportNullBuffer(caller, dst, a, count);
}

inline bool validRanks(const char* caller, RedOp op, int nranks) {
  if (op != RedOp::kAvg || nranks >= 1) [[likely]]
    return true;
  return reportRanks(caller, nranks);
}

void reduceWithTable(const detail::KernelTable& table, DataType type, RedOp op, void* dst, const void* a,
                     const void* b, size_t count) {
  if (count == 0) return;
  table.reduce[static_cast<int>(type)][static_cast<int>(op)](dst, a, b, count);
}

}  // namespace

Isa activeIsa() { return active().isa; }

void reduce(DataType type, RedOp op, void* dst, const void* a, const void* b, size_t count) {
  if (!validTypeAndOp("reduce", type, op) || !validBuffers("reduce", dst, a, b, count)) return;
  reduceWithTable(*active().table, type, op, dst, a, b, count);
}

void reduceWithIsa(Isa isa, DataType type, RedOp op, void* dst, const void* a, const void* b, size_t count) {
  if (!validTypeAndOp("reduceWithIsa", type, op) || !validBuffers("reduceWithIsa", dst, a, b, count)) return;
  const detail::KernelTable* table = tableFor(isa);
  if (table == nullptr) {
    LOOM_WARN(Logger::process(), kSubsysKernel, "reduceWithIsa: isa %s (%d) is not supported here; nothing written",
              isaName(isa), static_cast<int>(isa));
    return;
  }
  reduceWithTable(*table, type, op, dst, a, b, count);
}

void finalize(DataType type, RedOp op, int nranks, void* dst, const void* src, size_t count) {
  if (!validTypeAndOp("finalize", type, op) || !validBuffers("finalize", dst, src, src, count) ||
      !validRanks("finalize", op, nranks) || count == 0)
    return;
  if (op == RedOp::kAvg) {
    active().table->divide[static_cast<int>(type)](nranks, dst, src, count);
  } else if (dst != src) {
    std::memmove(dst, src, count * dataTypeSize(type));
  }
}

void reduceFinal(DataType type, RedOp op, int nranks, void* dst, const void* a, const void* b, size_t count) {
  if (!validTypeAndOp("reduceFinal", type, op) || !validBuffers("reduceFinal", dst, a, b, count) ||
      !validRanks("reduceFinal", op, nranks) || count == 0)
    return;
  const detail::KernelTable& table = *active().table;
  if (op == RedOp::kAvg)
    table.sumDivide[static_cast<int>(type)](nranks, dst, a, b, count);
  else
    reduceWithTable(table, type, op, dst, a, b, count);
}

}  // namespace loom::kernels
