// Explicit x86 vector loops for fp16 and bf16, the two types gcc does not
// vectorize well on its own (fp16 needs F16C conversions; bf16 needs the
// round-to-nearest-even done on integer lanes). Everything else goes through
// the auto-vectorized loops of reduce_loops.h.
//
// Each step loads one block of 16-bit values as two fp32 vectors, applies the
// fp32 version of the functor to each, rounds back and stores; the tail
// (< one block) goes to the scalar functor from reduce_ops.h. The vector and
// scalar code round identically, so results do not depend on the instruction
// set or on where a buffer boundary falls.
//
// bf16 needs no shuffles: a 32-bit lane holding two bf16 values gives the
// even element as (lane << 16) and the odd one as (lane & 0xFFFF0000), both
// exact fp32 values; after the arithmetic, the rounded even result is shifted
// back down and OR-ed with the rounded odd result's top half. Narrowing does
// not use AVX512-BF16's VCVTNEPS2BF16, which flushes fp32 subnormals to zero
// and would disagree with the scalar rounding.
//
// Compiled only where the including translation unit enables the ISA:
// LOOM_SIMD_256 with AVX2 + F16C, LOOM_SIMD_512 with AVX512F + BW on top.
#pragma once

#include <cstddef>

#include "kernels/reduce_loops.h"
#include "kernels/reduce_ops.h"

#if defined(__AVX2__) && defined(__F16C__)
#include <immintrin.h>
#define LOOM_SIMD_256 1
#endif
#if defined(LOOM_SIMD_256) && defined(__AVX512F__) && defined(__AVX512BW__)
#define LOOM_SIMD_512 1
#endif

namespace loom::kernels {
inline namespace LOOM_KERNELS_ISA_NS {

// Which vector format (if any) handles storage type T in this translation unit.
template <class T>
struct SimdFormat {
  static constexpr bool kAvailable = false;
};

#if defined(LOOM_SIMD_256)

// fp32 arithmetic on 8 lanes, with the scalar functors' NaN rules.
struct F32x8 {
  using V = __m256;
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V div(V a, V b) { return _mm256_div_ps(a, b); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  // MINPS returns b unless a < b (so a NaN in b is returned); a NaN in a is
  // restored by the blend, giving "NaN if either operand is NaN".
  static V min(V a, V b) { return _mm256_blendv_ps(_mm256_min_ps(a, b), a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q)); }
  static V max(V a, V b) { return _mm256_blendv_ps(_mm256_max_ps(a, b), a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q)); }
};

// 16 fp16 values as two 8-lane fp32 vectors (F16C).
struct Fp16x16 {
  using F = F32x8;
  static constexpr size_t kElements = 16;
  struct Wide {
    __m256 lo, hi;
  };
  static Wide load(const char* p) {
    return {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
            _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16)))};
  }
  static __m128i narrow(__m256 x) { return _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static void store(char* p, __m256 lo, __m256 hi) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), narrow(lo));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p + 16), narrow(hi));
  }
  static __m256 roundTrip(__m256 x) { return _mm256_cvtph_ps(narrow(x)); }
};

// 16 bf16 values as even and odd fp32 lanes (see the header comment).
struct Bf16x16 {
  using F = F32x8;
  static constexpr size_t kElements = 16;
  struct Wide {
    __m256 lo, hi;
  };
  static __m256i highHalf(__m256i v) { return _mm256_and_si256(v, _mm256_set1_epi32(static_cast<int>(0xFFFF0000u))); }
  static Wide load(const char* p) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return {_mm256_castsi256_ps(_mm256_slli_epi32(v, 16)), _mm256_castsi256_ps(highHalf(v))};
  }
  // fp32 rounded to nearest even at bit 16 (the bf16 value is the top half);
  // NaN is truncated with its quiet bit set, as floatToBf16 does.
  static __m256i round(__m256 x) {
    const __m256i u = _mm256_castps_si256(x);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i rounded = _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), lsb);
    const __m256i quietNan = _mm256_or_si256(u, _mm256_set1_epi32(0x400000));
    return _mm256_blendv_epi8(rounded, quietNan, _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q)));
  }
  static void store(char* p, __m256 even, __m256 odd) {
    const __m256i packed = _mm256_or_si256(_mm256_srli_epi32(round(even), 16), highHalf(round(odd)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), packed);
  }
  static __m256 roundTrip(__m256 x) { return _mm256_castsi256_ps(highHalf(round(x))); }
};

