// The body of the reduce-copy kernel, written once as __host__ __device__
// code: the __global__ kernel (reduce_copy.cu) calls reduceCopyThread with
// its blockIdx/threadIdx, and the host emulation (reduce_copy_emulation.cc)
// calls the same function for every (block, thread) of the same grid, so
// the vector part, the scalar head/tail and the grid-stride walk are
// exercised on machines without a GPU. Compiles with g++ (no __CUDACC__).
//
// Work split (planReduceCopy): when every source and destination has the same
// address modulo 16, and that offset is a multiple of the element size, a
// scalar head brings them to 16-byte alignment, the middle moves as 16-byte
// vectors and a scalar tail finishes; otherwise every element is scalar.
// The only device-specific code is the lane arithmetic of fp16/bf16 Sum/Prod
// and the 16-bit<->fp32 conversions, which use sm_80's native instructions;
// they round exactly like reduce_ops.h (fp32 has >= 2p+2 bits, so computing
// in fp32 and rounding equals the correctly rounded 16-bit result); only the
// payload of a NaN result may differ, which the contract leaves unspecified.
//
// Include only from kernels/cuda/ sources and tests (the namespace is per TU: the
// .cu defines LOOM_KERNELS_ISA_NS so its inline functions never meet g++'s).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cuda/reduce_copy_args.h"
#include "kernels/reduce_ops.h"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define LOOM_CUDA_NATIVE_16BIT 1
#else
#define LOOM_CUDA_NATIVE_16BIT 0
#endif

// Full unrolling of the fixed-trip lane and vector loops (nvcc; g++ -O2
// unrolls such short loops on its own).
#if defined(__CUDACC__)
#define LOOM_UNROLL _Pragma("unroll")
#else
#define LOOM_UNROLL
#endif

