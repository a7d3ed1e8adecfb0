// The Python extension loom_torch._C: the process-group class and the
// creator that torch.distributed calls for init_process_group("loom")
// (registered by loom_torch/__init__.py).
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include "bindings/torch/process_group_loom.h"

namespace py = pybind11;

namespace {

// torch.distributed's creator signature for third-party backends.
c10::intrusive_ptr<c10d::ProcessGroup> createProcessGroupLoom(const c10::intrusive_ptr<c10d::Store>& store,
                                                              int rank, int size,
                                                              std::chrono::milliseconds timeout) {
  return c10::make_intrusive<loom_torch::ProcessGroupLoom>(store, rank, size, timeout);
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "Loom collectives as the torch.distributed backend \"loom\"";
  // c10d's classes must be registered with pybind11 before ours derives from them.
  py::module_::import("torch.distributed");

  py::class_<loom_torch::ProcessGroupLoom, c10d::ProcessGroup, c10::intrusive_ptr<loom_torch::ProcessGroupLoom>>(
      m, "ProcessGroupLoom",
      "A c10d ProcessGroup over one Loom communicator; create it through "
      "torch.distributed.init_process_group(\"loom\") or new_group(backend=\"loom\").");

  // Bootstrapping waits for every rank: let other Python threads run meanwhile.
  m.def("create_process_group", &createProcessGroupLoom, py::arg("store"), py::arg("rank"), py::arg("size"),
        py::arg("timeout"), py::call_guard<py::gil_scoped_release>(),
        "Creates the process group of `rank` among `size` ranks; the Loom unique id travels through `store`, "
        "and `timeout` becomes the communicator's deadline.");

  m.def("version", [] {
    int v = 0;
    loomGetVersion(&v);
    return v;
  });
}