#endif  // LOOM_SIMD_256

#if defined(LOOM_SIMD_512)

struct F32x16 {
  using V = __m512;
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V div(V a, V b) { return _mm512_div_ps(a, b); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V min(V a, V b) { return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), _mm512_min_ps(a, b), a); }
  static V max(V a, V b) { return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), _mm512_max_ps(a, b), a); }
};

struct Fp16x32 {
  using F = F32x16;
  static constexpr size_t kElements = 32;
  struct Wide {
    __m512 lo, hi;
  };
  static Wide load(const char* p) {
    return {_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))),
            _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32)))};
  }
  static __m256i narrow(__m512 x) { return _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static void store(char* p, __m512 lo, __m512 hi) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), narrow(lo));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p + 32), narrow(hi));
  }
  static __m512 roundTrip(__m512 x) { return _mm512_cvtph_ps(narrow(x)); }
};

struct Bf16x32 {
  using F = F32x16;
  static constexpr size_t kElements = 32;
  struct Wide {
    __m512 lo, hi;
  };
  static __m512i highHalf(__m512i v) { return _mm512_and_si512(v, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))); }
  static Wide load(const char* p) {
    const __m512i v = _mm512_loadu_si512(p);
    return {_mm512_castsi512_ps(_mm512_slli_epi32(v, 16)), _mm512_castsi512_ps(highHalf(v))};
  }
  static __m512i round(__m512 x) {
    const __m512i u = _mm512_castps_si512(x);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i rounded = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), lsb);
    const __mmask16 isNan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    return _mm512_mask_or_epi32(rounded, isNan, u, _mm512_set1_epi32(0x400000));
  }
  static void store(char* p, __m512 even, __m512 odd) {
    _mm512_storeu_si512(p, _mm512_or_si512(_mm512_srli_epi32(round(even), 16), highHalf(round(odd))));
  }
  static __m512 roundTrip(__m512 x) { return _mm512_castsi512_ps(highHalf(round(x))); }
};

template <>
struct SimdFormat<Half> {
  static constexpr bool kAvailable = true;
  using Type = Fp16x32;
};
template <>
struct SimdFormat<Bfloat16> {
  static constexpr bool kAvailable = true;
  using Type = Bf16x32;
};

#elif defined(LOOM_SIMD_256)

template <>
struct SimdFormat<Half> {
  static constexpr bool kAvailable = true;
  using Type = Fp16x16;
};
template <>
struct SimdFormat<Bfloat16> {
  static constexpr bool kAvailable = true;
  using Type = Bf16x16;
};

#endif  // LOOM_SIMD_512 / LOOM_SIMD_256

#if defined(LOOM_SIMD_256)

// The fp32-lane counterpart of each scalar functor, built from the functor
// itself so state (the divisor) carries over.
template <class Fmt, class Op>
struct VecOpFor;

