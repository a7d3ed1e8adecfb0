// Copies that bypass the cache for data this core will not read again soon:
// the output blocks of a large collective. Ordinary stores first read every
// destination line into the cache (a read for ownership), so a copy costs
// three memory transfers per line; non-temporal stores write the line
// without reading it, two transfers, and leave the cache to data in flight.
#pragma once

#include <cstddef>

namespace loom::kernels {

// dst <- src (no overlap). Non-temporal for the aligned middle on x86-64
// (SSE2, always there), ordinary memcpy for the ends and elsewhere; ends
// with a store fence, so the bytes are globally visible, like memcpy's, to
// whatever is published after the call.
void copyStreaming(void* dst, const void* src, size_t bytes);

// Outputs at least this large do not stay in this core's caches anyway
// (several times a server core's L2), so they are written non-temporally.
inline constexpr size_t kStreamingOutputBytes = 8u << 20;

}  // namespace loom::kernels
