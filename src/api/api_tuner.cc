// C ABI of the tuner: which algorithm and protocol ran the last collective.
#include <cstring>

#include "src/api/handles.h"

using loom::Code;
using loom::Status;
using loom::api::fail;

extern "C" {

loomResult_t loomCommGetLastAlgorithm(const loomComm_t comm, char* name, size_t nameLen) {
  loom::api::CommRef ref{comm, "loomCommGetLastAlgorithm"};
  if (!ref) return fail(nullptr, ref.status());
  if (!name) return fail(ref, loom::makeError(Code::kInvalidArgument, "loomCommGetLastAlgorithm: name is NULL"));
  const std::string last = ref->impl->lastAlgorithm();
  if (nameLen < last.size() + 1)
    return fail(ref, loom::makeError(Code::kInvalidArgument,
                                     "loomCommGetLastAlgorithm: nameLen %zu is too small for \"%s\" (needs %zu)",
                                     nameLen, last.c_str(), last.size() + 1));
  std::memcpy(name, last.c_str(), last.size() + 1);
  return loomSuccess;
}

}  // extern "C"
