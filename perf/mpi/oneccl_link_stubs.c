/* What the CPU build of PyPI's static oneCCL (libccl.a) leaves to the Intel
 * compiler's runtime and to ittnotify, for linking it with GCC:
 *  - _intel_fast_memcpy/_intel_fast_memset: the Intel compiler's memcpy and
 *    memset entry points; the C library's do the same job.
 *  - the ITT (VTune) notification hooks: ittnotify calls each hook only
 *    through its pointer when a collector set it, so null pointers mean
 *    "no collector", which is the case in a benchmark run. */
#include <stddef.h>
#include <string.h>

void* _intel_fast_memcpy(void* to, const void* from, size_t n) { return memcpy(to, from, n); }
void* _intel_fast_memset(void* to, int value, size_t n) { return memset(to, value, n); }

void* __itt_string_handle_create_ptr__3_0 = NULL;
void* __itt_task_begin_ptr__3_0 = NULL;
void* __itt_task_end_ptr__3_0 = NULL;
void* __itt_metadata_add_ptr__3_0 = NULL;
void* __itt_thread_set_name_ptr__3_0 = NULL;
void* __itt_event_start_ptr__3_0 = NULL;
void* __itt_event_end_ptr__3_0 = NULL;
void* __itt_event_create_ptr__3_0 = NULL;
void* __itt_domain_create_ptr__3_0 = NULL;