template <class Fmt, class T>
struct VecOpFor<Fmt, SumOp<T>> {
  using V = typename Fmt::F::V;
  explicit VecOpFor(const SumOp<T>&) {}
  V operator()(V a, V b) const { return Fmt::F::add(a, b); }
};
template <class Fmt, class T>
struct VecOpFor<Fmt, ProdOp<T>> {
  using V = typename Fmt::F::V;
  explicit VecOpFor(const ProdOp<T>&) {}
  V operator()(V a, V b) const { return Fmt::F::mul(a, b); }
};
template <class Fmt, class T>
struct VecOpFor<Fmt, MinOp<T>> {
  using V = typename Fmt::F::V;
  explicit VecOpFor(const MinOp<T>&) {}
  V operator()(V a, V b) const { return Fmt::F::min(a, b); }
};
template <class Fmt, class T>
struct VecOpFor<Fmt, MaxOp<T>> {
  using V = typename Fmt::F::V;
  explicit VecOpFor(const MaxOp<T>&) {}
  V operator()(V a, V b) const { return Fmt::F::max(a, b); }
};
template <class Fmt, class T>
struct VecOpFor<Fmt, DivideBy<T>> {
  using V = typename Fmt::F::V;
  explicit VecOpFor(const DivideBy<T>& op) : divisor(Fmt::F::set1(op.asFloat)) {}
  V operator()(V x) const { return Fmt::F::div(x, divisor); }
  V divisor;
};
template <class Fmt, class T>
struct VecOpFor<Fmt, SumThenDivide<T>> {
  using V = typename Fmt::F::V;
  explicit VecOpFor(const SumThenDivide<T>& op) : divisor(Fmt::F::set1(op.divide.asFloat)) {}
  // The sum is rounded to the 16-bit type before dividing, as two passes would.
  V operator()(V a, V b) const { return Fmt::F::div(Fmt::roundTrip(Fmt::F::add(a, b)), divisor); }
  V divisor;
};

// dst[i] = op(a[i], b[i]) for a 16-bit float type: vector blocks, scalar tail.
template <class T, class Op>
inline void simdBinaryLoop(void* dst, const void* a, const void* b, size_t count, Op op) {
  using Fmt = typename SimdFormat<T>::Type;
  const VecOpFor<Fmt, Op> vop(op);
  auto* d = static_cast<char*>(dst);
  auto* x = static_cast<const char*>(a);
  auto* y = static_cast<const char*>(b);
  size_t i = 0;
  for (; i + Fmt::kElements <= count; i += Fmt::kElements) {
    const size_t offset = i * sizeof(T);
    const typename Fmt::Wide va = Fmt::load(x + offset), vb = Fmt::load(y + offset);
    Fmt::store(d + offset, vop(va.lo, vb.lo), vop(va.hi, vb.hi));
  }
  const size_t offset = i * sizeof(T);
  binaryLoop<T>(d + offset, x + offset, y + offset, count - i, op);
}

// dst[i] = op(src[i]) for a 16-bit float type.
template <class T, class Op>
inline void simdUnaryLoop(void* dst, const void* src, size_t count, Op op) {
  using Fmt = typename SimdFormat<T>::Type;
  const VecOpFor<Fmt, Op> vop(op);
  auto* d = static_cast<char*>(dst);
  auto* s = static_cast<const char*>(src);
  size_t i = 0;
  for (; i + Fmt::kElements <= count; i += Fmt::kElements) {
    const size_t offset = i * sizeof(T);
    const typename Fmt::Wide v = Fmt::load(s + offset);
    Fmt::store(d + offset, vop(v.lo), vop(v.hi));
  }
  const size_t offset = i * sizeof(T);
  unaryLoop<T>(d + offset, s + offset, count - i, op);
}

#endif  // LOOM_SIMD_256

// The loops the kernel table uses: explicit vectors where this translation
// unit has them for T, the auto-vectorized generic loop otherwise.
template <class T, class Op>
inline void runBinary(void* dst, const void* a, const void* b, size_t count, Op op) {
#if defined(LOOM_SIMD_256)
  if constexpr (SimdFormat<T>::kAvailable)
    simdBinaryLoop<T>(dst, a, b, count, op);
  else
#endif
    binaryLoop<T>(dst, a, b, count, op);
}

template <class T, class Op>
inline void runUnary(void* dst, const void* src, size_t count, Op op) {
#if defined(LOOM_SIMD_256)
  if constexpr (SimdFormat<T>::kAvailable)
    simdUnaryLoop<T>(dst, src, count, op);
  else
#endif
    unaryLoop<T>(dst, src, count, op);
}

}  // namespace LOOM_KERNELS_ISA_NS
}  // namespace loom::kernels
