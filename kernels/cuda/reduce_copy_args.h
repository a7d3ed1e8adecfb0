// What one reduce-copy launch does, as plain data: no CUDA types, so the
// host emulation (always built) and the CUDA launcher (built only with
// LOOM_HAVE_CUDA) share the description and its validation.
//
// A reduce-copy combines `nsrcs` sources element by element and writes the
// result to every one of `ndsts` destinations (NCCL's reduceCopy):
//   dst[j][i] = post(op(src[0][i], src[1][i], ..., src[nsrcs-1][i]))
// With nsrcs == 1 it is a copy to many destinations (plus the post step).
//
// Semantics are the CPU kernels' (kernels/reduce_ops.h): integers wrap, Min/Max
// return NaN when either operand is NaN, kAvg reduces as kSum (the division by
// the rank count is the post step kDivideByRanks), sources are combined in
// index order. One documented difference: fp16/bf16 Sum/Avg over more than two
// sources accumulate in fp32 and round once (the CPU's binary reduce, chained,
// would round after every step); with one or two sources both agree bit for bit.
//
// Destinations may alias a source exactly (in-place), never partially.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/types.h"

namespace loom::kernels::cuda {

constexpr int kMaxSources = 8;
constexpr int kMaxDestinations = 8;

// Applied to each reduced element before it is stored.
enum class PostOp : uint8_t {
  kNone = 0,
  kDivideByRanks = 1,     // x / nranks, as kernels::finalize does for kAvg
  kMultiplyByScalar = 2,  // x * scalar, as ProdOp (NCCL's PreMulSum premultiply)
};

struct ReduceCopyArgs {
  DataType type = DataType::kFloat32;
  RedOp op = RedOp::kSum;  // ignored when nsrcs == 1
  int nsrcs = 0;
  const void* srcs[kMaxSources] = {};
  int ndsts = 0;
  void* dsts[kMaxDestinations] = {};
  size_t count = 0;  // elements per buffer
  PostOp post = PostOp::kNone;
  int nranks = 1;         // divisor for kDivideByRanks (>= 1)
  uint64_t scalar = 0;    // kMultiplyByScalar: the bytes of one element of `type`, little end first
};

// A grid of `blocks` x `threadsPerBlock`; {0, 0} lets the launcher choose.
struct LaunchShape {
  unsigned blocks = 0;
  unsigned threadsPerBlock = 0;
};

constexpr unsigned kDefaultThreadsPerBlock = 256;
constexpr unsigned kMaxThreadsPerBlock = 512;  // the kernels' __launch_bounds__: up to 128 registers, no spills
constexpr unsigned kMaxAutoBlocks = 1024;

// nullptr when `args` describes a valid launch, else what is wrong, naming
// the field ("nsrcs 9 out of range [1, 8]" style, without the numbers).
const char* reduceCopyArgsError(const ReduceCopyArgs& args);
// nullptr when `shape` is {0, 0} or a grid the kernels accept.
const char* launchShapeError(const LaunchShape& shape);

// The shape used when the caller passes {0, 0}: enough 256-thread blocks for
// one 16-byte vector (or element) per thread and unrolled step, capped at
// kMaxAutoBlocks (the grid-stride loop covers the rest).
LaunchShape chooseLaunchShape(const ReduceCopyArgs& args);

// Scale-copy (dst = src * scalar into every destination): a reduce-copy with
// one source and PostOp::kMultiplyByScalar. `scalar` points at one element of `type`.
ReduceCopyArgs makeScaleCopyArgs(DataType type, void* const* dsts, int ndsts, const void* src, size_t count,
                                 const void* scalar);

}  // namespace loom::kernels::cuda
