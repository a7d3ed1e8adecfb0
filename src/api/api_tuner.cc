// C ABI of the tuner: which algorithm and protocol ran the last collective.
#include <cstring>

#include "api/handles.h"

using loom::Code;
using loom::Status;
using loom::api::fail;

extern "C" {

loomResult_t loomCommGetLastAlgorithm(const loomComm_t comm, char* name, size_t nameLen) {
  Status s = loom::api::checkComm(comm, "loomCommGetLastAlgorithm");
  if (!s.isOk()) return fail(nullptr, s);
  if (!name) return fail(comm, loom::makeError(Code::kInvalidArgument, "loomCommGetLastAlgorithm: name is NULL"));
  const std::string last = comm->impl->lastAlgorithm();
  if (nameLen < last.size() + 1)
    return fail(comm, loom::makeError(Code::kInvalidArgument,
                                      "loomCommGetLastAlgorithm: nameLen %zu is too small for \"%s\" (needs %zu)",
                                      nameLen, last.c_str(), last.size() + 1));
  std::memcpy(name, last.c_str(), last.size() + 1);
  return loomSuccess;
}

}  // extern "C"