namespace loom::kernels::cuda {
inline namespace LOOM_KERNELS_ISA_NS {

// Vectors in flight per thread and step: loads of several vectors are issued
// before any is combined, which hides memory latency.
constexpr int kUnroll = 4;
constexpr size_t kVectorBytes = 16;

// What the kernel receives (by value): the arguments plus the work split.
struct ReduceCopyParams {
  const void* srcs[kMaxSources];
  void* dsts[kMaxDestinations];
  int nsrcs;
  int ndsts;
  size_t count;
  size_t head;          // scalar elements before the first vector
  size_t vectors;       // 16-byte vectors after the head
  bool elementAligned;  // every pointer is aligned to the element size
  PostOp post;
  int nranks;
  uint64_t scalar;
};

// Host side of a launch: copies the arguments and decides the split.
inline ReduceCopyParams planReduceCopy(const ReduceCopyArgs& args) {
  ReduceCopyParams p{};
  const size_t size = dataTypeSize(args.type);
  p.nsrcs = args.nsrcs;
  p.ndsts = args.ndsts;
  p.count = args.count;
  p.post = args.post;
  p.nranks = args.nranks;
  p.scalar = args.scalar;
  const uintptr_t offset = reinterpret_cast<uintptr_t>(args.srcs[0]) % kVectorBytes;
  bool sameOffset = true;
  p.elementAligned = true;
  auto note = [&](const void* ptr) {
    const uintptr_t address = reinterpret_cast<uintptr_t>(ptr);
    sameOffset = sameOffset && address % kVectorBytes == offset;
    p.elementAligned = p.elementAligned && address % size == 0;
  };
  for (int j = 0; j < args.nsrcs; ++j) {
    p.srcs[j] = args.srcs[j];
    note(args.srcs[j]);
  }
  for (int j = 0; j < args.ndsts; ++j) {
    p.dsts[j] = args.dsts[j];
    note(args.dsts[j]);
  }
  if (sameOffset && offset % size == 0) {
    const size_t toAlignment = (kVectorBytes - offset) % kVectorBytes / size;
    p.head = toAlignment < args.count ? toAlignment : args.count;
    p.vectors = (args.count - p.head) / (kVectorBytes / size);
  } else {
    p.head = args.count;
    p.vectors = 0;
  }
  return p;
}

// ---- 16-byte vectors -------------------------------------------------------

struct alignas(16) Pack {
  uint32_t words[4];
};

template <class T>
constexpr int kLanes = static_cast<int>(kVectorBytes / sizeof(T));

// `address` is 16-byte aligned (the plan guarantees it).
LOOM_HOST_DEVICE inline Pack loadPack(const void* address) {
#if defined(__CUDA_ARCH__)
  const uint4 v = *static_cast<const uint4*>(address);
  return Pack{{v.x, v.y, v.z, v.w}};
#else
  Pack p;
  memcpy(&p, address, sizeof(p));
  return p;
#endif
}

LOOM_HOST_DEVICE inline void storePack(void* address, const Pack& p) {
#if defined(__CUDA_ARCH__)
  *static_cast<uint4*>(address) = make_uint4(p.words[0], p.words[1], p.words[2], p.words[3]);
#else
  memcpy(address, &p, sizeof(p));
#endif
}

template <class T>
LOOM_HOST_DEVICE inline T getLane(const Pack& p, int lane) {
  T x;
  memcpy(&x, reinterpret_cast<const unsigned char*>(p.words) + lane * sizeof(T), sizeof(T));
  return x;
}

template <class T>
LOOM_HOST_DEVICE inline void setLane(Pack& p, int lane, T x) {
  memcpy(reinterpret_cast<unsigned char*>(p.words) + lane * sizeof(T), &x, sizeof(T));
}

// ---- Elements ----------------------------------------------------------------

// Scalar access; `aligned` says the pointer is aligned to sizeof(T), which
// lets the device use one typed load instead of byte loads.
template <class T>
LOOM_HOST_DEVICE inline T loadScalar(const void* base, size_t index, bool aligned) {
#if defined(__CUDA_ARCH__)
  if (aligned) return static_cast<const T*>(base)[index];
#endif
  T x;
  memcpy(&x, static_cast<const unsigned char*>(base) + index * sizeof(T), sizeof(T));
  return x;
}

template <class T>
LOOM_HOST_DEVICE inline void storeScalar(void* base, size_t index, T x, bool aligned) {
#if defined(__CUDA_ARCH__)
  if (aligned) {
    static_cast<T*>(base)[index] = x;
    return;
  }
#endif
  memcpy(static_cast<unsigned char*>(base) + index * sizeof(T), &x, sizeof(T));
}

// The CPU functor for each op (kAvg is dispatched as kSum).
template <class T, RedOp kOp>
struct OpFunctor;
template <class T>
struct OpFunctor<T, RedOp::kSum> { using type = SumOp<T>; };
template <class T>
struct OpFunctor<T, RedOp::kProd> { using type = ProdOp<T>; };
template <class T>
struct OpFunctor<T, RedOp::kMax> { using type = MaxOp<T>; };
template <class T>
struct OpFunctor<T, RedOp::kMin> { using type = MinOp<T>; };
template <class T>
struct OpFunctor<T, RedOp::kBand> { using type = BandOp<T>; };
template <class T>
struct OpFunctor<T, RedOp::kBor> { using type = BorOp<T>; };
template <class T>
struct OpFunctor<T, RedOp::kBxor> { using type = BxorOp<T>; };

template <class T>
constexpr bool kIs16BitFloat = std::is_same_v<T, Half> || std::is_same_v<T, Bfloat16>;

// fp16/bf16 sums over more than two sources accumulate in fp32 (rounding
// once instead of after every source).
template <class T, RedOp kOp>
constexpr bool kAccumulatesInFloat = kIs16BitFloat<T> && kOp == RedOp::kSum;

template <class T>
LOOM_HOST_DEVICE inline T scalarAs(uint64_t bytes) {
  T x;
  memcpy(&x, &bytes, sizeof(T));
  return x;
}

// The post step, built once per thread.
template <class T>
struct PostStep {
  LOOM_HOST_DEVICE explicit PostStep(const ReduceCopyParams& p)
      : kind(p.post), divide(p.nranks), scalar(scalarAs<T>(p.scalar)) {}
  LOOM_HOST_DEVICE T operator()(T x) const {
    if (kind == PostOp::kDivideByRanks) return divide(x);
    if (kind == PostOp::kMultiplyByScalar) return ProdOp<T>{}(x, scalar);
    return x;
  }
  PostOp kind;
  DivideBy<T> divide;
  T scalar;
};

template <class T, RedOp kOp>
LOOM_HOST_DEVICE inline T reduceElement(const ReduceCopyParams& p, size_t index) {
  const bool aligned = p.elementAligned;
  if constexpr (kAccumulatesInFloat<T, kOp>) {
    if (p.nsrcs > 2) {
      float sum = Arith<T>::widen(loadScalar<T>(p.srcs[0], index, aligned));
      for (int j = 1; j < p.nsrcs; ++j) sum += Arith<T>::widen(loadScalar<T>(p.srcs[j], index, aligned));
      return Arith<T>::narrow(sum);
    }
  }
  const typename OpFunctor<T, kOp>::type op{};
  T acc = loadScalar<T>(p.srcs[0], index, aligned);
  for (int j = 1; j < p.nsrcs; ++j) acc = op(acc, loadScalar<T>(p.srcs[j], index, aligned));
  return acc;
}

// ---- Lane arithmetic on whole vectors -----------------------------------------

#if LOOM_CUDA_NATIVE_16BIT
template <class T>
using Native2 = std::conditional_t<std::is_same_v<T, Half>, __half2, __nv_bfloat162>;

template <class T>
__device__ inline Native2<T> asNative2(uint32_t word) {
  Native2<T> x;
  memcpy(&x, &word, sizeof(x));
  return x;
}
template <class T>
__device__ inline uint32_t fromNative2(Native2<T> x) {
  uint32_t word;
  memcpy(&word, &x, sizeof(word));
  return word;
}
#endif

// a (op) b lane by lane.
template <class T, RedOp kOp>
LOOM_HOST_DEVICE inline Pack combinePacks(const Pack& a, const Pack& b) {
  Pack r;
#if LOOM_CUDA_NATIVE_16BIT
  if constexpr (kIs16BitFloat<T> && (kOp == RedOp::kSum || kOp == RedOp::kProd)) {
LOOM_UNROLL
    for (int w = 0; w < 4; ++w) {
      const Native2<T> x = asNative2<T>(a.words[w]), y = asNative2<T>(b.words[w]);
      r.words[w] = fromNative2<T>(kOp == RedOp::kSum ? __hadd2(x, y) : __hmul2(x, y));
    }
    return r;
  }
#endif
  const typename OpFunctor<T, kOp>::type op{};
LOOM_UNROLL
  for (int lane = 0; lane < kLanes<T>; ++lane) setLane<T>(r, lane, op(getLane<T>(a, lane), getLane<T>(b, lane)));
  return r;
}

// fp16/bf16 vector <-> 8 fp32 values.
template <class T>
LOOM_HOST_DEVICE inline void widenPack(const Pack& p, float (&out)[8]) {
#if LOOM_CUDA_NATIVE_16BIT
LOOM_UNROLL
  for (int w = 0; w < 4; ++w) {
    float2 f;
    if constexpr (std::is_same_v<T, Half>) f = __half22float2(asNative2<T>(p.words[w]));
    else f = __bfloat1622float2(asNative2<T>(p.words[w]));
    out[2 * w] = f.x;
    out[2 * w + 1] = f.y;
  }
#else
  for (int lane = 0; lane < 8; ++lane) out[lane] = Arith<T>::widen(getLane<T>(p, lane));
#endif
}

template <class T>
LOOM_HOST_DEVICE inline Pack narrowPack(const float (&in)[8]) {
  Pack p;
#if LOOM_CUDA_NATIVE_16BIT
LOOM_UNROLL
  for (int w = 0; w < 4; ++w) {
    const float2 f = make_float2(in[2 * w], in[2 * w + 1]);
    if constexpr (std::is_same_v<T, Half>) p.words[w] = fromNative2<T>(__float22half2_rn(f));
    else p.words[w] = fromNative2<T>(__float22bfloat162_rn(f));
  }
#else
  for (int lane = 0; lane < 8; ++lane) setLane<T>(p, lane, Arith<T>::narrow(in[lane]));
#endif
  return p;
}

template <class T>
LOOM_HOST_DEVICE inline Pack applyPost(const PostStep<T>& post, Pack p) {
  if (post.kind == PostOp::kNone) return p;
LOOM_UNROLL
  for (int lane = 0; lane < kLanes<T>; ++lane) setLane<T>(p, lane, post(getLane<T>(p, lane)));
  return p;
}

// ---- One thread's share -----------------------------------------------------------

// Reduces up to kUnroll vectors (first, first + stride, ...) of this thread.
template <class T, RedOp kOp>
LOOM_HOST_DEVICE inline void reduceVectors(const ReduceCopyParams& p, const PostStep<T>& post, size_t first,
                                           size_t stride) {
  constexpr size_t kBytes = kVectorBytes;
  const size_t headBytes = p.head * sizeof(T);
  size_t offsets[kUnroll];
  bool live[kUnroll];
  Pack acc[kUnroll];
LOOM_UNROLL
  for (int u = 0; u < kUnroll; ++u) {
    const size_t v = first + u * stride;
    live[u] = v < p.vectors;
    offsets[u] = headBytes + v * kBytes;
    if (live[u]) acc[u] = loadPack(static_cast<const unsigned char*>(p.srcs[0]) + offsets[u]);
  }
  bool done = false;
  if constexpr (kAccumulatesInFloat<T, kOp>) {
    if (p.nsrcs > 2) {
      float sum[kUnroll][8];
LOOM_UNROLL
      for (int u = 0; u < kUnroll; ++u)
        if (live[u]) widenPack<T>(acc[u], sum[u]);
      for (int j = 1; j < p.nsrcs; ++j) {
LOOM_UNROLL
        for (int u = 0; u < kUnroll; ++u) {
          if (!live[u]) continue;
          float next[8];
          widenPack<T>(loadPack(static_cast<const unsigned char*>(p.srcs[j]) + offsets[u]), next);
LOOM_UNROLL
          for (int lane = 0; lane < 8; ++lane) sum[u][lane] += next[lane];
        }
      }
LOOM_UNROLL
      for (int u = 0; u < kUnroll; ++u)
        if (live[u]) acc[u] = narrowPack<T>(sum[u]);
      done = true;
    }
  }
  if (!done) {
    for (int j = 1; j < p.nsrcs; ++j) {
      Pack in[kUnroll];
LOOM_UNROLL
      for (int u = 0; u < kUnroll; ++u)
        if (live[u]) in[u] = loadPack(static_cast<const unsigned char*>(p.srcs[j]) + offsets[u]);
LOOM_UNROLL
      for (int u = 0; u < kUnroll; ++u)
        if (live[u]) acc[u] = combinePacks<T, kOp>(acc[u], in[u]);
    }
  }
LOOM_UNROLL
  for (int u = 0; u < kUnroll; ++u)
    if (live[u]) acc[u] = applyPost<T>(post, acc[u]);
  for (int j = 0; j < p.ndsts; ++j) {
LOOM_UNROLL
    for (int u = 0; u < kUnroll; ++u)
      if (live[u]) storePack(static_cast<unsigned char*>(p.dsts[j]) + offsets[u], acc[u]);
  }
}

// Everything thread `thread` of `threads` does: its vectors (kUnroll per
// step, grid-stride), then its scalar elements of the head and the tail.
template <class T, RedOp kOp>
LOOM_HOST_DEVICE inline void reduceCopyThread(const ReduceCopyParams& p, size_t thread, size_t threads) {
  const PostStep<T> post(p);
  for (size_t first = thread; first < p.vectors; first += threads * kUnroll)
    reduceVectors<T, kOp>(p, post, first, threads);

  const size_t vectorElements = p.vectors * kLanes<T>;
  const size_t scalarItems = p.count - vectorElements;
  for (size_t item = thread; item < scalarItems; item += threads) {
    const size_t index = item < p.head ? item : item + vectorElements;
    const T x = post(reduceElement<T, kOp>(p, index));
    for (int j = 0; j < p.ndsts; ++j) storeScalar<T>(p.dsts[j], index, x, p.elementAligned);
  }
}

// ---- Dispatch ------------------------------------------------------------------------

// Calls f.template operator()<T, kOp>() for the element type and op (kAvg
// reduces as kSum; with one source the op is irrelevant and kSum is used;
// bitwise ops for integer types only).
template <class T, class F>
inline void dispatchOp(RedOp op, F& f) {
  switch (op) {
    case RedOp::kSum: case RedOp::kAvg: f.template operator()<T, RedOp::kSum>(); break;
    case RedOp::kProd: f.template operator()<T, RedOp::kProd>(); break;
    case RedOp::kMax: f.template operator()<T, RedOp::kMax>(); break;
    case RedOp::kMin: f.template operator()<T, RedOp::kMin>(); break;
    // Bitwise ops exist for integer types only; callers reject the others
    // (opTakesType), so nothing is instantiated or run for floats. A signed
    // type runs as the unsigned one of its width (the same bits), which
    // halves the kernels compiled for them.
    case RedOp::kBand:
      if constexpr (std::is_integral_v<T>) f.template operator()<std::make_unsigned_t<T>, RedOp::kBand>();
      break;
    case RedOp::kBor:
      if constexpr (std::is_integral_v<T>) f.template operator()<std::make_unsigned_t<T>, RedOp::kBor>();
      break;
    case RedOp::kBxor:
      if constexpr (std::is_integral_v<T>) f.template operator()<std::make_unsigned_t<T>, RedOp::kBxor>();
      break;
  }
}

template <class F>
inline void dispatchReduceCopy(DataType type, RedOp op, int nsrcs, F&& f) {
  if (nsrcs == 1) op = RedOp::kSum;
  switch (type) {
    case DataType::kInt8: dispatchOp<int8_t>(op, f); break;
    case DataType::kUint8: dispatchOp<uint8_t>(op, f); break;
    case DataType::kInt32: dispatchOp<int32_t>(op, f); break;
    case DataType::kUint32: dispatchOp<uint32_t>(op, f); break;
    case DataType::kInt64: dispatchOp<int64_t>(op, f); break;
    case DataType::kUint64: dispatchOp<uint64_t>(op, f); break;
    case DataType::kFloat16: dispatchOp<Half>(op, f); break;
    case DataType::kFloat32: dispatchOp<float>(op, f); break;
    case DataType::kFloat64: dispatchOp<double>(op, f); break;
    case DataType::kBfloat16: dispatchOp<Bfloat16>(op, f); break;
  }
}

}  // namespace LOOM_KERNELS_ISA_NS
}  // namespace loom::kernels::cuda
