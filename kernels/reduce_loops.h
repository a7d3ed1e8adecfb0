// The generic element loops every instruction-set translation unit compiles
// with its own flags. They are written for gcc's auto-vectorizer: one
// straight loop, loads and stores through memcpy (so no alignment is assumed
// and exact aliasing of dst with a source is legal), the functor inlined.
// gcc versions the loop on the distance between dst and the sources, and
// distance 0 (dst == a or dst == b) takes the vector path.
#pragma once

#include <cstddef>
#include <cstring>

#include "kernels/reduce_ops.h"

namespace loom::kernels {
inline namespace LOOM_KERNELS_ISA_NS {

template <class T>
inline T loadElement(const void* base, size_t index) {
  T value;
  memcpy(&value, static_cast<const char*>(base) + index * sizeof(T), sizeof(T));
  return value;
}

template <class T>
inline void storeElement(void* base, size_t index, T value) {
  memcpy(static_cast<char*>(base) + index * sizeof(T), &value, sizeof(T));
}

// dst[i] = op(a[i], b[i]).
template <class T, class Op>
inline void binaryLoop(void* dst, const void* a, const void* b, size_t count, Op op) {
  for (size_t i = 0; i < count; ++i)
    storeElement<T>(dst, i, op(loadElement<T>(a, i), loadElement<T>(b, i)));
}

// dst[i] = op(src[i]).
template <class T, class Op>
inline void unaryLoop(void* dst, const void* src, size_t count, Op op) {
  for (size_t i = 0; i < count; ++i) storeElement<T>(dst, i, op(loadElement<T>(src, i)));
}

}  // namespace LOOM_KERNELS_ISA_NS
}  // namespace loom::kernels
