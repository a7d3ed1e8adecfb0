// Validation, launch shape and the scale-copy helper: host code shared by
// the emulation and the CUDA launcher.
#include "kernels/cuda/reduce_copy_args.h"

#include <cstring>

namespace loom::kernels::cuda {

const char* reduceCopyArgsError(const ReduceCopyArgs& args) {
  if (!isValidDataType(static_cast<int>(args.type))) return "type is not a valid DataType";
  if (!isValidRedOp(static_cast<int>(args.op))) return "op is not a valid RedOp";
  if (!opTakesType(args.op, args.type)) return "bitwise ops (band, bor, bxor) take integer types only";
  if (args.nsrcs < 1 || args.nsrcs > kMaxSources) return "nsrcs out of range [1, kMaxSources = 8]";
  if (args.ndsts < 1 || args.ndsts > kMaxDestinations) return "ndsts out of range [1, kMaxDestinations = 8]";
  if (args.count > 0) {
    for (int j = 0; j < args.nsrcs; ++j)
      if (args.srcs[j] == nullptr) return "a source pointer (srcs[0..nsrcs)) is null";
    for (int j = 0; j < args.ndsts; ++j)
      if (args.dsts[j] == nullptr) return "a destination pointer (dsts[0..ndsts)) is null";
  }
  switch (args.post) {
    case PostOp::kNone: case PostOp::kMultiplyByScalar: break;
    case PostOp::kDivideByRanks:
      if (args.nranks < 1) return "nranks must be >= 1 for PostOp::kDivideByRanks";
      break;
    default: return "post is not a valid PostOp";
  }
  return nullptr;
}

const char* launchShapeError(const LaunchShape& shape) {
  if (shape.blocks == 0 && shape.threadsPerBlock == 0) return nullptr;
  if (shape.blocks == 0) return "LaunchShape.blocks is 0 (only {0, 0} means automatic)";
  if (shape.threadsPerBlock == 0 || shape.threadsPerBlock > kMaxThreadsPerBlock)
    return "LaunchShape.threadsPerBlock out of range [1, kMaxThreadsPerBlock = 512]";
  return nullptr;
}

LaunchShape chooseLaunchShape(const ReduceCopyArgs& args) {
  // One thread per 16 bytes of each unrolled step (4 vectors, see kUnroll).
  const size_t bytes = args.count * dataTypeSize(args.type);
  const size_t bytesPerThread = 16 * 4;
  const size_t threads = (bytes + bytesPerThread - 1) / bytesPerThread;
  size_t blocks = (threads + kDefaultThreadsPerBlock - 1) / kDefaultThreadsPerBlock;
  if (blocks < 1) blocks = 1;
  if (blocks > kMaxAutoBlocks) blocks = kMaxAutoBlocks;
  return {static_cast<unsigned>(blocks), kDefaultThreadsPerBlock};
}

ReduceCopyArgs makeScaleCopyArgs(DataType type, void* const* dsts, int ndsts, const void* src, size_t count,
                                 const void* scalar) {
  ReduceCopyArgs args;
  args.type = type;
  args.nsrcs = 1;
  args.srcs[0] = src;
  args.ndsts = ndsts;
  for (int j = 0; j < ndsts && j < kMaxDestinations; ++j) args.dsts[j] = dsts[j];
  args.count = count;
  args.post = PostOp::kMultiplyByScalar;
  if (scalar != nullptr && isValidDataType(static_cast<int>(type)))
    std::memcpy(&args.scalar, scalar, dataTypeSize(type));
  return args;
}

}  // namespace loom::kernels::cuda
